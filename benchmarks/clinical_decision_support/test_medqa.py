"""MedQA: answer a four-option US medical licensing exam (USMLE) question."""

from pytest_medhelm import benchmark_test

test_medqa = benchmark_test("medqa")
