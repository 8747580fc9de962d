"""PatientInstruct: write personalised post-procedure instructions for a patient."""

from pytest_medhelm import benchmark_test

test_patientinstruct = benchmark_test("patientinstruct")
