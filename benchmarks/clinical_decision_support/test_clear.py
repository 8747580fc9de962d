"""CLEAR: does a clinical note show a history of a condition (13 conditions averaged)?"""

from pytest_medhelm import benchmark_test

test_clear = benchmark_test("clear")
