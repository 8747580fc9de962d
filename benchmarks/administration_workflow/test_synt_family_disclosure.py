"""Family Disclosure: may a patient's information be disclosed to family or friends under HIPAA?"""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="synt_family_disclosure")
def test_synt_family_disclosure(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
