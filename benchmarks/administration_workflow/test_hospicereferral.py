"""HospiceReferral: should the patient be referred to hospice care?"""

from pytest_medhelm import benchmark_test

test_hospicereferral = benchmark_test("hospicereferral")
