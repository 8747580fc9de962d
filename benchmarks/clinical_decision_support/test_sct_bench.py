"""SCT-Bench: rate how a new finding changes a clinical hypothesis, scored against an expert panel."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="sct_bench")
def test_sct_bench(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
