"""MedConfInfo: does an adolescent's note contain confidential information?"""

from pytest_medhelm import benchmark_test

test_medconfinfo = benchmark_test("medconfinfo")
