"""Right of Access: how the HIPAA Right of Access (45 CFR 164.524) applies to a request for one's own health
information (medhelm 0.8.0 ``SyntRightOfAccessScenario``; synthetic scenarios read from the user's CSV,
:mod:`pytest_medhelm.catalogue.synt_privacy`)."""

from __future__ import annotations

from pytest_medhelm.catalogue.synt_privacy import synt_benchmark

BENCHMARK = synt_benchmark(
    slug="synt_right_of_access",
    name="Right of Access",
    file="synt_right_of_access.csv",
    role=("You are reviewing a clinical scenario involving a request for access to an individual's own health "
          "information under the HIPAA Right of Access (45 CFR 164.524). "),
    rule=("Answer 'A' if access must be granted, 'B' if access may be denied without review, or 'C' if access may be "
          "denied on a reviewable ground. Respond with only A, B, or C and no additional explanation."),
    choices=("A", "B", "C"),
    labels="'A' = access must be granted, 'B' = may be denied without review, 'C' = may be denied on a reviewable "
           "ground",
    description="Decide how the HIPAA Right of Access applies to a request for one's own health records.",
    example=("Must the clinic give the patient a copy of her visit notes?",
             "A synthetic adult patient asks in writing for a copy of her own outpatient visit notes.",
             "A"),
)
