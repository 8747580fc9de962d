"""Medbullets: USMLE Step 2/3 style clinical questions with five options (HELM ``MedBulletsScenario``,
``medbullets``).

HELM reads ``medbullets_op5.csv`` from the repository's ``main`` branch (unpinned); it is pinned here to the
commit that branch pointed to. All 308 rows are the test split, in file order. Instance ids come from each
question's ``link``: the Medbullets question number (``108992``) or the short-link code (``47KxMQs``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import Row, data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance

SLUG = "medbullets"
FILE = "medbullets_op5.csv"
OPTION_COLUMNS = ("opa", "opb", "opc", "opd", "ope")
LETTERS = "ABCDE"

_QID = re.compile(r"[?&]qid=(\d+)")


def _instance_id(row: Row) -> str:
    link = row["link"].strip()
    match = _QID.search(link)
    if match:
        return match.group(1)
    tail = link.rstrip("/").rsplit("/", 1)[-1]
    return tail if tail and re.fullmatch(r"[A-Za-z0-9_-]+", tail) else f"row{row.number}"


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    path = data_file(files, FILE)
    instances = []
    seen: set[str] = set()
    for row in read_csv_rows(path, ("link", "question", *OPTION_COLUMNS, "answer_idx")):
        # HELM skips (with a printed warning) a row without question, answer_idx or opa; none exists upstream, and
        # a file that has one is broken, so it is an error here rather than a silently smaller benchmark
        for column in ("question", "answer_idx", "opa"):
            if not row[column]:
                raise DataError(path, row.where, f"column {column!r} is empty")
        answer = row["answer_idx"]
        if answer not in LETTERS:
            raise DataError(path, row.where, f"answer_idx must be one of A-E, got {answer!r}")
        instance_id = _instance_id(row)
        if instance_id in seen:
            raise DataError(path, row.where, f"duplicate question id {instance_id!r} (from column 'link')")
        seen.add(instance_id)
        choices = tuple(row[column] for column in OPTION_COLUMNS)
        correct = LETTERS.index(answer)
        instances.append(
            Instance(
                id=instance_id,
                input=row["question"],
                references=(choices[correct],),
                choices=choices,
                correct=correct,
                extra={"link": row["link"]},
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="Medbullets",
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url=(
                "https://raw.githubusercontent.com/HanjieChen/ChallengeClinicalQA/"
                "ef3c9da03fc17f46fbd95ce860e0a55c51ed3606/medbullets/medbullets_op5.csv"
            ),
            sha256="7da4b1397418b4bd15074066ea6a377ac44a599794a959cd8ebc76937ea597e6",
            description="308 questions with options A-E (no licence stated upstream: do not redistribute)",
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions=(
            "You are a highly knowledgeable AI assistant specializing in medicine. Your task is to answer medical "
            "questions similar to those found on the USMLE Step 2/3 exams. You will be provided with a clinical "
            "scenario followed by several multiple-choice options.\n\n"
            "Select the correct answer by outputting only the letter corresponding to your choice (A, B, C, D, or E)."
        ),
        input_noun="Clinical Scenario",
        output_noun="Answer",
    ),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a USMLE Step 2/3 style clinical question with five options.",
    example=(
        "link,question,opa,opb,opc,opd,ope,answer_idx,answer,explanation / "
        "https://step2.medbullets.com/testview?qid=108992,\"A synthetic 30-year-old presents with fever. What is the "
        "next step?\",Observe,Blood cultures,CT scan,Biopsy,Discharge,B,Blood cultures,\"Synthetic explanation.\""
    ),
    instance_count=308,
)
