"""MedicationQA: answer a consumer's question about a medication (HELM ``MedicationQAScenario``, ``medication_qa``).

HELM reads ``MedInfo2019-QA-Medications.xlsx`` with ``pandas.read_excel`` (first sheet, ``DrugQA``; header row 1)
and keeps the rows whose ``Answer`` is not null (``data[~data.Answer.isna()]``), in sheet order. The input is the
``Question`` cell as is, the reference the ``Answer`` cell.

**Count: 689, not 690.** The sheet has 690 data rows and every one has an ``Answer`` cell, but pandas reads the
strings ``"n/a"``, ``"NA"``, ``"null"``, ``"None"``, ... as null (its default ``na_values``). Spreadsheet row 214
(``"how about the sexual medicine name"``, Question Type ``not_drug_question``) has the answer ``"n/a"``, so
HELM drops it: HELM's test split is 689 instances. This was checked by running HELM's two lines with
pandas 3.1.1 on the pinned file: the same 689 (question, answer) pairs in the same order as this loader.

This loader reads the workbook with openpyxl the way pandas does (read-only, cached formula values, integral floats
as integers) and applies pandas' notion of null: an empty cell, an error cell, or one of pandas' default NA
strings. The rows each rule drops are counted in ``Loaded.removed`` (and by :func:`build_instances_with_report`:
``{"blank_row": 0, "no_answer": 1}`` on the published file), so that nothing is dropped silently. A row with an
answer but no question is a :class:`~pytest_medhelm.data.errors.DataError` (HELM would fail on it later).
Instance ids are the spreadsheet row numbers (``row2`` is the first question).

HELM downloads the file from the ``master`` branch, unpinned; it is pinned here to the commit that was checked
(``8756adc5…``). No licence is stated upstream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import PANDAS_NA
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import check_not_empty, data_file
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "medicationqa"
FILE = "MedInfo2019-QA-Medications.xlsx"
COMMIT = "8756adc5f4bb99f6bcff690a13921337d9f9bb7e"

#: pandas' default NA strings (``pandas._libs.parsers.STR_NA_VALUES``)
PANDAS_NA_STRINGS = PANDAS_NA

#: what the loader's filters remove: report key (:func:`build_instances_with_report`) → reason in ``Loaded.removed``
DROP_REASONS = {
    "blank_row": "blank row: every cell empty (HELM's filter drops it: no Answer)",
    "no_answer": "no 'Answer' (pandas reads an empty cell or an NA string such as \"n/a\" as null; HELM keeps "
                 "data[~data.Answer.isna()])",
}


def _cell_value(cell: Any) -> Any:
    """A cell as pandas' openpyxl reader converts it: errors are null, integral floats become ints."""
    value = getattr(cell, "value", None)
    if value is None or getattr(cell, "data_type", None) == "e":
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value in PANDAS_NA_STRINGS


def read_sheet(path: Path) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """The header and the data rows of the first sheet: (column names, [(spreadsheet row number, column → value)]).

    Trailing rows with no value at all are dropped, as pandas does (sheets often carry formatted empty rows).
    """
    check_not_empty(path)
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True, keep_links=False)
    except Exception as exc:  # noqa: BLE001 - BadZipFile, openpyxl's InvalidFileException, a damaged part (KeyError)...
        raise DataError(path, "", f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})") from None
    try:
        sheet = workbook.worksheets[0]
        rows = sheet.iter_rows()
        header_cells = next(rows, None)
        if header_cells is None:
            raise DataError(path, f"sheet {sheet.title!r}", "the sheet is empty; expected a header row")
        header = [str(value) if (value := _cell_value(cell)) is not None else f"Unnamed: {i}"
                  for i, cell in enumerate(header_cells)]
        out = []
        for number, cells in enumerate(rows, start=2):
            values = [_cell_value(cell) for cell in cells][: len(header)]
            out.append((number, dict(zip(header, values + [None] * (len(header) - len(values))))))
    finally:
        workbook.close()
    while out and all(value is None for value in out[-1][1].values()):
        out.pop()
    return header, out


def build_instances(files: Mapping[str, Path]) -> Loaded:
    """The rows with an answer, in sheet order; rows without one, and blank rows, are counted in ``removed``."""
    path = data_file(files, FILE)
    header, rows = read_sheet(path)
    missing = [column for column in ("Question", "Answer") if column not in header]
    if missing:
        raise DataError(
            path,
            "header (sheet row 1)",
            f"missing column(s) {', '.join(map(repr, missing))}; found columns {', '.join(map(repr, header))}",
        )
    loaded = Loaded(slug=SLUG)
    for number, row in rows:
        if all(_is_null(value) for value in row.values()):
            loaded.note_removed(DROP_REASONS["blank_row"])
            continue
        answer, question = row["Answer"], row["Question"]
        if _is_null(answer):
            loaded.note_removed(DROP_REASONS["no_answer"])
            continue
        if _is_null(question) or not isinstance(question, str):
            raise DataError(path, f"sheet row {number}", f"expected a Question text with the Answer, got {question!r}")
        loaded.append(
            Instance(
                id=f"row{number}",
                input=question,
                references=(str(answer),),
                extra={"focus": row.get("Focus (Drug)"), "question_type": row.get("Question Type")},
                benchmark=SLUG,
            )
        )
    if not loaded:
        raise DataError(path, "", "no row with both a Question and an Answer")
    return loaded.done()


def build_instances_with_report(files: Mapping[str, Path]) -> tuple[Loaded, dict[str, int]]:
    """(instances, dropped by report key, zeros included): :func:`build_instances` with ``removed`` keyed short."""
    loaded = build_instances(files)
    return loaded, loaded.counts(DROP_REASONS)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedicationQA",
    subcategory="Providing Patient Education Resources",
    access="public",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            url=f"https://raw.githubusercontent.com/abachaa/Medication_QA_MedInfo2019/{COMMIT}/{FILE}",
            sha256="4f13d0e3b195bd6a5d72a1872f9118cb5f69fd02c370001695330cfc9e3b5832",
            description="the MedInfo 2019 medication QA workbook: sheet DrugQA, columns Question and Answer",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Please answer the following consumer health question.",
        input_noun="Question",
        output_noun="Answer",
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=512,
    description="Answer a consumer's question about a medication (scored by the LLM jury).",
    example=(
        "Question | Focus (Drug) | Question Type | Answer | Section Title | URL / \"how much synthetic aspirin can I "
        "take?\" | aspirin | Dose | \"Up to 4 g a day.\" | Dosage | https://example.org"
    ),
    instance_count=689,
    filters=(
        "rows whose Answer pandas reads as null (an empty cell or an NA string): 1 on the pinned data, the answer "
        "\"n/a\" of spreadsheet row 214; blank rows"
    ),
)
