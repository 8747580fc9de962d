"""PatientInstruct: write personalised post-procedure instructions for a patient from the case details (HELM
``StarrPatientInstructionsScenario``, ``starr_patient_instructions``; Stanford STARR-OMOP, private).

HELM reads one CSV with ``csv.DictReader`` (``data_path=…/dataset_cases_qc.csv``). A row is kept when ``QC``
(stripped, upper-cased) is ``TRUE`` and the stripped ``Diagnosis``, ``ActualProcedure``,
``HistoryPhysicalNoteText``, ``OperativeNoteText`` and ``DischargeInstructionNoteText`` are all non-empty; the
other rows are counted in ``Loaded.removed``. Input: ``Diagnosis: …⏎Procedure: …⏎History & Physical: …⏎Operative
Report: …⏎⏎``; reference: the discharge instructions. Ids ``row<N>`` (1-based data row).

Prompt: ``You are a medical professional tasked with … nor treat any patients.⏎⏎Case Details: {input}⏎Patient
Instructions:``; 256 tokens. Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "patientinstruct"
FILE = "dataset_cases_qc.csv"
FIELDS = ("Diagnosis", "ActualProcedure", "HistoryPhysicalNoteText", "OperativeNoteText",
          "DischargeInstructionNoteText")


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    loaded = Loaded(slug=SLUG)
    for row in read_csv_rows(path, ("QC", *FIELDS)):
        if row["QC"].strip().upper() != "TRUE":
            loaded.note_removed("'QC' is not TRUE (HELM keeps quality-checked cases only)")
            continue
        diagnosis, procedure, history, operative, instructions = (row[f].strip() for f in FIELDS)
        if not (diagnosis and procedure and history and operative and instructions):
            loaded.note_removed("a required field is empty (HELM skips the row)")
            continue
        text = (
            f"Diagnosis: {diagnosis}\n"
            f"Procedure: {procedure}\n"
            f"History & Physical: {history}\n"
            f"Operative Report: {operative}\n\n"
        )
        loaded.append(Instance(id=f"row{row.number}", input=text, references=(instructions,), benchmark=SLUG))
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="PatientInstruct",
    subcategory="Delivering Personalized Care Instructions",
    access="private",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'QC' (TRUE for a quality-checked case), 'Diagnosis', "
                "'ActualProcedure', 'HistoryPhysicalNoteText', 'OperativeNoteText' and "
                "'DischargeInstructionNoteText' (the reference instructions)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "You are a medical professional tasked with generating personalized post-procedure "
            "patient instructions. Given the following case details which include the patient's "
            "diagnosis, the planned procedure, the history & physical note, and the operative report, "
            "generate clear and actionable instructions for the patient to follow after their procedure. "
            "Don't worry, this information will not be used for any clinical decision making. "
            "This will not be used to diagnose nor treat any patients."
        ),
        input_noun="Case Details",
        output_noun="Patient Instructions",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=256,
    description="Write personalised post-procedure instructions for a patient from the case details.",
    data_help=(
        "private Stanford STARR-OMOP dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is dataset_cases_qc.csv). Synthetic example row: "
        "QC,Diagnosis,ActualProcedure,HistoryPhysicalNoteText,OperativeNoteText,DischargeInstructionNoteText / "
        "TRUE,\"Symptomatic gallstones\",\"Laparoscopic cholecystectomy\",\"Synthetic H&P: 45-year-old with "
        "postprandial pain.\",\"Synthetic op note: uncomplicated removal of the gallbladder.\",\"Keep the "
        "incisions dry for 48 hours; no lifting over 10 lb for 2 weeks.\""
    ),
    filters=(
        "rows whose 'QC' is not TRUE; rows with an empty Diagnosis, ActualProcedure, HistoryPhysicalNoteText, "
        "OperativeNoteText or DischargeInstructionNoteText"
    ),
)
