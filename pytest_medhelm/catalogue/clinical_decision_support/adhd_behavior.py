"""ADHD-Behavior: does a pediatric primary-care note of a young child with ADHD document a clinician's
recommendation of parent training in behavior management? (HELM ``SHCPTBMMedScenario``, ``shc_ptbm_med``;
Stanford Health Care, private; Pillai et al. 2024, doi:10.1093/jamia/ocae001.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:mod:`pytest_medhelm.catalogue.shc`: de-duplicated by prompt text, options ``A. A``, ``B. B``). The prompt
prefixes the family's text with the reviewing persona.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

PERSONA = (
    "You are reviewing a clinical note from health records of children with attention deficit hyperactivity "
    "disorder (ADHD) and classifying mentions of behavioral therapy. "
)

BENCHMARK = shc.shc_benchmark(
    slug="adhd_behavior",
    name="ADHD-Behavior",
    subcategory="Providing Clinical Knowledge Support",
    file="medhelm-PTBM-dataset_filtered.csv",
    template=PERSONA + shc.STANDARD,
    description="Decide whether a clinician recommends parent training in behavior management for a child with ADHD.",
    example=(
        "Does the clinician recommend parent training in behavior management?",
        "Synthetic note: 5-year-old with ADHD; referred parents to a behavior management class.",
        "A",
    ),
)
