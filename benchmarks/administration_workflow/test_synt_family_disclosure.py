"""Family Disclosure: may a patient's information be disclosed to family or friends under HIPAA?"""

from pytest_medhelm import benchmark_test

test_synt_family_disclosure = benchmark_test("synt_family_disclosure")
