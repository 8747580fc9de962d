"""MMLU clinical (Afrikaans, isiZulu): answer an MMLU clinical question in an African language, 5-shot."""

from pytest_medhelm import benchmark_test

test_mmlu_clinical_afr = benchmark_test("mmlu_clinical_afr")
