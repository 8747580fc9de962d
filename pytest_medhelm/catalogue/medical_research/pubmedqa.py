"""PubMedQA (PQA-L): yes/no/maybe questions on PubMed abstracts (HELM ``PubMedQAScenario``, ``pubmed_qa``).

HELM uses all 1,000 expert-labelled PQA-L items as its test split, in the file's order, and builds the input the
way Liévin et al. did: every context paragraph prefixed by its section label in title case, then the question.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_json, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance

SLUG = "pubmedqa"
FILE = "ori_pqal.json"
ANSWERS = ("yes", "no", "maybe")


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    path = data_file(files, FILE)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(path, "top level", f"expected an object keyed by PMID, got {type(data).__name__}")
    instances = []
    for pmid, example in data.items():
        where = f"key {pmid!r}"
        labels = require(example, "LABELS", path, where)
        contexts = require(example, "CONTEXTS", path, where)
        question = require(example, "QUESTION", path, where)
        decision = require(example, "final_decision", path, where)
        if not (_strings(labels) and _strings(contexts) and len(labels) == len(contexts)):
            raise DataError(path, where, "expected LABELS and CONTEXTS to be lists of strings of the same length")
        if not isinstance(question, str):
            raise DataError(path, where, f"expected QUESTION to be a string, got {type(question).__name__}")
        if decision not in ANSWERS:
            raise DataError(path, where, f"final_decision must be one of {ANSWERS}, got {decision!r}")
        background = "\n".join(f"{label.title()}. {context}" for label, context in zip(labels, contexts))
        # HELM's PassageQuestionInput(passage=background, question=question + "\n", passage_prefix="Context: ",
        # separator="\n\n")
        text = f"Context: {background}\n\nQuestion: {question}\n"
        instances.append(
            Instance(
                id=str(pmid),
                input=text,
                references=(decision,),
                choices=ANSWERS,
                correct=ANSWERS.index(decision),
                extra={"year": example.get("YEAR", "")},
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="PubMedQA",
    subcategory="Conducting Literature Research",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url=(
                "https://raw.githubusercontent.com/pubmedqa/pubmedqa/"
                "1f00b98d5cc626844bf8c4ca513b6e62c40071ec/data/ori_pqal.json"
            ),
            sha256="8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d",
            description="PQA-L: 1,000 expert-labelled questions, a JSON object keyed by PMID (MIT licence)",
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions=(
            "Answer A for yes, B for no or C for maybe. Do not include any explanation or additional text. "
            "Output only the letter on a single line."
        ),
        input_noun="Question",
        output_noun="Answer",
    ),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer yes, no or maybe to a research question about a PubMed abstract.",
    example=(
        "{\"12345678\": {\"QUESTION\": \"Does synthetic drug X lower blood pressure in adults?\", \"CONTEXTS\": [\"A "
        "synthetic randomised trial of 40 adults.\", \"Systolic pressure fell by 8 mmHg.\"], \"LABELS\": [\"METHODS\", "
        "\"RESULTS\"], \"final_decision\": \"yes\", \"YEAR\": \"2020\"}}"
    ),
    instance_count=1000,
)
