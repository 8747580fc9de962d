"""EHRSHOT: predict readmission, new hypertension or an abnormal anemia lab from a patient's EHR codes."""

from pytest_medhelm import benchmark_test

test_ehrshot = benchmark_test("ehrshot")
