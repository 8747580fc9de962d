"""MedQA (USMLE, 4 options): answer a US medical licensing exam question (HELM ``MedQAScenario``,
``medhelm_med_qa``; added to MedHELM in August 2025, after the paper).

Source: the MedQA authors' Google Drive archive (id ``1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw``, published as
``data_clean.zip``), members ``data_clean/questions/US/4_options/phrases_no_exclude_{dev,test}.jsonl``. Its sha256
is not known to this project, so the download is not verified (``sha256=""``). Put in
``--medhelm-data-dir DIR/medqa/`` either the archive, or the two member files extracted
(``phrases_no_exclude_dev.jsonl`` and ``phrases_no_exclude_test.jsonl``, flat); members are read from the archive
in memory, found by the end of their path. The download goes through :mod:`pytest_medhelm.data.gdrive` (Drive's
confirmation page for large files).

Instances: HELM's eval splits are ``valid`` (the ``dev`` file) and ``test``, in that order, each in file order
(1,272 + 1,273 in the published archive); a capped run samples them together, as HELM does, although the
leaderboard reports only the test split. The ``train`` file is not read. Nothing is
filtered: a row without exactly four options, or whose ``answer_idx`` is not one of them, is a
:class:`~pytest_medhelm.data.errors.DataError` (HELM asserts four options). Option texts lose a trailing ``"`` and
whitespace (``answer.rstrip('"').rstrip()``, HELM's fix for rows like ``'Pulmonary embolism\\n"'``); options are
in the row's order. Instance ids are ``dev-<line>`` and ``test-<line>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data import gdrive
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import Row, read_jsonl, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance

SLUG = "medqa"
DRIVE_ID = "1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw"
ARCHIVE = "data_clean.zip"
MEMBER_DIR = "questions/US/4_options"
#: (split label used in ids, member file name), in HELM's order
SPLITS = (("dev", "phrases_no_exclude_dev.jsonl"), ("test", "phrases_no_exclude_test.jsonl"))


#: HELM's prompt of the four-option exam benchmarks added in August 2025 (MedQA and MedMCQA share it)
PROMPT = MultipleChoicePrompt(
    instructions="Give a letter answer among A, B, C or D. Do not include any explanation or additional text.",
    input_noun="Question",
    output_noun="Respond only with 'A', 'B', 'C' or 'D'. Do not add any other text, punctuation, or symbols.",
)


def split_rows(files: Mapping[str, Path], name: str) -> tuple[list[Row], str]:
    """Rows of one split: the extracted member file when present, else the member of the archive."""
    if name in files:
        return read_jsonl(files[name]), str(files[name])
    if ARCHIVE in files:
        return gdrive.zip_jsonl(files[ARCHIVE], f"{MEMBER_DIR}/{name}")
    raise DataMissing(
        f"{SLUG}: {name} not found; put {ARCHIVE} (Google Drive {gdrive.download_url(DRIVE_ID)}) or both extracted "
        f"files {', '.join(n for _, n in SPLITS)} in the data directory's {SLUG}/ folder"
    )


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    instances = []
    for split, name in SPLITS:
        rows, label = split_rows(files, name)
        if not rows:
            raise DataError(label, "", "no rows")
        for row in rows:
            where = f"line {row.line}"
            question = require(row, "question", label, where)
            options = require(row, "options", label, where)
            answer_idx = require(row, "answer_idx", label, where)
            if not isinstance(question, str):
                raise DataError(label, where, f"'question' must be a string, got {type(question).__name__}")
            if not isinstance(options, dict) or len(options) != 4:
                raise DataError(label, where, f"expected 4 answer options (an object A-D), got {options!r:.120}")
            if not all(isinstance(text, str) for text in options.values()):
                raise DataError(label, where, "every option must be a string")
            if answer_idx not in options:
                raise DataError(label, where, f"answer_idx {answer_idx!r} is not one of the options {list(options)}")
            choices = tuple(text.rstrip('"').rstrip() for text in options.values())
            correct = list(options).index(answer_idx)
            instances.append(
                Instance(
                    id=f"{split}-{row.line}",
                    input=question,
                    references=(choices[correct],),
                    choices=choices,
                    correct=correct,
                    extra={"split": "valid" if split == "dev" else split, "meta_info": row.get("meta_info", "")},
                    benchmark=SLUG,
                )
            )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedQA",
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        *(
            DataFile(
                name=name,
                description=f"extracted from {ARCHIVE}: data_clean/{MEMBER_DIR}/{name}",
                optional=True,
                stands_in_for=ARCHIVE,
            )
            for _, name in SPLITS
        ),
        DataFile(
            name=ARCHIVE,
            url=gdrive.download_url(DRIVE_ID),
            sha256="",  # not known to this project: the download is not verified
            description=(
                "the MedQA authors' archive (github.com/jind11/MedQA, MIT licence), about 130 MB; or the two "
                "extracted files phrases_no_exclude_dev.jsonl and phrases_no_exclude_test.jsonl"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=PROMPT,
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a four-option question of the US medical licensing exam (USMLE).",
    example=(
        "{\"question\": \"A synthetic 25-year-old has a fever and a stiff neck. What is the most likely diagnosis?\", "
        "\"answer\": \"Meningitis\", \"options\": {\"A\": \"Migraine\", \"B\": \"Meningitis\", \"C\": \"Sinusitis\", "
        "\"D\": \"Tension headache\"}, \"meta_info\": \"step1\", \"answer_idx\": \"B\"}"
    ),
    instance_count=2545,
)
