"""DischargeMe: write the brief hospital course and discharge instructions of an admission."""

from pytest_medhelm import benchmark_test

test_dischargeme = benchmark_test("dischargeme")
