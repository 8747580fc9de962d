"""MIMIC-BHC: summarise a discharge note into its brief hospital course."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="mimic_bhc")
def test_mimic_bhc(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
