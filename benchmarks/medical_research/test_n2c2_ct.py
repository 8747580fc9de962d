"""N2C2-CT: does a patient meet a clinical-trial inclusion criterion (3 criteria averaged)?"""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="n2c2_ct")
def test_n2c2_ct(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
