import pytest

from pytest_medhelm import assert_metric


@pytest.mark.medhelm(benchmark="clinic_triage")
def test_clinic_triage(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)  # the benchmark's prompt; cached
    assert_metric(answer, medhelm_instance)  # the benchmark's metric; a 0 is a miss
