"""MedAlign: follow a clinician's instruction over a patient's longitudinal EHR."""

from pytest_medhelm import benchmark_test

test_medalign = benchmark_test("medalign")
