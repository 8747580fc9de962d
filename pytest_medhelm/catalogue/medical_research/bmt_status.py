"""BMT-Status: yes/no questions on a patient's bone marrow / hematopoietic cell transplant status, answered from
clinical notes. (HELM ``SHCBMTMedScenario``, ``shc_bmt_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:func:`pytest_medhelm.catalogue.local_data.shc_instances`: de-duplicated by prompt text, options ``A. A``,
``B. B``). Prompt: ``Answer A or B.⏎⏎: Provide an answer to the following question: …⏎A. A⏎B. B⏎:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "bmt_status"
FILE = "medhelm-BMT-dataset_filtered.csv"


def render(question: str, context: str, counter: int) -> str:
    return (
        f"Provide an answer to the following question: {question} with the following context: {context} "
        ", Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional "
        "details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="BMT-Status",
    category="medical_research",
    subcategory="Recording Research Processes",
    access="private",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'prompt' (the question), 'context' (the clinical note) and "
                "'label' ('A' = yes, 'B' = no)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="", output_noun=""),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a yes/no question about a patient's transplant status from clinical notes.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-BMT-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Did the patient receive a subsequent transplant?\",\"Synthetic note: day +100 "
        "after allogeneic HCT, in remission, no further transplant planned.\",B"
    ),
)
