"""MedMCQA: answer a four-option Indian medical entrance exam (AIIMS / NEET PG) question."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="medmcqa")
def test_medmcqa(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
