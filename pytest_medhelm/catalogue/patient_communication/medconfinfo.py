"""MedConfInfo: does an adolescent's clinical note hold confidential information that should be restricted from
parental (proxy) access? (HELM ``SHCCONFMedScenario``, ``shc_conf_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) with the SHC family's standard template, read and prompted as
described in :mod:`pytest_medhelm.catalogue.shc`.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="medconfinfo",
    name="MedConfInfo",
    subcategory="Patient-Provider Messaging",
    file="medhelm-CONF-dataset_filtered.csv",
    template=shc.STANDARD,
    description="Decide whether an adolescent's clinical note contains confidential information.",
    example=(
        "Does the note contain confidential information?",
        "Synthetic note: 16-year-old seen for a sports physical; sexual health discussed with the patient alone.",
        "A",
    ),
)
