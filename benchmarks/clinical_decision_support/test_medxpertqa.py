"""MedXpertQA: answer an expert-level medical multiple-choice question (ten options)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="medxpertqa")
def test_medxpertqa(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
