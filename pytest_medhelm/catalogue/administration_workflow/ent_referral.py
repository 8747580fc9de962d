"""ENT-Referral: does a note support a referral to the Ear, Nose and Throat department? A = yes, B = no, C = no
mention. (HELM ``SHCENTMedScenario``, ``shc_ent_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B, C}) read with ``csv.DictReader``. Rows whose ``label`` is empty
are skipped (HELM: "skip rows with character/encoding issues - 79") and counted in ``Loaded.removed``; the kept
rows are numbered 1, 2, … and the number starts the prompt (``"{counter} Provide an answer …"``), so no two prompts
collide. Options ``A. A``, ``B. B``, ``C. C``; instructions "Answer A, B, or C.".
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "ent_referral"
FILE = "medhelm-ENT-dataset_filtered.csv"
CHOICES = ("A", "B", "C")


def render(question: str, context: str, counter: int) -> str:
    return (
        f"{counter} Provide an answer to the following question: {question} with the following context:"
        f" {context} , Answer the question with either 'A' for yes, 'B' for no, or 'C' for no mention."
        " Do not provide any additional details or response, just a simple A, B, or C response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render, choices=CHOICES, counter="kept")


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ENT-Referral",
    category="administration_workflow",
    subcategory="Care Coordination and Planning",
    access="private",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'prompt' (the question), 'context' (the clinical note) and "
                "'label' ('A' = yes, 'B' = no, 'C' = no mention; rows with an empty label are skipped and counted)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A, B, or C.", input_noun="", output_noun=""),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Decide whether a clinical note supports a referral to the Ear, Nose and Throat department.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-ENT-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Is there chronic sinusitis refractory to medical therapy?\",\"Synthetic note: "
        "14 weeks of nasal congestion despite two courses of antibiotics.\",A"
    ),
)
