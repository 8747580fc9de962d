"""MEDEC (MS collection): find and correct the medical error in a clinical note, or answer CORRECT (HELM
``MedecScenario``, ``medec``).

HELM's test split is the MS test file at the commit pinned here: the 597 rows with a non-empty ``Sentences``
column (the other 328 CSV rows are empty padding, counted in ``Loaded.removed``). The reference is
``"<Error Sentence ID> <Corrected Sentence>"`` for a note with an error and ``"CORRECT"`` otherwise; the error
sentence id is also kept in ``extra`` so that the default metric can score sentence accuracy (see
:mod:`pytest_medhelm.metrics.medec`). Instance ids are the ``Text ID`` column (``ms-test-0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.medec import MEDEC_ERROR_FLAG_ACCURACY
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "medec"
FILE = "MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv"
COLUMNS = ("Text ID", "Sentences", "Error Flag", "Error Type", "Error Sentence ID", "Corrected Sentence")


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    instances = Loaded(slug=SLUG)
    seen: set[str] = set()
    for row in read_csv_rows(path, COLUMNS):
        if not row["Sentences"]:
            # HELM skips these; upstream they are all-empty padding rows. One with content is a broken file.
            if any(value.strip() for value in row.values.values()):
                raise DataError(path, row.where, "column 'Sentences' is empty in a row that has other values")
            instances.note_removed("empty padding row (no 'Sentences'; HELM skips it)")
            continue
        text_id = row["Text ID"].strip()
        if not text_id or text_id in seen or " " in text_id:
            raise DataError(path, row.where, f"'Text ID' must be unique, non-empty, without spaces, got {text_id!r}")
        seen.add(text_id)
        try:
            error_flag = int(row["Error Flag"])
        except ValueError:
            raise DataError(path, row.where, f"'Error Flag' must be 0 or 1, got {row['Error Flag']!r}") from None
        sentence_id = row["Error Sentence ID"].strip()
        corrected = row["Corrected Sentence"].strip()
        has_error = error_flag == 1 and corrected != "NA" and sentence_id != "-1"
        if has_error and not sentence_id.isdigit():
            raise DataError(path, row.where, f"'Error Sentence ID' must be a number, got {sentence_id!r}")
        instances.append(
            Instance(
                id=text_id,
                input=row["Sentences"].strip(),
                references=(f"{sentence_id} {corrected}" if has_error else "CORRECT",),
                extra={
                    "error_flag": 1 if has_error else 0,
                    "error_sentence_id": int(sentence_id) if has_error else None,
                    "error_type": row["Error Type"],
                },
                benchmark=SLUG,
            )
        )
    return instances.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="Medec",
    subcategory="Planning Treatments",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url=(
                "https://raw.githubusercontent.com/abachaa/MEDEC/49c59dcba43a7af8717590a405b11a57f42b04df/"
                "MEDEC-MS/MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv"
            ),
            sha256="f35e2c3c1e4d98ca900394c4fcff14c2a84752e48ddc83698401da6a360c707e",
            description="MEDEC MS test set, 597 notes (CC BY 4.0)",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions=(
            "The following is a medical narrative about a patient. "
            "You are a skilled medical doctor reviewing the clinical text. "
            "The text is either correct or contains one error. "
            "The text has a sentence per line. Each line starts with the "
            "sentence ID, followed by a space character then the sentence to check. "
            "Check every sentence of the text. "
            "If the text is correct return the following output: CORRECT. "
            "If the text has a medical error, return the sentence ID of the "
            "sentence containing the error, followed by a space, "
            "and a corrected version of the sentence."
        ),
        input_noun="Clinical Note",
        output_noun="Answer",
    ),
    metric=MEDEC_ERROR_FLAG_ACCURACY,
    max_tokens=256,
    description="Find the sentence with a medical error in a clinical note and correct it, or answer CORRECT.",
    example=(
        "Text ID,Text,Sentences,Error Flag,Error Type,Error Sentence ID,Error Sentence,Corrected Sentence,Corrected "
        "Text / ms-test-0,\"…\",\"0 A synthetic man has chest pain.\\n1 He is given ibuprofen.\",1,treatment,1,He is "
        "given ibuprofen.,He is given aspirin.,\"…\""
    ),
    instance_count=597,
    filters="all-empty padding rows without 'Sentences' (328 on the pinned data): HELM skips them",
)
