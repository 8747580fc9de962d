"""End-to-end runs of the shipped suite (``benchmarks/``) on the real public data in ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytester_runs

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


def run_suite(pytester, server, data, *args):
    return pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/x",
                             "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
                             "--medhelm-cache-dir", str(pytester.path / "cache"), *args)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_pubmedqa_200_answering_A_scores_the_share_of_yes_in_helms_sample(pytester, server, shared_data, xdist):
    out = pytester.path / "r.json"
    result = run_suite(pytester, server, shared_data, "--medhelm-benchmark", "pubmedqa", "--medhelm-max-instances",
                       "200", "--medhelm-json", str(out), *xdist)
    assert result.ret == 0, result.stdout.str()[-3000:]
    # independently: HELM's sample is the first 200 of RandomState(0).permutation over the file's order
    questions = json.loads((shared_data / "pubmedqa" / "ori_pqal.json").read_text())
    decisions = [q["final_decision"] for q in questions.values()]
    sample = np.random.RandomState(0).permutation(len(decisions))[:200]
    expected = sum(decisions[i] == "yes" for i in sample) / 200
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert bench["n"] == 200 and bench["mean"] == pytest.approx(expected)
    assert {i["instance_id"] for i in report["instances"]} == {list(questions)[i] for i in sample}
    assert server.count == 200
    again = run_suite(pytester, server, shared_data, "--medhelm-benchmark", "pubmedqa", "--medhelm-max-instances",
                      "200", *xdist)
    assert again.ret == 0 and server.count == 200  # the cached re-run sends nothing


@pytest.mark.parametrize("slug, count", [("pubmedqa", 1000), ("medcalc_bench", 1047), ("headqa", 2675),
                                         ("medbullets", 308), ("medec", 597)])
def test_uncapped_item_counts(pytester, server, shared_data, slug, count):
    result = run_suite(pytester, server, shared_data, "--medhelm-benchmark", slug, "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"{count}/* tests collected (* deselected)*"])
    assert server.count == 0
