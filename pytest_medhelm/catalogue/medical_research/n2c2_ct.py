"""N2C2-CT Matching: does a patient, from their clinical notes, meet a clinical-trial inclusion criterion? (HELM
``N2C2CTMatchingScenario``, ``n2c2_ct_matching``; gated, n2c2 2018 shared task track 1, cohort selection; prompt
of Wornow et al. 2024.)

**Files**: the track's test set, one XML file per patient (``<PatientMatching><TEXT>…</TEXT><TAGS><ABDOMINAL
met="met"/>…</TAGS></PatientMatching>``), in the folder ``test/`` (HELM's ``{data_path}/test``). Files are read in
sorted name order; the patient id is the file name without ``.xml``.

**Three runs averaged.** HELM's confs run the criteria ``ABDOMINAL``, ``ADVANCED-CAD`` and ``CREATININE`` as three
runs (86 test patients each) and its N2C2 score is the mean of the three run means. The loader
makes every patient × criterion an instance, criterion by criterion, with :attr:`Instance.subset` = the criterion,
so the aggregator averages criterion means. Ids: ``<criterion>-<patient id>``.

**Notes**: the ``TEXT`` element with every ``\\n\\n\\n`` replaced by ``\\n`` (one pass), split on 100 asterisks,
each part stripped, empty parts dropped. Each note is shown as ``## Note #i⏎Date: {Record date}⏎{note}`` (the
date is the first ``Record date: YYYY-MM-DD`` in the note, empty if none); notes are joined by ``⏎`` + 50
asterisks + ``⏎⏎``. The current date is the last record date found over the notes (``None`` when there is none, as
HELM prints it). The label is yes when the criterion's tag has ``met="met"``.

Prompt (multiple choice, input noun ``""``): ``Answer A for yes, B for no.⏎⏎: ⏎    # Task⏎    Your job is … ⏎
# Question⏎    Does the patient meet the inclusion criterion "{criterion}"?⏎    ⏎A. yes⏎B. no⏎Answer A for yes, B
for no. Do not add any other text, punctuation, or symbols:`` (HELM's prompt is an indented triple-quoted string:
every line carries 4 spaces, and its line continuations leave runs of 5 spaces inside sentences).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "n2c2_ct"
FOLDER = "test"
#: the criteria of HELM's run entries, in their order
CRITERIA = ("ABDOMINAL", "ADVANCED-CAD", "CREATININE")
CHOICES = ("yes", "no")

#: HELM's ``LONG_DEFINITIONS`` of these criteria, byte for byte (the 5-space runs come from line continuations)
LONG_DEFINITIONS = {
    "ABDOMINAL": (
        "History of intra-abdominal surgery. This could include any form of intra-abdominal surgery,     "
        "including but not limited to small/large intestine resection or small bowel obstruction"
    ),
    "ADVANCED-CAD": (
        "Advanced cardiovascular disease (CAD). For the purposes of this annotation, we define     "
        "\u201cadvanced\u201d as having 2 or more of the following: (a) Taking 2 or more medications to treat CAD "
        "(b) History     of myocardial infarction (MI) (c) Currently experiencing angina (d) Ischemia, past or "
        "present.     The patient must have at least 2 of these categories (a,b,c,d) to meet this criterion, "
        "otherwise the patient     does not meet this criterion. For ADVANCED-CAD, be strict in your evaluation of "
        "the patient -- if they just     have cardiovascular disease, then they do not meet this criterion."
    ),
    "CREATININE": "Serum creatinine level above the upper normal limit",
}

_RECORD_DATE = re.compile(r"Record date: (\d{4}-\d{2}-\d{2})")


def split_notes(text: str) -> list[str]:
    text = text.replace("\n\n\n", "\n")
    return [part.strip() for part in text.split("*" * 100) if part.strip() != ""]


def read_patient(path: Path) -> tuple[list[str], dict[str, int]]:
    """(notes, {criterion: 1 if met else 0}) of one n2c2 XML file, as HELM's ``XMLDataLoader`` parses it."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        line, column = exc.position
        raise DataError(path, f"line {line}, column {column}", f"not well-formed XML ({exc})") from None
    except OSError as exc:
        raise DataError(path, "", f"cannot read the file: {exc}") from None
    notes: list[str] | None = None
    tags: dict[str, int] = {}
    for element in root.iter():
        if element.tag == "TEXT":
            notes = split_notes(element.text or "")
        elif element.tag == "TAGS":
            tags = {sub.tag: 1 if sub.attrib.get("met") == "met" else 0 for group in root.iter("TAGS") for sub in group}
    if notes is None:
        raise DataError(path, "", "no <TEXT> element (expected the n2c2 2018 track 1 format)")
    return notes, tags


def note_date(note: str) -> str | None:
    match = _RECORD_DATE.search(note)
    return match.group(1) if match else None


def create_prompt(criterion: str, notes: list[str]) -> str:
    shown = [f"## Note #{i + 1}\nDate: {note_date(note) or ''}\n{note}" for i, note in enumerate(notes)]
    joined = ("\n" + "*" * 50 + "\n\n").join(shown)
    current_date: Any = None
    for note in notes:
        current_date = note_date(note) or current_date
    rule = "-" * 100
    return (
        "\n"
        "    # Task\n"
        "    Your job is to decide whether the given patient meets the inclusion criterion for a clinical trial.\n"
        "\n"
        "    # Inclusion Criterion\n"
        f'    The inclusion criterion being assessed is: "{criterion}".\n'
        f'    The definition of the inclusion criterion is: "{LONG_DEFINITIONS[criterion]}".\n'
        "\n"
        "    # Patient Clinical Notes\n"
        f"    Below is a set of {len(notes)} clinical notes describing the patient's current health status.     "
        "Each note is separated by a header with the date that the note was written, as well as a long list of "
        "asterisks.\n"
        "\n"
        f"    {rule}\n"
        "\n"
        f"    {joined}\n"
        "\n"
        f"    {rule}\n"
        "\n"
        "    # Current Date\n"
        f"    Assume that the current date is: {current_date}\n"
        "\n"
        "    # Question\n"
        f'    Does the patient meet the inclusion criterion "{criterion}"?\n'
        "    "
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    folder = data_file(files, FOLDER)
    if not folder.is_dir():
        raise DataError(folder, "", "expected a folder of n2c2 2018 track 1 XML files")
    names = sorted(name for name in os.listdir(folder) if name.endswith(".xml"))
    if not names:
        raise DataError(folder, "", "no .xml files in the folder")
    patients = [(name[: -len(".xml")], folder / name, *read_patient(folder / name)) for name in names]
    loaded = Loaded(slug=SLUG)
    for criterion in CRITERIA:
        for patient_id, path, notes, tags in patients:
            if criterion not in tags:
                raise DataError(path, "<TAGS>", f"no tag for the criterion {criterion} (found: {', '.join(tags)})")
            correct = 0 if tags[criterion] else 1
            loaded.append(
                Instance(
                    id=f"{criterion}-{patient_id}",
                    input=create_prompt(criterion, notes),
                    references=(CHOICES[correct],),
                    choices=CHOICES,
                    correct=correct,
                    subset=criterion,
                    benchmark=SLUG,
                )
            )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="N2C2-CT",
    subcategory="Managing Research Enrollment",
    access="gated",
    kind="closed",
    files=(
        DataFile(
            name=FOLDER,
            is_dir=True,
            description=(
                "a folder of the n2c2 2018 track 1 test XML files, one per patient: <PatientMatching><TEXT> (the "
                "notes, separated by lines of 100 asterisks, each with 'Record date: YYYY-MM-DD') and <TAGS> with "
                "<ABDOMINAL met=\"met|not met\"/>, <ADVANCED-CAD …/>, <CREATININE …/>"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions="Answer A for yes, B for no.",
        input_noun="",
        output_noun="Answer A for yes, B for no. Do not add any other text, punctuation, or symbols",
    ),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Decide whether a patient meets a clinical-trial inclusion criterion (3 criteria averaged).",
    data_help=(
        "gated: register and sign the data use agreement for the n2c2 NLP research data sets (DBMI Data Portal, "
        "https://portal.dbmi.hms.harvard.edu, 2018 track 1 'Cohort Selection for Clinical Trials') and copy the "
        "test XML files into this folder. Synthetic example file 999.xml: <PatientMatching><TEXT><![CDATA[Record "
        "date: 2090-01-05 ... s/p appendectomy ...]]></TEXT><TAGS><ABDOMINAL met=\"met\" /><ADVANCED-CAD met=\"not "
        "met\" /><CREATININE met=\"not met\" /></TAGS></PatientMatching>"
    ),
)
