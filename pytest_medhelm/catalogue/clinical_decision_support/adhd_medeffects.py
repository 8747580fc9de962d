"""ADHD-MedEffects: does a pediatric primary-care note of a child on ADHD medication document side-effect
monitoring (SEI) or not (NSEI)? (HELM ``SHCSEIMedScenario``, ``shc_sei_med``; Stanford Health Care, private;
doi:10.1542/peds.2024-067223.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:func:`pytest_medhelm.catalogue.local_data.shc_instances`: de-duplicated by prompt text, options ``A. A``,
``B. B``). The prompt prefixes the family's text with the SEI / NSEI definitions (HELM's text, "side Effects
Inquiry" with its lower-case s included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "adhd_medeffects"
FILE = "medhelm-SEI-dataset_filtered.csv"

DEFINITIONS = (
    "You are reviewing a clinical note from health records of children "
    "with attention deficit hyperactivity disorder (ADHD). Given the following "
    "definitions: side Effects Inquiry (SEI): Explicit documentation by the clinician "
    "asking about current side effects related to ADHD medications that the child is "
    "taking or documentation of specific ADHD medication side effects experienced "
    "by the patient. SEI does *not* include future side effects monitoring, "
    "such as documentation of potential ADHD medication side effects, including "
    "planning to follow patients to monitor side effects, explaining about "
    "potential side effects of an ADHD medication. These documentations are not "
    "categorized as SEI because they consist of a plan or an explanation about "
    "side effects without actual side effect monitoring taking place, and "
    "No Side Effects Inquiry (NSEI): No evidence of side effects monitoring. "
)


def render(question: str, context: str, counter: int) -> str:
    return (
        DEFINITIONS
        + f"Provide an answer to the following question: {question} with the following context: {context} "
        ", Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional "
        "details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ADHD-MedEffects",
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
    description="Decide whether a note documents monitoring of ADHD medication side effects.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-SEI-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Does the note document side effects inquiry (SEI)?\",\"Synthetic note: 8-year-old "
        "on methylphenidate; parent reports no appetite loss or sleep problems.\",A"
    ),
)
