"""MIMIC-BHC: summarise a discharge note into its brief hospital course."""

from pytest_medhelm import benchmark_test

test_mimic_bhc = benchmark_test("mimic_bhc")
