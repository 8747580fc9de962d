import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="clinic_triage")
def test_clinic_triage(medhelm_instance, medhelm_model):
    assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
