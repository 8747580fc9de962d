"""Medec: find and correct the medical error in a clinical note, or say CORRECT."""

from pytest_medhelm import benchmark_test

test_medec = benchmark_test("medec")
