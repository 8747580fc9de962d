"""MEDIQA-QA: answer a consumer health question (open-ended)."""

from pytest_medhelm import benchmark_test

test_mediqa = benchmark_test("mediqa")
