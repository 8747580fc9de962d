"""Medbullets: answer a USMLE Step 2/3 style clinical question (five options)."""

from pytest_medhelm import benchmark_test

test_medbullets = benchmark_test("medbullets")
