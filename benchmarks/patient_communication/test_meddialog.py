"""MedDialog: summarise a patient-doctor conversation in one sentence; two subsets averaged (open-ended)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="meddialog")
def test_meddialog(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
