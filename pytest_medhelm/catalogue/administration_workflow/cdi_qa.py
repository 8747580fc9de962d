"""CDI-QA: Clinical Documentation Integrity (CDI) verification questions answered from earlier notes. (HELM
``SHCCDIMedScenario``, ``shc_cdi_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B}) read as in the rest of the SHC family
(:mod:`pytest_medhelm.catalogue.shc`: de-duplicated by prompt text, options ``A. A``, ``B. B``). Its wording
differs from the family's: "Answer the question with **either** 'A' for yes or 'B' for no", still with the space
before the comma (``{context} , Answer``).
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="cdi_qa",
    name="CDI-QA",
    subcategory="Care Coordination and Planning",
    file="medhelm-CDI-dataset_filtered.csv",
    template=shc.ASK + shc.YES_NO.replace("with a 'A'", "with either 'A'"),
    description="Answer a documentation-integrity verification question from earlier clinical notes.",
    example=(
        "Is acute kidney injury documented?",
        "Synthetic note: creatinine rose from 0.9 to 2.1 mg/dL; assessment lists AKI.",
        "A",
    ),
    context="the notes",
    question="the verification question",
)
