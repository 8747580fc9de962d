"""A score that is not a number is no measurement: never a pass, never in a mean, never a crash at the end.

A custom metric returning NaN (through pytester, as a user's benchmark would): the item fails with a message naming
the metric and the instance, its record in the results JSON has ``score: null`` and ``score_nan: true``, the
benchmark's mean is that of the other instances, and the JSON is written (``json.dump(allow_nan=False)`` raised at
session finish before). A NaN elsewhere in a record (a raw score, a metric's extras) is written as null and listed
in the instance's ``nan_fields``.
The results module's own functions for both (``without_nan_scores``, ``write_json``): tests/report/test_results.py.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST

NAN_METRIC = textwrap.dedent('''
    import math
    from pytest_medhelm.metrics.base import Score

    class OddMetric:
        """1 for a "yes" question, NaN for q002 and q005 (0/0 somewhere in a user's formula); NaN extras too."""
        name = "odd_metric"
        binary = False
        pass_mark = 0.5

        def score(self, answer, instance, compat="default"):
            if instance.id in ("q002", "q005"):
                return Score(value=float("nan"), detail="0/0")
            value = 1.0 if instance.correct == 0 else 0.75
            return Score(value=value, raw=float("nan") if instance.id == "q001" else value,
                         extra={"ratio": float("inf") if instance.id == "q003" else 0.5})
''')


@pytest.fixture
def nan_project(pytester: pytest.Pytester, toy):
    conftest = TOY_CONFTEST.replace("metric=MULTIPLE_CHOICE_EXACT_MATCH", "metric=OddMetric()")
    pytester.makeconftest(NAN_METRIC + conftest)
    return toy(8)


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_custom_metric_returning_nan(pytester, nan_project, server, xdist):
    out = pytester.path / "r.json"
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                               "--medhelm-data-dir", str(nan_project), "--medhelm-json", str(out), *xdist)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Out of range float values are not JSON compliant" not in text, text
    assert result.ret == 1, text  # the two NaN items failed: nothing measured never passes
    result.assert_outcomes(passed=6, errors=2)  # E: no measurement, as a model error
    assert "the metric odd_metric returned nan for instance q002: not a score" in text
    report = json.loads(out.read_text())  # strict JSON: no NaN token anywhere
    instances = {i["instance_id"]: i for i in report["instances"]}
    for nan_id in ("q002", "q005"):
        inst = instances[nan_id]
        assert inst["score"] is None and inst["score_nan"] is True
        assert "returned nan" in inst["error"]
    assert instances["q001"]["score"] == 0.75 and instances["q001"]["raw_score"] is None
    assert instances["q001"]["nan_fields"] == ["raw_score"] and "score_nan" not in instances["q001"]
    assert instances["q003"]["metrics"]["ratio"] is None and instances["q003"]["nan_fields"] == ["metrics.ratio"]
    assert "nan_fields" not in instances["q004"]
    [bench] = report["benchmarks"]
    # the mean of the six scored instances: q000 q004 q006 are "yes" (1.0), q001 q003 q007 "no" (0.75)
    assert bench["mean"] == pytest.approx(0.875) and bench["n_errors"] == 2




