"""Medbullets: answer a USMLE Step 2/3 style clinical question (five options)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="medbullets")
def test_medbullets(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
