"""MTSamples: write a treatment plan for a patient from a transcribed medical report (open-ended)."""

from pytest_medhelm import benchmark_test

test_mtsamples = benchmark_test("mtsamples")
