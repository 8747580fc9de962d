"""N2C2-CT: does a patient meet a clinical-trial inclusion criterion (3 criteria averaged)?"""

from pytest_medhelm import benchmark_test

test_n2c2_ct = benchmark_test("n2c2_ct")
