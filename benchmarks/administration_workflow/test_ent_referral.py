"""ENT-Referral: does the note support a referral to Ear, Nose and Throat?"""

from pytest_medhelm import benchmark_test

test_ent_referral = benchmark_test("ent_referral")
