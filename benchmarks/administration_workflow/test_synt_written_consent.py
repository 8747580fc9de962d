"""Written Consent: may substance-use-disorder records be used or disclosed under 42 CFR Part 2?"""

from pytest_medhelm import benchmark_test

test_synt_written_consent = benchmark_test("synt_written_consent")
