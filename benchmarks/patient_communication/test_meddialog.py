"""MedDialog: summarise a patient-doctor conversation in one sentence; two subsets averaged (open-ended)."""

from pytest_medhelm import benchmark_test

test_meddialog = benchmark_test("meddialog")
