"""MedMCQA: answer a four-option Indian medical entrance exam (AIIMS / NEET PG) question."""

from pytest_medhelm import benchmark_test

test_medmcqa = benchmark_test("medmcqa")
