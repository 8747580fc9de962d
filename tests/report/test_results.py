"""The run's results as one dict in the JSON contract's shape, and its JSON file (pytest_medhelm.report.results)."""

from __future__ import annotations

import json
import math

import pytest
from report_fixtures import jury_run_results

from pytest_medhelm.report.results import json_safe, without_nan_scores, write_json


def test_the_instrument_of_a_run_is_what_its_judged_records_name() -> None:
    from pytest_medhelm.compare.merge import merge_results
    from pytest_medhelm.report.results import jury_prompts_of

    helm, ours = "helm@ef439fc", "pytest-medhelm@0.1.0"
    assert jury_prompts_of([helm, helm], ours) == helm
    assert jury_prompts_of([ours, helm, None], ours) == f"mixed: {helm} + {ours}"
    assert jury_prompts_of([None, ""], ours) == ours  # nothing judged: the process's own
    assert jury_prompts_of([f"mixed: {helm} + {ours}", helm], None) == f"mixed: {helm} + {ours}"
    # merged shards: from their instances, or from their runs when the instances do not say (older files)
    shards = []
    for n, name in enumerate((helm, ours)):
        shard = jury_run_results(name, ["j1"], [0.5, 0.7])
        for inst in shard["instances"]:
            inst["instance_id"] = f"{n}-{inst['instance_id']}"
        shards.append((f"shard{n}.json", shard))
    assert merge_results(shards)["run"]["jury_prompts"] == f"mixed: {helm} + {ours}"
    same = [(label, {**data, "run": {**data["run"], "jury_prompts": helm}}) for label, data in shards]
    assert merge_results(same)["run"]["jury_prompts"] == helm


def test_without_nan_scores_makes_a_nan_score_an_error_of_its_instance():
    records = [{"score": float("nan"), "raw_score": float("nan"), "missed": True},
               {"score": 0.5, "raw_score": float("nan")},
               {"score": float("inf"), "error": "kept"}]
    fixed = without_nan_scores(records)
    assert fixed[0] == {"score": None, "raw_score": None, "missed": False, "score_nan": True,
                        "error": "the metric returned nan for this instance: not a score"}
    assert fixed[1] is records[1]  # a finite score is left alone (its raw NaN is json_safe's business)
    assert fixed[2]["score"] is None and fixed[2]["error"] == "kept" and fixed[2]["score_nan"] is True
    assert math.isnan(records[0]["score"])  # the caller's records are not changed


def test_write_json_never_raises_on_a_nan_and_flags_where_it_was(tmp_path):
    numpy = pytest.importorskip("numpy")
    results = {"run": {"x": float("nan")}, "benchmarks": [{"mean": float("inf"), "ci": [numpy.float32("nan"), 1.0]}],
               "instances": [{"instance_id": "a", "score": float("nan"), "metrics": {"m": [1.0, float("-inf")]}},
                             {"instance_id": "b", "score": 1.0}]}
    path = tmp_path / "r.json"
    write_json(results, path)
    data = json.loads(path.read_text())
    assert data["run"]["x"] is None and data["benchmarks"][0] == {"mean": None, "ci": [None, 1.0]}
    a, b = data["instances"]
    assert a["score"] is None and a["score_nan"] is True and a["nan_fields"] == ["metrics.m[1]", "score"]
    assert b == {"instance_id": "b", "score": 1.0}
    assert json_safe({"instances": []}) == {"instances": []}
