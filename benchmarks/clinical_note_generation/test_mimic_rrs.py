"""MIMIC-RRS: write a radiology report's impression from its findings."""

from pytest_medhelm import benchmark_test

test_mimic_rrs = benchmark_test("mimic_rrs")
