"""Right of Access: how the HIPAA Right of Access applies to a records request."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="synt_right_of_access")
def test_synt_right_of_access(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
