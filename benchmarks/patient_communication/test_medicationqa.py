"""MedicationQA: answer a consumer's question about a medication (open-ended)."""

from pytest_medhelm import benchmark_test

test_medicationqa = benchmark_test("medicationqa")
