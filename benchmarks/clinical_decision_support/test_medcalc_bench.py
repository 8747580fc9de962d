"""MedCalc-Bench: compute a clinical score or value from a patient note."""

from pytest_medhelm import benchmark_test

test_medcalc_bench = benchmark_test("medcalc_bench")
