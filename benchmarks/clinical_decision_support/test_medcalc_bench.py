"""MedCalc-Bench: compute a clinical score or value from a patient note."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="medcalc_bench")
def test_medcalc_bench(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
