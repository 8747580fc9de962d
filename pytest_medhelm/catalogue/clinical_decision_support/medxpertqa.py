"""MedXpertQA (Text): expert-level medical multiple-choice questions, ten options A-J (medhelm 0.8.0
``MedXpertQATextScenario``, run spec ``medxpert_qa_text``; arxiv.org/abs/2501.18362).

**Data.** medhelm loads the Hugging Face dataset ``TsinghuaC3I/MedXpertQA``, config ``Text``, split ``test``, at no
pinned revision; the same rows are the dataset's file ``Text/test.jsonl``, read here as ``DIR/medxpertqa/test.jsonl``
(downloaded from the Hub's ``main`` when absent). Neither a revision nor a sha256 is known to this project, so the
file is not verified (recorded as such under ``run.data_unverified``). Fields used: ``question``
(which already ends with
``Answer Choices: (A) … (J) …``), ``options`` (letter -> text), ``label`` (the correct letter); ``id``,
``medical_task``, ``body_system`` and ``question_type`` are kept in the instance's extra.

**Instances.** Every row, in file order, ids ``id0``, ``id1``, … as medhelm numbers them. Options in the row's
order; a row whose ``label`` is not one of its option letters, or whose options are not letter -> text, is a
:class:`~pytest_medhelm.data.errors.DataError` naming the file and line (medhelm would score it 0 whatever the
answer). **Prompt**: HELM's multiple-choice-joint adapter (nouns ``Question`` / ``Answer``), so the options appear
twice, inside the question and as the lettered list, as medhelm sends them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_jsonl, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import LETTERS, MultipleChoicePrompt
from pytest_medhelm.values import Instance

SLUG = "medxpertqa"
FILE = "test.jsonl"
EXTRA_FIELDS = ("id", "medical_task", "body_system", "question_type")


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    path = data_file(files, FILE)
    rows = read_jsonl(path)
    if not rows:
        raise DataError(path, "", "no rows")
    instances = []
    for number, row in enumerate(rows):
        where = f"line {row.line}"
        question = require(row, "question", path, where)
        options = require(row, "options", path, where)
        label = require(row, "label", path, where)
        if not isinstance(question, str):
            raise DataError(path, where, f"'question' must be a string, got {type(question).__name__}")
        if not (isinstance(options, dict) and options and all(
                isinstance(k, str) and len(k) == 1 and k in LETTERS and isinstance(v, str)
                for k, v in options.items())):
            raise DataError(path, where, f"'options' must map option letters to texts, got {options!r:.120}")
        if label not in options:
            raise DataError(path, where, f"'label' {label!r} is not one of the option letters {list(options)}")
        instances.append(
            Instance(
                id=f"id{number}",
                input=question,
                references=(options[label],),
                choices=tuple(options.values()),
                correct=list(options).index(label),
                extra={key: row.get(key) for key in EXTRA_FIELDS},
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedXpertQA",
    # medhelm 0.8.0 gives a category only; this subcategory of it is ours: a medical knowledge question, as MedQA's
    subcategory="Providing Clinical Knowledge Support",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url="https://huggingface.co/datasets/TsinghuaC3I/MedXpertQA/resolve/main/Text/test.jsonl",
            sha256="",  # neither a Hub revision nor a sha256 is known to this project: not verified
            description=(
                "the Text subset's test split of the Hugging Face dataset TsinghuaC3I/MedXpertQA (file Text/test.jsonl,"
                " MIT licence): JSON lines with question, options (A-J -> text), label, id, medical_task, body_system, "
                "question_type"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions=("You are a medical expert assistant. Answer the following medical question with single letter "
                      "from options."),
        input_noun="Question",
        output_noun="Answer",
    ),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer an expert-level medical multiple-choice question (ten options, 17 specialties).",
    example=(
        "{\"id\": \"Text-0\", \"question\": \"A synthetic 20-year-old has finding X. Which is the most likely "
        "explanation? Answer Choices: (A) Alpha (B) Beta … (J) Kappa\", \"options\": {\"A\": \"Alpha\", \"B\": "
        "\"Beta\", …, \"J\": \"Kappa\"}, \"label\": \"B\", \"medical_task\": \"Diagnosis\", \"body_system\": "
        "\"Respiratory\", \"question_type\": \"Reasoning\"}"
    ),
)
