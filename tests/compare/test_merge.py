"""compare/merge.py: merged runs keep ``run.reasoning``. What the report modules say of reasoning models is tested
beside each module (tests/report/test_aggregate.py, test_report_reasoning.py, test_tables.py, html/test_render.py);
the reserved reasoning budget and the dry run's estimate in tests/test_budget.py and tests/test_dryrun.py; their
runs through pytest in tests/run/test_reasoning_runs.py."""

from __future__ import annotations

import copy

import pytest
from report_fixtures import RAN_OUT_IDS, THINKER, reasoning_results


@pytest.fixture(scope="module")
def results():
    return reasoning_results()


# ============================================================================================== merged runs
def test_merge_results_keeps_run_reasoning_and_refuses_a_conflict(results):
    from pytest_medhelm.compare.merge import MergeError, merge_results

    thinker = [i for i in results["instances"] if i["model"] == THINKER]
    first = dict(copy.deepcopy(results), instances=thinker[: len(thinker) // 2])
    second = dict(copy.deepcopy(results), instances=thinker[len(thinker) // 2:])
    merged = merge_results([("1.json", first), ("2.json", second)])
    assert merged["run"]["reasoning"] == results["run"]["reasoning"]
    [row] = merged["models"]
    assert (row["reasoning_tokens"], row["n_ran_out"]) == (722, 2)
    assert [i["instance_id"] for i in thinker if i.get("ran_out")] == list(RAN_OUT_IDS)
    second["run"]["reasoning"]["models"][THINKER]["budget"] = 400
    with pytest.raises(MergeError, match="ran as a reasoning model"):
        merge_results([("1.json", first), ("2.json", second)])


