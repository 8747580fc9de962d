"""ADHD-Behavior: does a pediatric primary-care note of a young child with ADHD document a clinician's
recommendation of parent training in behavior management? (HELM ``SHCPTBMMedScenario``, ``shc_ptbm_med``;
Stanford Health Care, private; Pillai et al. 2024, doi:10.1093/jamia/ocae001.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:func:`pytest_medhelm.catalogue.local_data.shc_instances`: de-duplicated by prompt text, options ``A. A``,
``B. B``). The prompt prefixes the family's text with the reviewing persona.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "adhd_behavior"
FILE = "medhelm-PTBM-dataset_filtered.csv"


def render(question: str, context: str, counter: int) -> str:
    return (
        "You are reviewing a clinical note from health records of children with "
        "attention deficit hyperactivity disorder (ADHD) and classifying mentions of "
        f"behavioral therapy. Provide an answer to the following question: {question} with the "
        f"following context: {context} , Answer the question with a 'A' for yes or 'B' "
        "for no. Do not provide any additional details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ADHD-Behavior",
    category="clinical_decision_support",
    subcategory="Providing Clinical Knowledge Support",
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
    description="Decide whether a clinician recommends parent training in behavior management for a child with ADHD.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-PTBM-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Does the clinician recommend parent training in behavior management?\","
        "\"Synthetic note: 5-year-old with ADHD; referred parents to a behavior management class.\",A"
    ),
)
