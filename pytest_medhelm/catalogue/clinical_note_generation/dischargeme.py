"""DischargeMe: write the brief hospital course and the discharge instructions of a MIMIC-IV admission from its
discharge note and radiology report (HELM ``DischargeMeScenario``, ``dischargeme``; gated, PhysioNet
``discharge-me/1.3``, the BioNLP ACL'24 shared task).

**Files**: the six ``test_phase_1`` tables of the PhysioNet release, gzip-compressed CSV: ``diagnosis``,
``triage`` (keyed by ``subject_id``), ``discharge`` (``subject_id``, ``hadm_id``, ``text``), ``radiology``
(``hadm_id``, ``text``), ``edstays`` (``hadm_id``) and ``discharge_target`` (``hadm_id``,
``brief_hospital_course``, ``discharge_instructions``). HELM reads them with pandas (``keep_default_na=False``:
every cell is text, empty cells stay empty).

**Instances, as HELM's joins produce them.** diagnosis ⋈ triage ⋈ discharge on ``subject_id``, then ⋈ radiology
and ⋈ edstays on ``hadm_id`` (inner joins), ``drop_duplicates("hadm_id")`` (so the *first* radiology report of an
admission in file order is the one used), then ⋈ discharge_target on ``hadm_id``. The resulting order, which
HELM's sample indexes into, is: patients in order of their first row in ``diagnosis``, and for each patient the
admissions in ``discharge`` order (the same for pandas before and after 2.2, whose merge ordering changed). An
admission absent from any table is left out, and so is a repeated discharge note of an admission (both counted
in ``Loaded.removed``). The discharge text has the target
section removed (``text.replace(target, "")``).

**Two instances per admission**, brief hospital course then discharge instructions, each with the input
``Generate the {task} from the following patient discharge text and radiology report text.`` + 4 spaces (a
line-continuation artifact of HELM's source) + ``⏎⏎Discharge Text:⏎{text}⏎⏎Radiology Report:⏎{report}⏎⏎{task}:⏎``
where ``{task}`` is ``Brief Hospital Course`` or ``Discharge Instructions``; ids ``<hadm_id>-bhc`` and
``<hadm_id>-di``. Prompt: ``Given a discharge text, … from the context provided.⏎⏎{input}⏎Answer:``; 300 tokens.
Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import safe_id, unique_id
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "dischargeme"
FOLDER = "test_phase_1"
DIAGNOSIS = f"{FOLDER}/diagnosis.csv.gz"
TRIAGE = f"{FOLDER}/triage.csv.gz"
DISCHARGE = f"{FOLDER}/discharge.csv.gz"
RADIOLOGY = f"{FOLDER}/radiology.csv.gz"
EDSTAYS = f"{FOLDER}/edstays.csv.gz"
TARGET = f"{FOLDER}/discharge_target.csv.gz"

TASKS = (("brief_hospital_course", "Brief Hospital Course", "bhc"),
         ("discharge_instructions", "Discharge Instructions", "di"))


def create_prompt(text: str, radiology: str, task: str) -> str:
    return (
        f"Generate the {task} from the following patient discharge text and radiology report text."
        f"    \n\nDischarge Text:\n{text}\n\nRadiology Report:\n{radiology}\n\n{task}:\n"
    )


def _key(value: str) -> str:
    return value.strip()


def build_instances(files: Mapping[str, Path]) -> Loaded:
    rows = {
        name: read_csv_rows(data_file(files, name), columns, gz=True, universal_newlines=False)
        for name, columns in (
            (DIAGNOSIS, ("subject_id",)),
            (TRIAGE, ("subject_id",)),
            (DISCHARGE, ("subject_id", "hadm_id", "text")),
            (EDSTAYS, ("hadm_id",)),
            (TARGET, ("hadm_id", "brief_hospital_course", "discharge_instructions")),
            (RADIOLOGY, ("hadm_id", "text")),
        )
    }
    triage_subjects = {_key(r["subject_id"]) for r in rows[TRIAGE]}
    subjects: list[str] = []  # in order of first appearance in diagnosis, when also in triage
    seen_subjects: set[str] = set()
    for r in rows[DIAGNOSIS]:
        subject = _key(r["subject_id"])
        if subject not in seen_subjects:
            seen_subjects.add(subject)
            if subject in triage_subjects:
                subjects.append(subject)
    discharges: dict[str, list[tuple[str, str]]] = {}
    for r in rows[DISCHARGE]:
        discharges.setdefault(_key(r["subject_id"]), []).append((_key(r["hadm_id"]), r["text"]))
    ed_admissions = {_key(r["hadm_id"]) for r in rows[EDSTAYS]}
    first_report: dict[str, str] = {}
    for r in rows[RADIOLOGY]:
        first_report.setdefault(_key(r["hadm_id"]), r["text"])
    targets: dict[str, list] = {}
    for r in rows[TARGET]:
        targets.setdefault(_key(r["hadm_id"]), []).append(r)

    loaded = Loaded(slug=SLUG)
    used: set[str] = set()
    seen_ids: set[str] = set()
    for subject in subjects:
        for hadm, text in discharges.get(subject, ()):
            if hadm in used:
                loaded.note_removed("repeated hadm_id in the discharge notes (drop_duplicates keeps the first)")
                continue
            if hadm not in first_report or hadm not in ed_admissions or hadm not in targets:
                used.add(hadm)
                loaded.note_removed("admission without a radiology report, an ED stay or a target (inner joins)")
                continue
            used.add(hadm)
            for target in targets[hadm]:
                for column, task, suffix in TASKS:
                    reference = target[column]
                    loaded.append(
                        Instance(
                            id=unique_id(f"{safe_id(hadm)}-{suffix}", seen_ids),
                            input=create_prompt(text.replace(reference, ""), first_report[hadm], task),
                            references=(reference,),
                            extra={"hadm_id": hadm, "task": column},
                            benchmark=SLUG,
                        )
                    )
    kept_subjects = set(subjects)
    dropped = sum(len(admissions) for subject, admissions in discharges.items() if subject not in kept_subjects)
    loaded.note_removed("discharge note of a patient absent from diagnosis or triage (inner joins)", dropped)
    return loaded.done()


def _file(name: str, columns: str) -> DataFile:
    return DataFile(name=name, description=f"gzip-compressed CSV of the PhysioNet release, columns {columns}")


BENCHMARK = Benchmark(
    slug=SLUG,
    name="DischargeMe",
    subcategory="Documenting Patient Visits",
    access="gated",
    kind="open",
    files=(
        _file(DIAGNOSIS, "'subject_id', … (diagnoses of the ED stays)"),
        _file(TRIAGE, "'subject_id', … (ED triage)"),
        _file(DISCHARGE, "'subject_id', 'hadm_id', 'text' (the discharge notes)"),
        _file(RADIOLOGY, "'hadm_id', 'text' (the radiology reports)"),
        _file(EDSTAYS, "'hadm_id', … (ED stays)"),
        _file(TARGET, "'hadm_id', 'brief_hospital_course', 'discharge_instructions' (the references)"),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "Given a discharge text, a radiology report text, and a target "
            "document of either discharge instructions or a brief hospital course, "
            "return the generated target document from the context provided."
        ),
        input_noun=None,
        output_noun="Answer",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=300,
    description="Write the brief hospital course and the discharge instructions of an admission.",
    data_help=(
        "gated: credentialed access on PhysioNet, https://physionet.org/content/discharge-me/1.3/ (wget -r -N -c "
        "-np --user USER --ask-password https://physionet.org/files/discharge-me/1.3/), then copy its "
        "test_phase_1 folder here. Synthetic example rows: discharge.csv.gz "
        "'note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text' / '1-DS-1,1,11,DS,1,,,\"Name: ___ "
        "... Brief Hospital Course: Admitted for cellulitis ... Discharge Instructions: Take cephalexin.\"'; "
        "discharge_target.csv.gz 'note_id,hadm_id,discharge_instructions,brief_hospital_course,"
        "discharge_instructions_word_count,brief_hospital_course_word_count' / '1-DS-1,11,Take cephalexin.,Admitted "
        "for cellulitis ...,2,4'"
    ),
    filters=(
        "admissions without a radiology report, an ED stay or a target; discharge notes of patients absent from "
        "diagnosis or triage (HELM's inner joins); a repeated hadm_id in the discharge notes (drop_duplicates keeps "
        "the first)"
    ),
)
