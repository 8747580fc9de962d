"""MedMCQA: answer an Indian medical entrance exam question (AIIMS / NEET PG), four options (HELM
``MedMCQAScenario``, ``medhelm_med_mcqa``; added to MedHELM in August 2025, after the paper).

Source: the MedMCQA authors' Google Drive archive (id ``15VkJdq5eyWIkfb_aoD3oS8i4tScbHYky``, published as
``data.zip`` holding ``train.json``, ``dev.json`` and ``test.json``; despite the extension each is JSON lines).
Its sha256 is not known to this project, so the download is not verified (``sha256=""``). Put in
``--medhelm-data-dir DIR/medmcqa/`` either the archive or the extracted ``dev.json``; the member is read from the
archive in memory. The download goes through :mod:`pytest_medhelm.data.gdrive`.

Instances: HELM evaluates the ``dev`` file only (the test set's answers are not public; ``train`` is never
evaluated and not read), in file order (4,183 questions in the published file). Nothing is filtered: a row whose
``cop`` (the correct option, 1-4 for ``opa``-``opd``) is not 1-4, or with an option that is not a string, is a
:class:`~pytest_medhelm.data.errors.DataError`. Options are ``opa``, ``opb``, ``opc``, ``opd`` in that order.
Instance ids are ``dev-<line>``; the dataset's own id is in ``Instance.extra["id"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.clinical_decision_support import medqa
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data import gdrive
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import Row, read_jsonl, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.values import Instance

SLUG = "medmcqa"
DRIVE_ID = "15VkJdq5eyWIkfb_aoD3oS8i4tScbHYky"
ARCHIVE = "data.zip"
DEV_FILE = "dev.json"
OPTION_KEYS = ("opa", "opb", "opc", "opd")  # cop 1..4


def dev_rows(files: Mapping[str, Path]) -> tuple[list[Row], str]:
    if DEV_FILE in files:
        return read_jsonl(files[DEV_FILE]), str(files[DEV_FILE])
    if ARCHIVE in files:
        return gdrive.zip_jsonl(files[ARCHIVE], DEV_FILE)
    raise DataMissing(
        f"{SLUG}: {DEV_FILE} not found; put {ARCHIVE} (Google Drive {gdrive.download_url(DRIVE_ID)}) or the "
        f"extracted {DEV_FILE} in the data directory's {SLUG}/ folder"
    )


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    rows, label = dev_rows(files)
    if not rows:
        raise DataError(label, "", "no rows")
    instances = []
    for row in rows:
        where = f"line {row.line}"
        question = require(row, "question", label, where)
        if not isinstance(question, str):
            raise DataError(label, where, f"'question' must be a string, got {type(question).__name__}")
        choices = tuple(require(row, key, label, where) for key in OPTION_KEYS)
        for key, text in zip(OPTION_KEYS, choices):
            if not isinstance(text, str):
                raise DataError(label, where, f"option {key!r} must be a string, got {text!r}")
        cop = require(row, "cop", label, where)
        if isinstance(cop, bool) or not isinstance(cop, int) or not 1 <= cop <= 4:
            raise DataError(label, where, f"'cop' must be the correct option's number 1-4, got {cop!r}")
        instances.append(
            Instance(
                id=f"dev-{row.line}",
                input=question,
                references=(choices[cop - 1],),
                choices=choices,
                correct=cop - 1,
                extra={
                    "id": row.get("id", ""),
                    "subject": row.get("subject_name", ""),
                    "topic": row.get("topic_name", ""),
                    "choice_type": row.get("choice_type", ""),
                },
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedMCQA",
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=DEV_FILE,
            description=f"extracted from {ARCHIVE}: the dev questions, one JSON object per line",
            optional=True,
            stands_in_for=ARCHIVE,
        ),
        DataFile(
            name=ARCHIVE,
            url=gdrive.download_url(DRIVE_ID),
            sha256="",  # not known to this project: the download is not verified
            description="the MedMCQA authors' archive (medmcqa.github.io, MIT licence); or the extracted dev.json",
        ),
    ),
    build_instances=build_instances,
    prompt=medqa.PROMPT,  # HELM's run specs give both the same prompt
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a four-option question of an Indian medical entrance exam (AIIMS / NEET PG).",
    example=(
        "{\"id\": \"synthetic-1\", \"question\": \"Which synthetic nerve supplies the deltoid?\", \"opa\": \"Radial\", "
        "\"opb\": \"Axillary\", \"opc\": \"Ulnar\", \"opd\": \"Median\", \"cop\": 2, \"choice_type\": \"single\", "
        "\"exp\": \"\", \"subject_name\": \"Anatomy\", \"topic_name\": \"Upper limb\"}"
    ),
    instance_count=4183,
)
