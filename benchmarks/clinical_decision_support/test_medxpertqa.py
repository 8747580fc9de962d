"""MedXpertQA: answer an expert-level medical multiple-choice question (ten options)."""

from pytest_medhelm import benchmark_test

test_medxpertqa = benchmark_test("medxpertqa")
