"""Written Consent: may substance-use-disorder records be used or disclosed under 42 CFR Part 2?"""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="synt_written_consent")
def test_synt_written_consent(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
