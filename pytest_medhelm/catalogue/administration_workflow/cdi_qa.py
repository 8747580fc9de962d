"""CDI-QA: Clinical Documentation Integrity (CDI) verification questions answered from earlier notes. (HELM
``SHCCDIMedScenario``, ``shc_cdi_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:func:`pytest_medhelm.catalogue.local_data.shc_instances`: de-duplicated by prompt text, options ``A. A``,
``B. B``). Its wording differs from the family's: "Answer the question with **either** 'A' for yes or 'B' for
no", still with the space before the comma (``{context} , Answer``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "cdi_qa"
FILE = "medhelm-CDI-dataset_filtered.csv"


def render(question: str, context: str, counter: int) -> str:
    return (
        f"Provide an answer to the following question: {question} with the following context: {context} , "
        "Answer the question with either 'A' for yes or 'B' for no. Do not provide any "
        "additional details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="CDI-QA",
    category="administration_workflow",
    subcategory="Care Coordination and Planning",
    access="private",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'prompt' (the verification question), 'context' (the "
                "notes) and 'label' ('A' = yes, 'B' = no)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="", output_noun=""),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Answer a documentation-integrity verification question from earlier clinical notes.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-CDI-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Is acute kidney injury documented?\",\"Synthetic note: creatinine rose from 0.9 "
        "to 2.1 mg/dL; assessment lists AKI.\",A"
    ),
)
