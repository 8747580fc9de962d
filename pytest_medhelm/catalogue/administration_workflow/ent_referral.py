"""ENT-Referral: does a note support a referral to the Ear, Nose and Throat department? A = yes, B = no, C = no
mention. (HELM ``SHCENTMedScenario``, ``shc_ent_med``; Stanford Health Care, private.)

One CSV (``prompt``, ``context``, ``label`` ∈ {A, B, C}) read with ``csv.DictReader``
(:mod:`pytest_medhelm.catalogue.shc`). Rows whose ``label`` is empty are skipped (HELM: "skip rows with
character/encoding issues - 79") and counted in ``Loaded.removed``; the kept rows are numbered 1, 2, … and the
number starts the prompt (``"{counter} Provide an answer …"``), so no two prompts collide. Options ``A. A``,
``B. B``, ``C. C``; instructions "Answer A, B, or C.".
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="ent_referral",
    name="ENT-Referral",
    subcategory="Care Coordination and Planning",
    file="medhelm-ENT-dataset_filtered.csv",
    template=(
        "{counter} " + shc.ASK + "Answer the question with either 'A' for yes, 'B' for no, or 'C' for no mention. "
        "Do not provide any additional details or response, just a simple A, B, or C response."
    ),
    description="Decide whether a clinical note supports a referral to the Ear, Nose and Throat department.",
    example=(
        "Is there chronic sinusitis refractory to medical therapy?",
        "Synthetic note: 14 weeks of nasal congestion despite two courses of antibiotics.",
        "A",
    ),
    labels="'A' = yes, 'B' = no, 'C' = no mention; rows with an empty label are skipped and counted",
    choices=("A", "B", "C"),
    counter="kept",
    filters="rows with an empty 'label' (HELM: \"skip rows with character/encoding issues\")",
)
