"""Written Consent: is a use or disclosure of substance-use-disorder treatment records permitted under 42 CFR
Part 2? (medhelm 0.8.0 ``SyntWrittenConsentScenario``; synthetic scenarios read from the user's CSV,
:mod:`pytest_medhelm.catalogue.synt_privacy`.)"""

from __future__ import annotations

from pytest_medhelm.catalogue.synt_privacy import synt_benchmark

BENCHMARK = synt_benchmark(
    slug="synt_written_consent",
    name="Written Consent",
    file="synt_written_consent.csv",
    role=("You are reviewing a clinical scenario to determine whether the use or disclosure of "
          "substance-use-disorder records is permitted under 42 CFR Part 2. "),
    rule=("Answer 'A' if the disclosure is permitted and 'B' if it is not permitted. Respond with only A or B and no "
          "additional explanation."),
    choices=("A", "B"),
    labels="'A' = permitted, 'B' = not permitted",
    description="Decide whether 42 CFR Part 2 permits using or disclosing substance-use-disorder records.",
    example=("May the program send the treatment record to the patient's employer?",
             "A synthetic patient in an opioid treatment program has signed no consent naming the employer.",
             "B"),
)
