"""SCT-Bench: rate how a new finding changes a clinical hypothesis, scored against an expert panel."""

from pytest_medhelm import benchmark_test

test_sct_bench = benchmark_test("sct_bench")
