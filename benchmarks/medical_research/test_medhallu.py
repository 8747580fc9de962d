"""MedHallu: judge whether an answer to a PubMed question is factual (0) or hallucinated (1)."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="medhallu")
def test_medhallu(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
