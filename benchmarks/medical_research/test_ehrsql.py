"""EHRSQL: write the SQL query over an eICU database that answers a clinical research question."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="ehrsql")
def test_ehrsql(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
