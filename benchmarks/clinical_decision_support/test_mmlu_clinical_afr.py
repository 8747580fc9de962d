"""MMLU clinical (Afrikaans, isiZulu): answer an MMLU clinical question in an African language, 5-shot."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="mmlu_clinical_afr")
def test_mmlu_clinical_afr(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
