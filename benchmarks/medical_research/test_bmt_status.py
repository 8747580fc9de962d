"""BMT-Status: answer a question on a patient's transplant status from clinical notes."""

from pytest_medhelm import benchmark_test

test_bmt_status = benchmark_test("bmt_status")
