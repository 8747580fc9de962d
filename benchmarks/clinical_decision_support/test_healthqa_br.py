"""HealthQA-BR: answer a Brazilian health-professional exam question in Portuguese."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="healthqa_br")
def test_healthqa_br(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
