"""Family Disclosure: may a provider disclose an adult patient's health information to family, friends or others
involved in the patient's care under the HIPAA Privacy Rule? (medhelm 0.8.0 ``SyntFamilyDisclosureScenario``;
synthetic scenarios read from the user's CSV, :mod:`pytest_medhelm.catalogue.synt_privacy`.)"""

from __future__ import annotations

from pytest_medhelm.catalogue.synt_privacy import synt_benchmark

BENCHMARK = synt_benchmark(
    slug="synt_family_disclosure",
    name="Family Disclosure",
    file="synt_family_disclosure.csv",
    role=("You are reviewing a clinical scenario to determine whether a healthcare provider is permitted under the "
          "HIPAA Privacy Rule to disclose an adult patient's health information to a family member, friend, or other "
          "person involved in the patient's care. "),
    rule=("Answer 'A' if the disclosure is permitted and 'B' if the disclosure is not permitted. Do not provide any "
          "additional details or explanation; respond with only A or B."),
    choices=("A", "B"),
    labels="'A' = permitted, 'B' = not permitted",
    description="Decide whether HIPAA permits disclosing an adult patient's information to family or friends.",
    example=("May the patient's health information be shared with her daughter?",
             "A synthetic adult patient, conscious and capable, agrees that her daughter may hear about her visit.",
             "A"),
)
