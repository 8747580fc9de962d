"""BMT-Status: yes/no questions on a patient's bone marrow / hematopoietic cell transplant status, answered from
clinical notes. (HELM ``SHCBMTMedScenario``, ``shc_bmt_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) with the SHC family's standard template, read and prompted as
described in :mod:`pytest_medhelm.catalogue.shc`.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="bmt_status",
    name="BMT-Status",
    subcategory="Recording Research Processes",
    file="medhelm-BMT-dataset_filtered.csv",
    template=shc.STANDARD,
    description="Answer a yes/no question about a patient's transplant status from clinical notes.",
    example=(
        "Did the patient receive a subsequent transplant?",
        "Synthetic note: day +100 after allogeneic HCT, in remission, no further transplant planned.",
        "B",
    ),
)
