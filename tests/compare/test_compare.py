"""Saved runs, comparisons with a baseline, compare-fail gates, shards and the ``pytest-medhelm`` console script.

The statistics are checked against hand computations, against scipy (McNemar = the exact binomial test on the
discordant pairs) and against a plain-Python bootstrap written independently here.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from pathlib import Path

import pytest
from pytester_runs import UNCACHED, run, toy_args
from toy_benchmark import toy_answers, write_toy_data

from pytest_medhelm.compare import stats
from pytest_medhelm.compare.compare import build_comparison, model_pairs
from pytest_medhelm.compare.storage import StorageError, list_runs, load, sanitize, save

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


# ============================================================================================== statistics
@pytest.mark.parametrize("b, c, expected", [
    (2, 8, 112 / 1024),  # 2 · (C(10,0) + C(10,1) + C(10,2)) / 2^10
    (0, 0, 1.0),  # no discordant pair: no evidence
    (5, 5, 1.0),
    (0, 6, 2 / 64),  # 2 · 1 / 2^6
    (3, 1, 10 / 16),  # 2 · (1 + 4) / 2^4
])
def test_mcnemar_exact_by_hand(b, c, expected):
    assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)
    assert stats.mcnemar_exact(c, b) == stats.mcnemar_exact(b, c)


def test_mcnemar_exact_equals_scipys_binomial_test():
    binomtest = pytest.importorskip("scipy.stats").binomtest
    for b, c in itertools.chain(itertools.product(range(0, 25, 3), range(0, 25, 4)), [(110, 70), (400, 455)]):
        expected = 1.0 if b + c == 0 else binomtest(min(b, c), b + c, 0.5).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300), (b, c)


def test_holm_by_hand():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → monotone: 0.06
    assert stats.holm([0.01, 0.04, 0.03, None, 0.005]) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert stats.holm([0.5]) == [0.5] and stats.holm([0.6, 0.9]) == [1.0, 1.0] and stats.holm([]) == []


def test_minimum_detectable_effect_by_hand():
    assert stats.z_sum() == pytest.approx(1.959964 + 0.841621, abs=1e-6)
    # d = [1, 0, 0, -1]: mean 0, sample variance 2/3, SE = sqrt(2/3 / 4)
    result = stats.compare_benchmark({"": ([0, 1, 1, 1], [1, 1, 1, 0])}, key="x")
    assert result.mde == pytest.approx(2.801585 * math.sqrt(2 / 3 / 4), rel=1e-5)
    # two subsets: SE = sqrt(SE_1² + SE_2²) / 2
    d1, d2 = [0.2, 0.4, 0.9], [0.0, -0.5, 0.1, 0.3]
    se = math.sqrt(statistics.variance(d1) / 3 + statistics.variance(d2) / 4) / 2
    result = stats.compare_benchmark({"a": ([0, 0, 0], d1), "b": ([0] * 4, d2)}, key="y")
    assert result.mde == pytest.approx(stats.z_sum() * se)
    assert result.test == "stratified_paired_bootstrap"
    assert stats.compare_benchmark({"": ([1], [0])}, key="z").mde is None  # one instance: no spread


def test_binary_benchmark_uses_exact_mcnemar():
    binomtest = pytest.importorskip("scipy.stats").binomtest
    base = [1] * 30 + [0] * 10 + [1] * 40 + [0] * 20  # 30 right→wrong, 10 wrong→right, 60 concordant
    cur = [0] * 30 + [1] * 10 + [1] * 40 + [0] * 20
    result = stats.compare_benchmark({"": (base, cur)}, key="pubmedqa")
    assert result.test == "mcnemar_exact" and result.discordant == (30, 10) and result.n == 100
    assert (result.baseline, result.current) == pytest.approx((0.70, 0.50))
    assert result.delta == pytest.approx(-0.20)
    assert result.p == pytest.approx(binomtest(10, 40, 0.5).pvalue)
    assert result.ci_low < -0.20 < result.ci_high < 0


def independent_bootstrap(diffs, resamples=10_000, seed=12345):
    """A plain-Python paired bootstrap, written without looking at numpy: percentile CI and null-shifted p."""
    rnd = random.Random(seed)
    n, observed = len(diffs), sum(diffs) / len(diffs)
    means = sorted(sum(rnd.choice(diffs) for _ in range(n)) / n for _ in range(resamples))
    extreme = sum(1 for m in means if abs(m - observed) >= abs(observed))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1], (1 + extreme) / (resamples + 1)


@pytest.mark.parametrize("shift", [0.0, 0.04, 0.12])
def test_paired_bootstrap_agrees_with_an_independent_implementation(shift):
    rnd = random.Random(7)
    base = [rnd.random() for _ in range(150)]
    cur = [min(1.0, max(0.0, b + rnd.gauss(shift, 0.25))) for b in base]
    result = stats.compare_benchmark({"": (base, cur)}, key="rouge")
    diffs = [c - b for b, c in zip(base, cur)]
    low, high, p = independent_bootstrap(diffs)
    assert result.test == "paired_bootstrap"
    assert result.delta == pytest.approx(sum(diffs) / len(diffs))
    assert result.ci_low == pytest.approx(low, abs=0.006) and result.ci_high == pytest.approx(high, abs=0.006)
    assert result.p == pytest.approx(p, abs=0.012)
    # deterministic: the same numbers every time, whatever the record order
    again = stats.compare_benchmark({"": (base, cur)}, key="rouge")
    assert (again.p, again.ci_low, again.ci_high) == (result.p, result.ci_low, result.ci_high)


def test_bootstrap_of_few_distinct_differences_agrees_with_an_independent_implementation():
    """0/1 scores give differences in {-1, 0, 1}: resampled by counts (multinomial), the same distribution."""
    rnd = random.Random(11)
    base = [float(rnd.random() < 0.6) for _ in range(240)]
    cur = [b if rnd.random() < 0.85 else 1.0 - b for b in base]
    diffs = [c - b for b, c in zip(base, cur)]
    observed = sum(diffs) / len(diffs)
    boot = stats.bootstrap_means(diffs, key="binary")
    low, high, p = independent_bootstrap(diffs)
    assert stats.percentile_ci(boot) == pytest.approx((low, high), abs=0.006)
    assert stats.bootstrap_p(boot, observed) == pytest.approx(p, abs=0.012)
    assert boot.mean() == pytest.approx(observed, abs=0.002)
    assert boot.std() == pytest.approx(statistics.pstdev(diffs) / math.sqrt(len(diffs)), rel=0.05)


def test_bootstrap_against_the_exact_bootstrap_distribution():
    """Three instances: the 27 equally likely resamples give the exact bootstrap distribution by hand."""
    diffs = [0.0, 0.3, 0.9]
    observed = 0.4
    means = sorted(sum(pick) / 3 for pick in itertools.product(diffs, repeat=3))
    exact_p = (sum(1 for m in means if abs(m - observed) >= abs(observed) - 1e-12)) / 27
    boot = stats.bootstrap_means(diffs, key="tiny")
    assert boot.mean() == pytest.approx(observed, abs=0.01)
    assert stats.bootstrap_p(boot, observed) == pytest.approx(exact_p, abs=0.01)
    # every bootstrap mean is one of the 10 possible values, with the right frequencies
    for value in set(means):
        share = sum(1 for m in boot if abs(m - value) < 1e-9) / boot.size
        assert share == pytest.approx(means.count(value) / 27, abs=0.012)


def test_category_is_the_mean_of_benchmark_deltas_with_a_stratified_bootstrap():
    rnd = random.Random(3)
    a_base = [rnd.random() for _ in range(80)]
    a_cur = [min(1, max(0, x + rnd.gauss(-0.05, 0.2))) for x in a_base]
    b_base = [float(rnd.random() < 0.6) for _ in range(120)]
    b_cur = [x if rnd.random() < 0.8 else 1 - x for x in b_base]
    ra = stats.compare_benchmark({"": (a_base, a_cur)}, key="a")
    rb = stats.compare_benchmark({"": (b_base, b_cur)}, key="b")
    cat = stats.combine([ra, rb])
    assert cat.delta == pytest.approx((ra.delta + rb.delta) / 2)
    assert cat.baseline == pytest.approx((ra.baseline + rb.baseline) / 2) and cat.n == 200 and cat.n_benchmarks == 2
    assert cat.test == "stratified_paired_bootstrap"
    assert cat.mde == pytest.approx(stats.z_sum() * math.sqrt(ra.se ** 2 + rb.se ** 2) / 2)
    # independently: resample each benchmark within itself, average the two mean differences
    da = [c - b for b, c in zip(a_base, a_cur)]
    db = [c - b for b, c in zip(b_base, b_cur)]
    rnd2 = random.Random(99)
    means = sorted((sum(rnd2.choice(da) for _ in da) / len(da) + sum(rnd2.choice(db) for _ in db) / len(db)) / 2
                   for _ in range(10_000))
    assert cat.ci_low == pytest.approx(means[250], abs=0.006) and cat.ci_high == pytest.approx(means[9749], abs=0.006)
    extreme = sum(1 for m in means if abs(m - cat.delta) >= abs(cat.delta))
    assert cat.p == pytest.approx((1 + extreme) / 10_001, abs=0.012)
    # a category of one benchmark is that benchmark's own test
    only = stats.combine([rb])
    assert (only.p, only.test, only.ci_low) == (rb.p, "mcnemar_exact", rb.ci_low)


# ============================================================================================== comparisons of results
def results(model, scores, category_of=None):
    """A results dict built as a run builds it: ``scores[slug]`` = per-instance scores (ids i000, i001, ...)."""
    from types import SimpleNamespace

    from pytest_medhelm.report.results import build_results

    category_of = category_of or {}
    records = [{"benchmark": slug, "instance_id": f"i{i:03d}", "model": model, "score": s, "raw_score": s,
                "prompt_sha256": f"{slug}{i}", "error": None if s is not None else "ModelError: down"}
               for slug, values in scores.items() for i, s in enumerate(values)]
    catalogue = {slug: SimpleNamespace(category=category_of.get(slug, "medical_research"), subcategory="",
                                       metric=SimpleNamespace(name="exact_match")) for slug in scores}
    return build_results(records, catalogue, models=[model])


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


# ============================================================================================== storage
def test_storage_numbers_names_and_loads(tmp_path):
    run = results("m", {"toy": [1, 0]})
    assert save(run, "base", tmp_path).name == "0001_base.json"
    assert save(run, "autosave", tmp_path).name == "0002_autosave.json"
    assert save(run, "feature/x y", tmp_path).name == "0003_feature_x_y.json"
    assert save(run, "base", tmp_path).name == "0004_base.json"
    assert sanitize("../../etc") == "etc" and sanitize("///") == "run"
    assert [(r.number, r.name) for r in list_runs(tmp_path)] == [(1, "base"), (2, "autosave"), (3, "feature_x_y"),
                                                                  (4, "base")]
    assert load("latest", tmp_path)["saved"]["number"] == 4
    assert load("base", tmp_path)["saved"]["number"] == 4  # a name: its latest run
    assert load("2", tmp_path)["saved"]["name"] == "autosave" and load("0001", tmp_path)["saved"]["number"] == 1
    assert load("0003_feature_x_y.json", tmp_path)["saved"]["number"] == 3
    saved = load(str(tmp_path / ".medhelm" / "runs" / "0002_autosave.json"), tmp_path)
    assert saved["source"].endswith("0002_autosave.json")
    info = saved["run"]
    assert info["machine_info"]["cpu_count"] and info["machine_info"]["python"]
    assert set(info["commit_info"]) == {"commit", "branch", "dirty"}
    assert saved["instances"] == run["instances"]  # still a results file
    assert oct((tmp_path / ".medhelm" / "runs").stat().st_mode & 0o777) == "0o700"


def test_storage_errors_name_the_file(tmp_path):
    with pytest.raises(StorageError, match="no saved run in .*runs.*--medhelm-save"):
        load("latest", tmp_path)
    save(results("m", {"toy": [1]}), "base", tmp_path)
    with pytest.raises(StorageError, match=r"no saved run named 'nope'.*0001_base"):
        load("nope", tmp_path)
    with pytest.raises(StorageError, match="missing.json: no such file"):
        load("missing.json", tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StorageError, match="bad.json: not valid JSON"):
        load(str(bad), tmp_path)
    bad.write_text(json.dumps({"schema_version": 2, "run": {}, "benchmarks": [], "instances": []}))
    with pytest.raises(StorageError, match=r"bad.json: not a pytest-medhelm results file of schema_version 1 "
                                           r"\(schema_version 2\)"):
        load(str(bad), tmp_path)
    bad.write_text(json.dumps({"schema_version": 1, "run": {}, "benchmarks": [], "instances": [{"x": 1}]}))
    with pytest.raises(StorageError, match=r"instances\[0\] lacks benchmark"):
        load(str(bad), tmp_path)


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
        base = run(wired, *toy_args(srv, data, *UNCACHED, "--medhelm-save", "base"), *xdist)
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
