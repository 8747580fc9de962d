"""ACI-Bench: write the clinical note of a doctor-patient conversation (open-ended)."""

from pytest_medhelm import benchmark_test

test_aci_bench = benchmark_test("aci_bench")
