"""MTSamples Procedures: write a plan from a transcribed procedure report (open-ended)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="mtsamples_procedures")
def test_mtsamples_procedures(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
