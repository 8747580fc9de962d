"""ADHD-MedEffects: does the note document ADHD medication side-effect monitoring?"""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="adhd_medeffects")
def test_adhd_medeffects(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
