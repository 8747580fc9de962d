"""MentalHealth: write the next counselor turn of a counseling conversation."""

from pytest_medhelm import benchmark_test

test_mentalhealth = benchmark_test("mentalhealth")
