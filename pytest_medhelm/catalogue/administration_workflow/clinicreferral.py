"""ClinicReferral: is a patient eligible for referral to the Sequoia clinic, judged from palliative-care notes?
(HELM ``SHCSequoiaMedScenario``, ``shc_sequoia_med``; Stanford Health Care, private.)

One CSV read with ``csv.DictReader`` (:mod:`pytest_medhelm.catalogue.shc`). Unlike the rest of the SHC family its
question column is **``question``** (not ``prompt``), and every prompt starts with a space and a row counter (1,
2, … on every row), so no two rows share a prompt and nothing is de-duplicated: ``" {counter} Provide an answer
to the following question: …"``. Labels A/B, options ``A. A``, ``B. B``.
"""

from __future__ import annotations

from pytest_medhelm.catalogue import shc

BENCHMARK = shc.shc_benchmark(
    slug="clinicreferral",
    name="ClinicReferral",
    subcategory="Organizing Workflow Processes",
    file="medhelm-sequoia-dataset_filtered.csv",
    template=" {counter} " + shc.STANDARD,
    description="Decide whether a patient is eligible for a clinic referral from palliative-care notes.",
    example=(
        "Does the patient need help with advance care planning?",
        "Synthetic note: metastatic pancreatic cancer, family requests a goals-of-care meeting.",
        "A",
    ),
    context="the palliative-care note",
    question="not 'prompt'",
    question_column="question",
    counter="every",
)
