"""HeadQA: answer a Spanish healthcare specialization exam question (English version)."""

from pytest_medhelm import benchmark_test

test_headqa = benchmark_test("headqa")
