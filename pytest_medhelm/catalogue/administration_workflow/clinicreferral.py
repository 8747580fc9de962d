"""ClinicReferral: is a patient eligible for referral to the Sequoia clinic, judged from palliative-care notes?
(HELM ``SHCSequoiaMedScenario``, ``shc_sequoia_med``; Stanford Health Care, private.)

One CSV read with ``csv.DictReader``. Unlike the rest of the SHC family its question column is **``question``**
(not ``prompt``), and every prompt starts with a space and a row counter (1, 2, … on every row), so no two rows
share a prompt and nothing is de-duplicated: ``" {counter} Provide an answer to the following question: …"``.
Labels A/B, options ``A. A``, ``B. B``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "clinicreferral"
FILE = "medhelm-sequoia-dataset_filtered.csv"


def render(question: str, context: str, counter: int) -> str:
    return (
        f" {counter} Provide an answer to the following question: {question} with the following context:"
        f" {context} , Answer the question with a 'A' for yes or 'B' for no. Do not provide any "
        "additional details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render, question_column="question", counter="every")


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ClinicReferral",
    category="administration_workflow",
    subcategory="Organizing Workflow Processes",
    access="private",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'question' (not 'prompt'), 'context' (the palliative-care "
                "note) and 'label' ('A' = yes, 'B' = no)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="", output_noun=""),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Decide whether a patient is eligible for a clinic referral from palliative-care notes.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-sequoia-dataset_filtered.csv). Synthetic example row: "
        "question,context,label / \"Does the patient need help with advance care planning?\",\"Synthetic note: "
        "metastatic pancreatic cancer, family requests a goals-of-care meeting.\",A"
    ),
)
