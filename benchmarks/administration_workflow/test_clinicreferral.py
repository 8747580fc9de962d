"""ClinicReferral: is the patient eligible for a clinic referral?"""

from pytest_medhelm import benchmark_test

test_clinicreferral = benchmark_test("clinicreferral")
