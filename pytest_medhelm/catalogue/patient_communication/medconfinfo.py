"""MedConfInfo: does an adolescent's clinical note hold confidential information that should be restricted from
parental (proxy) access? (HELM ``SHCCONFMedScenario``, ``shc_conf_med``; Stanford Health Care, private.)

HELM reads one CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) with ``csv.DictReader`` and keys its instances by
the prompt text, so a repeated prompt becomes one instance (the first row's place, the last row's label); see
:func:`pytest_medhelm.catalogue.local_data.shc_instances`. The options are the letters themselves: ``A. A``,
``B. B``. Prompt: ``Answer A or B.⏎⏎: {text}⏎A. A⏎B. B⏎:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "medconfinfo"
FILE = "medhelm-CONF-dataset_filtered.csv"


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
    name="MedConfInfo",
    category="patient_communication",
    subcategory="Patient-Provider Messaging",
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
    description="Decide whether an adolescent's clinical note contains confidential information.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-CONF-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Does the note contain confidential information?\",\"Synthetic note: 16-year-old "
        "seen for a sports physical; sexual health discussed with the patient alone.\",A"
    ),
)
