"""ADHD-Behavior: does the note recommend parent training in behavior management?"""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="adhd_behavior")
def test_adhd_behavior(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
