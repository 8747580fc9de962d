"""PubMedQA: answer a biomedical research question (yes / no / maybe) from a PubMed abstract."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="pubmedqa")
def test_pubmedqa(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
