"""Right of Access: how the HIPAA Right of Access applies to a records request."""

from pytest_medhelm import benchmark_test

test_synt_right_of_access = benchmark_test("synt_right_of_access")
