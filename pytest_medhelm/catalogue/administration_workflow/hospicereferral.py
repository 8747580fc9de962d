"""HospiceReferral: is a patient appropriate for a referral to general inpatient (GIP) hospice care? (HELM
``SHCGIPMedScenario``, ``shc_gip_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) with the SHC family's standard template, read and prompted as
described in :mod:`pytest_medhelm.catalogue.shc`.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="hospicereferral",
    name="HospiceReferral",
    subcategory="Scheduling Resources and Staff",
    file="medhelm-GIP-dataset_filtered.csv",
    template=shc.STANDARD,
    description="Decide whether a patient should be referred to general inpatient hospice care.",
    example=(
        "Does the patient meet criteria for GIP hospice referral?",
        "Synthetic note: 84-year-old with end-stage heart failure, uncontrolled dyspnea, comfort-focused goals.",
        "A",
    ),
)
