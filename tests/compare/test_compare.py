"""Comparisons with a baseline (compare/compare.py): rows, gates and win rates, compare-fail gates through a run,
shards and the ``pytest-medhelm`` console script. (The statistics: tests/compare/test_stats.py.)"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from pytester_runs import UNCACHED, run, toy_args
from run_results import results
from toy_benchmark import toy_answers, write_toy_data

from pytest_medhelm.compare import stats
from pytest_medhelm.compare.compare import build_comparison, model_pairs
from pytest_medhelm.compare.storage import list_runs, save

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


# ============================================================================================== comparisons of results
def test_model_pairs():
    assert model_pairs(["v1"], ["v2", "v3"]) == ([("v2", "v1"), ("v3", "v1")], [])
    assert model_pairs(["a", "b"], ["b", "c"]) == ([("b", "b")], ["c"])


def test_build_comparison_rows_gates_and_win_rates():
    base = results("ft-v1", {"pubmedqa": [1] * 60 + [0] * 40, "rouge_bench": [0.5] * 50,
                             "other": [1, 0] * 10})
    cur = results("ft-v2", {"pubmedqa": [0] * 30 + [1] * 30 + [0] * 40,  # 30 right→wrong: drop 0.30
                            "rouge_bench": [0.52] * 50,  # +0.02 everywhere
                            "other": [1, 0] * 10})
    comparison, gates = build_comparison(base, cur, compare_fail=[("pubmedqa", 0.05), ("rouge_bench", 0.01),
                                                                  ("other", 0.05), ("Medical Research Assistance", 0.5),
                                                                  ("missing", 0.1)])
    rows = {(r["scope"], r["name"]): r for r in comparison["rows"]}
    pub = rows[("benchmark", "pubmedqa")]
    assert pub["test"] == "mcnemar_exact" and pub["discordant"] == {"worse": 30, "better": 0}
    assert pub["delta"] == pytest.approx(-0.30) and pub["p"] == pytest.approx(2 / 2 ** 30) and pub["significant"]
    rouge = rows[("benchmark", "rouge_bench")]
    assert rouge["test"] == "paired_bootstrap" and rouge["delta"] == pytest.approx(0.02)
    assert rouge["p"] == pytest.approx(1 / 10_001) and rouge["mde"] == pytest.approx(0.0, abs=1e-12)
    cat = rows[("category", "medical_research")]
    assert cat["n_benchmarks"] == 3 and cat["delta"] == pytest.approx((-0.30 + 0.02 + 0) / 3)
    assert rows[("overall", "overall")]["delta"] == pytest.approx(cat["delta"])
    assert comparison["pairs"] == [{"model": "ft-v2", "baseline_model": "ft-v1"}]
    verdicts = {g["name"]: g["passed"] for g in gates}
    assert verdicts == {"pubmedqa": False, "rouge_bench": True, "other": True, "medical_research": True,
                        "missing": False}
    pub_gate = next(g for g in gates if g["name"] == "pubmedqa")
    assert pub_gate["p_holm"] == pytest.approx(min(1.0, 4 * pub_gate["p"]))  # 4 gates have a p-value
    assert pub_gate["spec"] == "compare-fail pubmedqa:0.05" and pub_gate["value"] == pytest.approx(-0.30)
    wr = {r["model"]: r for r in comparison["win_rates"]}
    assert set(wr) == {"ft-v2", "ft-v1 (baseline)"} and wr["ft-v1 (baseline)"]["baseline"]
    assert wr["ft-v1 (baseline)"]["win_rate"] == pytest.approx(0.5)  # wins pubmedqa, loses rouge, ties other


def test_a_drop_that_is_not_significant_does_not_fail():
    base = results("m", {"toy": [1] * 6 + [0] * 4})
    cur = results("m", {"toy": [0] * 6 + [1] * 4})  # 0.6 → 0.4: b = 6, c = 4
    _, [gate] = build_comparison(base, cur, compare_fail=[("toy", 0.05)])
    assert gate["value"] == pytest.approx(-0.2) and gate["passed"]
    # Tango's score test at the margin 0.05, by hand: 2n·x² + B·x + C = 0 with n = 10, B = 1 − 6.3 − 3.8 = −9.1,
    # C = −4·0.05·0.95 = −0.19: x = (9.1 + √98.01) / 40 = 0.475; Z = (6 − 4 − 0.5) / √(10·(0.95 + 0.0475))
    z = 1.5 / math.sqrt(9.975)
    assert gate["p"] == pytest.approx(1 - statistics.NormalDist().cdf(z)) and gate["test"] == "tango_score_margin"
    assert "not significantly more" in gate["reason"]


def test_matching_ignores_order_models_and_unscored_instances():
    base = results("old", {"b": [1, 0, 1, None, 1]})
    cur = results("new", {"b": [0, 0, 1, 1, None]})
    cur["instances"].reverse()
    comparison, _ = build_comparison(base, cur)
    row = comparison["rows"][0]
    assert row["n"] == 3 and row["n_baseline_only"] == 1 and row["n_current_only"] == 1
    assert (row["baseline"], row["current"]) == pytest.approx((2 / 3, 1 / 3))


def test_multi_model_baseline_pairs_by_name_and_warns():
    base = results("a", {"x": [1, 0]})
    base["instances"] += [dict(i, model="b") for i in base["instances"]]
    base["run"]["models"] = ["a", "b"]
    cur = results("c", {"x": [1, 1]})
    comparison, _ = build_comparison(base, cur)
    assert comparison["pairs"] == [] and comparison["unmatched_models"] == ["c"]
    assert any("no baseline model for c" in w for w in comparison["warnings"])


# ============================================================================================== the console script
def test_cli_merge_refuses_conflicts_and_keeps_identical_duplicates(tmp_path, capsys):
    from pytest_medhelm.cli import main

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    first = results("m", {"pubmedqa": [1, 0, 1]})
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(first))
    conflicting = results("m", {"pubmedqa": [1, 1, 1]})
    c.write_text(json.dumps(conflicting))
    out = tmp_path / "out.json"
    assert main(["merge", str(a), str(b), "--json", str(out), "-q"]) == 0
    merged = json.loads(out.read_text())
    assert len(merged["instances"]) == 3 and merged["benchmarks"][0]["mean"] == pytest.approx(2 / 3)
    assert merged["benchmarks"][0]["category"] == "Medical Research Assistance"
    assert main(["merge", str(a), str(c), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "conflicting results for benchmark 'pubmedqa', instance 'i001', model 'm': score 0 in" in err
    assert str(a) in err and str(c) in err
    assert main(["merge", str(tmp_path / "nope.json"), "--json", str(out)]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    assert main(["merge", str(a)]) == 2  # --json is required
    assert "--json" in capsys.readouterr().err
    # thresholds on the merged run decide the exit status
    assert main(["merge", str(a), "--json", str(out), "-q", "--threshold", "pubmedqa>=0.9"]) == 1
    assert "medhelm gate FAILED: pubmedqa>=0.9 for m: 0.667" in capsys.readouterr().out


def test_cli_runs_and_compare(tmp_path, capsys):
    from pytest_medhelm.cli import main

    assert main(["runs", "--rootdir", str(tmp_path)]) == 0
    assert "no saved runs" in capsys.readouterr().out
    save(results("m", {"pubmedqa": [1] * 40}), "base", tmp_path)
    save(results("m", {"pubmedqa": [1] * 20 + [0] * 20}), "new", tmp_path)
    assert main(["runs", "--rootdir", str(tmp_path)]) == 0
    listing = capsys.readouterr().out
    assert "0001" in listing and "base" in listing and "0002" in listing and "new" in listing
    assert main(["list", "--rootdir", str(tmp_path)]) == 0  # the command's first name, kept as an alias
    assert capsys.readouterr().out == listing
    assert main(["compare", "base", "new", "--rootdir", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    p = stats.mcnemar_exact(20, 0)
    assert "comparison with 0001_base" in shown
    assert any(line.split()[:1] == ["pubmedqa"] and "↓ -0.500 ***" in line and f"{p:.1e}" in line
               for line in shown.splitlines()), shown
    md = tmp_path / "c.md"
    assert main(["compare", "base", "latest", "--rootdir", str(tmp_path), "--compare-fail", "pubmedqa:0.1",
                 "--markdown", str(md)]) == 1
    assert "medhelm gate FAILED: compare-fail pubmedqa:0.1 for m: -0.500" in capsys.readouterr().out
    assert "### Comparison with 0001_base" in md.read_text() and "Compare-fail gates" in md.read_text()
    assert main(["compare", "base", "nope", "--rootdir", str(tmp_path)]) == 2
    assert "no saved run named 'nope'" in capsys.readouterr().err
    assert main(["compare", "base", "new", "--compare-fail", "x:2"]) == 2  # argparse: DROP outside (0, 1]
    assert main(["--help"]) == 0


def test_cli_agreement_is_delegated(capsys, monkeypatch):
    import importlib.util
    import sys
    import types

    from pytest_medhelm.cli import main

    try:
        present = importlib.util.find_spec("pytest_medhelm.jury.clinician_agreement") is not None
    except ModuleNotFoundError:
        present = False
    if not present:
        assert main(["agreement", "--x"]) == 2
        assert "needs pytest_medhelm.jury.clinician_agreement" in capsys.readouterr().err
    seen = []
    fake = types.ModuleType("pytest_medhelm.jury.clinician_agreement")
    fake.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "pytest_medhelm.jury.clinician_agreement", fake)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert main(["agreement", "--ratings", "r.csv"]) == 3 and seen == [["--ratings", "r.csv"]]


# ============================================================================================== pytest runs
def marks(p):
    """Significance marks as fnmatch patterns."""
    return "[*][*][*]" if p < 0.001 else "[*][*]" if p < 0.01 else "[*]" if p < 0.05 else ""


def shown_p(p):
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


@pytest.fixture
def wired(pytester, toy):
    """The toy project, nothing added: ComparePlugin is registered by the product's own plugin.py (its
    pytest_configure), so removing that registration fails these tests."""
    assert "compare" not in (pytester.path / "conftest.py").read_text()
    return pytester


@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_toy_regression_is_caught_and_reported(wired, xdist):
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(wired.path, toy_answers(["A"] * 32 + ["B"] * 8))
    with running_server(answer="A") as srv:
        # (setup: the saved baseline the next run compares with, in this process in both variants: its mode is not
        # what is checked)
        base = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-save", "base"), "-p", "no:xdist")
    assert base.ret == 0, base.stdout.str()
    base.stdout.fnmatch_lines(["*medhelm: run saved as .medhelm?runs?0001_base.json*"])
    md = wired.path / "summary.md"
    out = wired.path / "r.json"
    with running_server(answer="B") as srv:
        result = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-compare", "base",
                                      "--medhelm-compare-fail", "toy:0.05",
                                      "--medhelm-markdown", str(md), "--medhelm-json", str(out)), *xdist)
    text = result.stdout.str()
    assert result.ret == 1, text
    p = stats.mcnemar_exact(32, 8)  # 32 right before and wrong now, 8 the other way
    result.stdout.fnmatch_lines([
        "*comparison with 0001_base*",
        f"*toy*0.800*0.200*↓ -0.600 [*][*][*]*{p:.1e}*McNemar*",
        "*compare-fail gates*",
        "*medhelm gate FAILED: compare-fail toy:0.05 for openai/toy-model: -0.600*",
    ])
    report = json.loads(out.read_text())
    [row] = [r for r in report["comparison"]["rows"] if r["scope"] == "benchmark"]
    assert row["delta"] == pytest.approx(-0.6) and row["p"] == pytest.approx(p)
    assert report["comparison"]["baseline"]["name"] == "base"
    gate = next(g for g in report["gates"] if g.get("kind") == "compare_fail")
    assert gate["passed"] is False and gate["p_holm"] == pytest.approx(stats.paired_binary_margin_p(32, 8, 40, 0.05))
    assert "Comparison with 0001_base" in md.read_text() and "↓ -0.600 ***" in md.read_text()
    assert not (wired.path / ".medhelm" / "runs" / "0002_autosave.json").exists()  # only --medhelm-save saves


def test_improvement_and_autosave_and_latest(wired):
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(wired.path, toy_answers(["A"] * 8 + ["B"] * 32))
    with running_server(answer="A") as srv:
        assert run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-autosave")).ret == 0
    with running_server(answer="B") as srv:
        result = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-autosave", "--medhelm-compare",
                                      "--medhelm-compare-fail", "overall:0.01"))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*comparison with 0001_autosave*", "*toy*0.200*0.800*↑ +0.600 [*][*][*]*",
                                 "*openai/toy-model (baseline)*", "*medhelm gates: all 1 passed*",
                                 "*run saved as .medhelm?runs?0002_autosave.json*"])
    assert [r.name for r in list_runs(wired.path)] == ["autosave", "autosave"]


def test_missing_baseline_is_a_usage_error_before_any_call(wired):
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(wired.path, toy_answers(["A"] * 4))
    with running_server(answer="A") as srv:
        result = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-compare", "base"))
        assert srv.count == 0
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--medhelm-compare: no saved run named 'base' in *runs (latest saved runs: none)*"])
    with running_server(answer="A") as srv:
        result = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-compare-fail", "toy:0.1"))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--medhelm-compare-fail (compares with the latest run): no saved run*"])


@pytest.mark.e2e
def test_shards_merged_give_exactly_the_unsharded_numbers(wired):
    """Shards 1/2 and 2/2, without and with xdist (every worker computes the same slice), merged by the CLI."""
    from pytest_medhelm.cli import main
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(wired.path, toy_answers(["A", "B", "B"] * 14))  # 42 questions
    models = ["--medhelm-model", "openai/other-model"]  # two models: win rates too
    with running_server(rules=[("question 1", "B"), ("question 2", "B")], answer="A") as srv:
        full = wired.path / "full.json"
        assert run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-json", str(full)), *models).ret == 0
        a = json.loads(full.read_text())
        for mode, xdist in (("serial", []), ("xdist", ["-n", "2"])):
            shards = []
            for i in (1, 2):
                path = wired.path / f"{mode}-shard{i}.json"
                result = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-shard", f"{i}/2", "--medhelm-json",
                                              str(path)),
                             *models, *xdist)
                assert result.ret == 0, result.stdout.str()
                result.stdout.fnmatch_lines([f"*medhelm shard: {i}/2*"])
                shards.append(path)
            merged = wired.path / f"{mode}-merged.json"
            assert main(["merge", *map(str, shards), "--json", str(merged), "-q"]) == 0
            b = json.loads(merged.read_text())
            ids = [{(i["instance_id"], i["model"]) for i in json.loads(p.read_text())["instances"]} for p in shards]
            assert ids[0] and ids[1] and not ids[0] & ids[1], mode  # two non-empty, disjoint slices
            assert ids[0] | ids[1] == {(i["instance_id"], i["model"]) for i in a["instances"]}, mode
            assert b["benchmarks"] == a["benchmarks"], mode
            assert b["categories"] == a["categories"] and b["models"] == a["models"], mode
            assert b["run"]["models"] == a["run"]["models"] and b["run"]["options"]["shard"] is None
            assert [m["shard"] for m in b["run"]["merged_from"]] == [[1, 2], [2, 2]]
            assert [(i["instance_id"], i["model"], i["score"]) for i in b["instances"]] == [
                (i["instance_id"], i["model"], i["score"]) for i in a["instances"]]


def test_shard_slices_do_not_depend_on_collection_or_selection(wired):
    from pytest_medhelm.run.collection import shard_of

    data = write_toy_data(wired.path, toy_answers(["A"] * 20))
    args = ["--medhelm-model", "openai/m", "--medhelm-data-dir", str(data), "--collect-only", "-q"]
    full = run(wired, *args, "--medhelm-shard", "2/3")
    picked = {line for line in full.stdout.lines if "::test_toy[" in line}
    expected = {f"test_toy.py::test_toy[m-q{i:03d}]" for i in range(20) if shard_of(f"test_toy[m-q{i:03d}]", 3) == 2}
    assert picked == expected and picked
    narrowed = run(wired, *args, "--medhelm-shard", "2/3", "-k", "q00")  # -k first keeps the same verdicts
    assert {line for line in narrowed.stdout.lines if "::test_toy[" in line} == {
        n for n in expected if "q00" in n}


def test_pubmedqa_200_A_then_B_fails_the_compare_gate(wired, shared_data):
    """The issue's acceptance run: "A" on 200 PubMedQA instances saved as the baseline, then "B" compared."""
    from pytest_medhelm.testing.server import running_server

    binomtest = pytest.importorskip("scipy.stats").binomtest

    def suite(srv, *args):
        return run(wired, str(SUITE), "--rootdir", str(wired.path), "--medhelm-model", "openai/x",
                   "--medhelm-api-base", srv.url, "--medhelm-data-dir", str(shared_data), "--medhelm-benchmark",
                   "pubmedqa", "--medhelm-max-instances", "200", "--medhelm-cache", "off", *args)

    with running_server(answer="A") as srv:
        base = suite(srv, "--medhelm-save", "base")
    assert base.ret == 0, base.stdout.str()[-3000:]
    out = wired.path / "r.json"
    with running_server(answer="B") as srv:
        result = suite(srv, "--medhelm-compare", "base", "--medhelm-compare-fail", "pubmedqa:0.05",
                       "--medhelm-json", str(out))
    assert result.ret == 1, result.stdout.str()[-3000:]
    report = json.loads(out.read_text())
    [row] = [r for r in report["comparison"]["rows"] if r["scope"] == "benchmark"]
    worse, better = row["discordant"]["worse"], row["discordant"]["better"]  # yes-questions, no-questions
    assert row["n"] == 200 and worse > better > 0
    assert row["delta"] == pytest.approx((better - worse) / 200)
    assert row["p"] == pytest.approx(binomtest(better, worse + better, 0.5).pvalue)
    result.stdout.fnmatch_lines([
        (f"*pubmedqa*{row['baseline']:.3f}*{row['current']:.3f}*↓ {row['delta']:+.3f} {marks(row['p'])} *"
         f"{shown_p(row['p'])}*McNemar*"),
        f"*medhelm gate FAILED: compare-fail pubmedqa:0.05 for openai/x: {row['delta']:.3f}*",
    ])
