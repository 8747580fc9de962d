"""EHRSQL through the plugin as users run it: items the metric cannot score are reported, not dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import ROUTE_QUERY, entry, write_ehrsql

EHRSQL_SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_ehrsql_not_scored_items_are_reported_by_the_run(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """Through the plugin as users run it: an item whose gold result is empty is recorded with score null and its
    reason, shown as skipped, counted in n_not_scored, and left out of the mean; under HELM's rules it is scored."""
    from pytest_medhelm.testing.server import running_server

    data = pytester.path / "data"
    warfarin = "select medication.routeadmin from medication where medication.drugname = 'warfarin 5 mg'"
    write_ehrsql(data,
                 valid=[entry("aaa111", "what is the route of aspirin 81 mg?", ROUTE_QUERY, {"drug_name": "x"}),
                        entry("bbb222", "what is the weather tomorrow?", "null", impossible=True)],
                 test=[entry("ccc333", "how many patients are there?", "select count(*) from patient", {}),
                       entry("ddd444", "what is the route of warfarin 5 mg?", warfarin, {})])
    results = {}
    with running_server(answer="SELECT 1 WHERE 0") as server:
        for compat in ("default", "helm"):
            out = pytester.path / f"{compat}.json"
            run = pytester_runs.run(pytester, str(EHRSQL_SUITE), "-rs", "--medhelm-model", "openai/x",
                                    "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
                                    "--medhelm-data-unverified", "ehrsql", "--medhelm-benchmark", "ehrsql",
                                    "--medhelm-cache", "off", "--medhelm-compat", compat, "--medhelm-json", str(out),
                                    *xdist)
            assert run.ret == 0, run.stdout.str()[-3000:]
            results[compat] = (run, json.loads(out.read_text()))
    run, report = results["default"]
    run.stdout.fnmatch_lines(["*ehrsql*0.000 [[]0.000, 0.000[]] n=3 (1 not scored)*",
                              "*SKIPPED*not scored: the gold query returns no rows on this database*"])
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_not_scored"], bench["n_missing"], bench["mean"]) == (3, 1, 0, 0.0)
    by_id = {i["instance_id"]: i for i in report["instances"]}
    assert set(by_id) == {"aaa111", "bbb222", "ccc333", "ddd444"}  # reported, not dropped
    assert by_id["ddd444"]["score"] is None and by_id["ddd444"]["not_scored"].startswith("the gold query returns")
    assert by_id["ddd444"]["error"] is None and by_id["ddd444"]["metrics"]["ehr_sql_query_validity"] == 1.0
    assert all(by_id[i]["score"] == 0.0 and not by_id[i].get("not_scored") for i in ("aaa111", "bbb222", "ccc333"))
    _, helm = results["helm"]
    [bench] = helm["benchmarks"]
    assert (bench["n"], bench["n_not_scored"]) == (4, 0)
