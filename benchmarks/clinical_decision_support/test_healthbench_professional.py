"""HealthBench Professional: a physician's clinical task; graded per rubric criterion and against a physician's
answer by the jury."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="healthbench_professional")
def test_healthbench_professional(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
