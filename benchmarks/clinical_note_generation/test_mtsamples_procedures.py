"""MTSamples Procedures: write a plan from a transcribed procedure report (open-ended)."""

from pytest_medhelm import benchmark_test

test_mtsamples_procedures = benchmark_test("mtsamples_procedures")
