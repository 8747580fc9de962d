"""HealthBench's meta-evaluation: the rubric grader (--medhelm-grader) against physicians, one item per row."""

import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="healthbench_meta")
def test_healthbench_meta(medhelm_instance, medhelm_model):
    verdict = medhelm_model.answer(medhelm_instance)
    assert_metric(verdict, medhelm_instance)
