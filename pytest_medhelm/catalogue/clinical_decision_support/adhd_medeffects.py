"""ADHD-MedEffects: does a pediatric primary-care note of a child on ADHD medication document side-effect
monitoring (SEI) or not (NSEI)? (HELM ``SHCSEIMedScenario``, ``shc_sei_med``; Stanford Health Care, private;
doi:10.1542/peds.2024-067223.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:mod:`pytest_medhelm.catalogue.shc`: de-duplicated by prompt text, options ``A. A``, ``B. B``). The prompt
prefixes the family's text with the SEI / NSEI definitions (HELM's text, "side Effects Inquiry" with its
lower-case s included).
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

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

BENCHMARK = shc.shc_benchmark(
    slug="adhd_medeffects",
    name="ADHD-MedEffects",
    subcategory="Providing Clinical Knowledge Support",
    file="medhelm-SEI-dataset_filtered.csv",
    template=DEFINITIONS + shc.STANDARD,
    description="Decide whether a note documents monitoring of ADHD medication side effects.",
    example=(
        "Does the note document side effects inquiry (SEI)?",
        "Synthetic note: 8-year-old on methylphenidate; parent reports no appetite loss or sleep problems.",
        "A",
    ),
)
