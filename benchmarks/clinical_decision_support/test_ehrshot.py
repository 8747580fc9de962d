"""EHRSHOT: predict readmission, new hypertension or an abnormal anemia lab from a patient's EHR codes."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="ehrshot")
def test_ehrshot(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
