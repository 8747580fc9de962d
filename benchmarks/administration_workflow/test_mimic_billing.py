"""MIMIC-IV Billing Code: list the ICD-10 codes of a discharge summary."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="mimic_billing")
def test_mimic_billing(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
