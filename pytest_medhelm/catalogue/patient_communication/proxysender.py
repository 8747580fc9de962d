"""ProxySender: was a patient-portal message sent by the patient or by a proxy user (a parent, a spouse)?
(HELM ``SHCPROXYMedScenario``, ``shc_proxy_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label``) read as in the rest of the SHC family
(:func:`pytest_medhelm.catalogue.local_data.shc_instances`). HELM HEAD (``a363f41cf``) has three choices A/B/C and
the instructions "Answer A, B, or C.", although the prompt text still says "with a 'A' for yes or 'B' for no"
(the paper-era run had A/B only). The options render ``A. A``, ``B. B``, ``C. C``; labels must be A, B or C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.local_data import Loaded, shc_instances
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

SLUG = "proxysender"
FILE = "medhelm-PROXY-dataset_filtered.csv"
CHOICES = ("A", "B", "C")


def render(question: str, context: str, counter: int) -> str:
    return (
        "You are reviewing a clinical messages in order to determine if they have been "
        f"sent by a proxy user. Please determine the following: {question} with the "
        f"following context: {context} , Answer the question with a 'A' for yes or 'B' "
        "for no. Do not provide any additional details or response, just a simple A or B response."
    )


def build_instances(files: Mapping[str, Path]) -> Loaded:
    return shc_instances(files, slug=SLUG, file=FILE, render=render, choices=CHOICES)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="ProxySender",
    category="patient_communication",
    subcategory="Patient-Provider Messaging",
    access="private",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "CSV with a header line and the columns 'prompt' (the question), 'context' (the portal message) "
                "and 'label' ('A', 'B' or 'C')"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A, B, or C.", input_noun="", output_noun=""),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Decide whether a patient-portal message was sent by a proxy user rather than the patient.",
    data_help=(
        "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
        "(HELM's name for it is medhelm-PROXY-dataset_filtered.csv). Synthetic example row: "
        "prompt,context,label / \"Was this message sent by a proxy user?\",\"Synthetic message: Hello doctor, my "
        "son still has a fever since yesterday, should we come in?\",A"
    ),
)
