"""HealthBench: answer a health conversation; graded per physician-written rubric criterion (--medhelm-grader)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="healthbench")
def test_healthbench(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
