"""MIMIC-IV Billing Code: list the ICD-10 codes of a discharge summary."""

from pytest_medhelm import benchmark_test

test_mimic_billing = benchmark_test("mimic_billing")
