"""MTSamples: write a treatment plan for a patient from a transcribed medical report (open-ended)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="mtsamples")
def test_mtsamples(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
