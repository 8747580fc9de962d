"""Power planning for gates (compare/power.py, ``pytest-medhelm power``, ``--medhelm-power``).

The minimum detectable effect is checked against simulation: synthetic paired runs whose true drop equals the MDE
the code computed are drawn (seeded numpy), and the one-sided test it plans for must detect the drop in about
``power`` of them. The n for a margin is checked against the closed form computed here with scipy, and for
monotony. The console script and the summary line are checked on saved runs, their figures recomputed here from the
runs' per-instance scores.
"""

from __future__ import annotations

import json
import math
import statistics
from types import SimpleNamespace

import pytest
import pytester_runs
from pytester_runs import UNCACHED, toy_args
from toy_benchmark import toy_answers, write_toy_data

from pytest_medhelm.compare import power
from pytest_medhelm.compare.storage import save

np = pytest.importorskip("numpy")

ALPHA, POWER = 0.05, 0.8
RUNS = 4000
#: three Monte Carlo standard errors of a rate of 0.8 over RUNS runs (0.019), plus 0.015 for the approximation
#: itself (the variance estimated from each run, the binomial variance moving with the mean)
TOLERANCE = 3 * math.sqrt(POWER * (1 - POWER) / RUNS) + 0.015


def ppf(q: float) -> float:
    """The standard normal quantile from scipy, independent of the code's statistics.NormalDist (imported when a
    test first needs it: importing scipy.stats cost every process that collects this module 0.6 s of CPU)."""
    return float(pytest.importorskip("scipy.stats").norm.ppf(q))


def z_sum(alpha=ALPHA, pw=POWER):
    return ppf(1 - alpha) + ppf(pw)


def report(label: str, mde: float, rate: float) -> None:
    print(f"\n[power simulation] {label}: MDE {mde:.4f}, detected in {rate:.3f} of {RUNS} runs (target {POWER})")


# ============================================================================================== the closed forms
def test_z_and_mde_by_hand():
    assert power.z_one_sided() == pytest.approx(1.644854 + 0.841621, abs=1e-6)
    spread = power.spread_of([[0.1, 0.3, -0.2, 0.4, 0.0]], paired=True)
    assert spread.variance == "paired_differences"
    se = math.sqrt(statistics.variance([0.1, 0.3, -0.2, 0.4, 0.0]) / 5)
    assert power.Plan((spread,)).mde == pytest.approx(z_sum() * se)
    # no baseline, 0/1 scores: the binomial variance p(1 - p) at the observed mean (7 of 10)
    binary = power.spread_of([[1] * 7 + [0] * 3], paired=False)
    assert binary.variance == "binomial" and binary.unit_variance == pytest.approx(0.21)
    assert power.Plan((binary,)).mde == pytest.approx(z_sum() * math.sqrt(0.21 / 10))
    # other scores without a baseline: the sample variance
    assert power.spread_of([[0.2, 0.5, 0.9]], paired=False).unit_variance == pytest.approx(
        statistics.variance([0.2, 0.5, 0.9]))


def test_a_category_is_a_macro_average_of_its_benchmarks():
    """SE^2 = sum of the benchmarks' mean variances / k^2, and the n for a margin is per benchmark."""
    a, b, c = [0.3, -0.1, 0.0, 0.5], [1.0, 0.0, -1.0, 0.0, 0.0, 1.0], [0.25, 0.5, 0.0]
    plan = power.Plan(tuple(power.spread_of([d], paired=True) for d in (a, b, c)))
    se = math.sqrt(sum(statistics.variance(d) / len(d) for d in (a, b, c))) / 3
    assert plan.k == 3 and plan.n == 13 and plan.se == pytest.approx(se)
    assert plan.mde == pytest.approx(z_sum() * se)
    unit = sum(statistics.variance(d) for d in (a, b, c)) / 9
    assert plan.n_for(0.05) == math.ceil(z_sum() ** 2 * unit / 0.05 ** 2)
    # a benchmark of two subsets: the mean of its subset means
    two = power.spread_of([a, c], paired=True)
    assert power.Plan((two,)).se == pytest.approx(math.sqrt(statistics.variance(a) / 4
                                                            + statistics.variance(c) / 3) / 2)


@pytest.mark.parametrize("variance", [0.05, 0.21, 0.3])
def test_n_for_a_margin_is_the_closed_form_and_monotone(variance):
    margins = [0.01, 0.02, 0.03, 0.05, 0.08, 0.1]
    for m in margins:
        expected = math.ceil((ppf(0.95) + ppf(0.8)) ** 2 * variance / m ** 2)
        n = power.n_for_margin(variance, m)
        assert n == expected, (variance, m)
        # at that n the MDE is the margin or less; one instance fewer and it is more
        mde_at_n, mde_below = (power.z_one_sided() * math.sqrt(variance / k) for k in (n, n - 1))
        assert mde_at_n <= m + 1e-12 < mde_below
    ns = [power.n_for_margin(variance, m) for m in margins]
    assert ns == sorted(ns, reverse=True) and len(set(ns)) == len(ns)  # a smaller margin needs more instances
    by_power = [power.n_for_margin(variance, 0.03, power=p) for p in (0.5, 0.7, 0.8, 0.9, 0.95)]
    assert by_power == sorted(by_power) and len(set(by_power)) == 5
    by_alpha = [power.n_for_margin(variance, 0.03, alpha=a) for a in (0.01, 0.025, 0.05, 0.1)]
    assert by_alpha == sorted(by_alpha, reverse=True) and len(set(by_alpha)) == 4
    assert power.n_for_margin(0.0, 0.03) is None  # no spread: nothing to plan


# ============================================================================================== simulation
def detected(diffs, se_hat, reference=0.0):
    """The one-sided test the plan is for: reject "no drop" when (mean - reference) / SE < -z_(1-alpha)."""
    return (diffs - reference) / se_hat < -ppf(1 - ALPHA)


def test_simulated_paired_runs_detect_a_drop_of_the_mde_with_the_planned_power():
    """A pilot comparison of graded scores (steps of 0.25, as a jury's 1-5) gives the MDE at n = 120; runs drawn
    from the pilot's differences shifted by -MDE are detected in ~80% of the draws."""
    rng = np.random.default_rng(20260501)
    n = 120
    base = rng.integers(0, 5, n) / 4
    cur = np.clip(base + rng.choice([-0.5, -0.25, 0, 0, 0.25, 0.5], n), 0, 1)
    plan = power.Plan((power.spread_of([list(cur - base)], paired=True),))
    population = (cur - base) - (cur - base).mean() - plan.mde  # the pilot's shape, true drop = the MDE
    draws = population[rng.integers(0, n, size=(RUNS, n))]
    rate = detected(draws.mean(axis=1), draws.std(axis=1, ddof=1) / math.sqrt(n)).mean()
    report("paired graded scores, n=120", plan.mde, rate)
    assert abs(rate - POWER) <= TOLERANCE


def test_simulated_paired_binary_runs_detect_the_mde():
    """0/1 scores: a pilot with 30 instances worse and 30 better of 200 gives the MDE; a population with
    P(worse) - P(better) = MDE and the pilot's discordance is detected in ~80% of the runs."""
    rng = np.random.default_rng(7)
    n = 200
    pilot = [-1.0] * 30 + [1.0] * 30 + [0.0] * 140
    plan = power.Plan((power.spread_of([pilot], paired=True),))
    q = 60 / n
    p_worse, p_better = (q + plan.mde) / 2, (q - plan.mde) / 2
    draws = rng.choice([-1.0, 1.0, 0.0], p=[p_worse, p_better, 1 - q], size=(RUNS, n))
    rate = detected(draws.mean(axis=1), draws.std(axis=1, ddof=1) / math.sqrt(n)).mean()
    report("paired 0/1 scores, n=200", plan.mde, rate)
    assert abs(rate - POWER) <= TOLERANCE


def test_simulated_threshold_without_baseline_uses_the_binomial_variance():
    """No baseline, 0/1 scores at 0.5 on n = 100: a run whose true score is the threshold minus the MDE is told
    from the threshold (one-sided test of the mean against it) in ~80% of the runs."""
    rng = np.random.default_rng(11)
    n, threshold = 100, 0.5
    plan = power.Plan((power.spread_of([[1.0] * 50 + [0.0] * 50], paired=False),))
    assert plan.variance == "binomial"
    draws = (rng.random((RUNS, n)) < threshold - plan.mde).astype(float)
    means = draws.mean(axis=1)
    rate = detected(means, np.sqrt(means * (1 - means) / n), reference=threshold).mean()
    report("one-sample 0/1 scores, n=100", plan.mde, rate)
    assert abs(rate - POWER) <= TOLERANCE


def test_simulated_category_detects_its_mde():
    """A category of three benchmarks of different sizes and spreads, each dropping by the category's MDE (so the
    macro-average drops by it): the stratified test of the macro-average detects it in ~80% of the runs."""
    rng = np.random.default_rng(3)
    sizes, sds = (60, 150, 90), (0.2, 0.45, 0.3)
    pilots = [list(rng.normal(0, sd, size)) for size, sd in zip(sizes, sds)]
    plan = power.Plan(tuple(power.spread_of([p], paired=True) for p in pilots))
    means, variances = np.zeros(RUNS), np.zeros(RUNS)
    for pilot, size in zip(pilots, sizes):
        centred = np.asarray(pilot) - np.mean(pilot) - plan.mde
        draws = centred[rng.integers(0, size, size=(RUNS, size))]
        means += draws.mean(axis=1) / 3
        variances += draws.var(axis=1, ddof=1) / size / 9
    rate = detected(means, np.sqrt(variances)).mean()
    report("category of 3 benchmarks (60, 150, 90)", plan.mde, rate)
    assert abs(rate - POWER) <= TOLERANCE


# ============================================================================================== saved runs, the CLI
CATEGORIES = {"alpha": "clinical_decision_support", "beta": "clinical_decision_support", "gamma": "medical_research"}


def results(model, scores, thresholds=()):
    """A results dict built as a run builds it: ``scores[slug]`` = per-instance scores (ids i000, i001, ...)."""
    from pytest_medhelm.report.results import build_results

    records = [{"benchmark": slug, "instance_id": f"i{i:03d}", "model": model, "score": s, "raw_score": s,
                "prompt_sha256": f"{slug}{i}", "error": None}
               for slug, values in scores.items() for i, s in enumerate(values)]
    catalogue = {slug: SimpleNamespace(category=CATEGORIES[slug], subcategory="",
                                       metric=SimpleNamespace(name="m")) for slug in scores}
    return build_results(records, catalogue, models=[model], options={"thresholds": list(thresholds)})


@pytest.fixture
def two_runs(tmp_path):
    rng = np.random.default_rng(5)
    base = {"alpha": [float(x) for x in rng.random(60) < 0.7], "beta": [float(x) for x in rng.random(40)],
            "gamma": [float(x) for x in rng.random(50) < 0.5]}
    new = {slug: [v if rng.random() < 0.8 else (1.0 - v) for v in values] for slug, values in base.items()}
    save(results("m", base), "base", tmp_path)
    save(results("m", new, ["Clinical Decision Support>=0.55"]), "new", tmp_path)
    return base, new


def row_of(out: str, label: str) -> list[str]:
    [line] = [line for line in out.splitlines() if line.startswith(label + "  ")]
    return line[len(label):].split()


def test_cli_power_against_a_baseline(tmp_path, capsys, two_runs):
    from pytest_medhelm.cli import main

    base, new = two_runs
    out_json = tmp_path / "power.json"
    assert main(["power", "new", "--baseline", "base", "--rootdir", str(tmp_path), "--margin", "0.05",
                 "--threshold", "gamma>=0.3", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "power of 0002_new against 0001_base: alpha 0.05 one-sided, power 0.8, margin 0.05:" in out
    diffs = {slug: [c - b for b, c in zip(base[slug], new[slug])] for slug in base}
    var = {slug: statistics.variance(d) for slug, d in diffs.items()}
    # the category gate the run recorded: alpha and beta, macro-averaged
    se = math.sqrt(var["alpha"] / 60 + var["beta"] / 40) / 2
    n_cat = math.ceil(z_sum() ** 2 * (var["alpha"] + var["beta"]) / 4 / 0.05 ** 2)
    cells = row_of(out, "Clinical Decision Support>=0.55")
    assert cells[:3] == ["40-60", "x", "2"] and cells[3] == "paired_differences"
    assert cells[4:9] == [f"{se:.3f}", f"{z_sum() * se:.3f}", f"{z_sum() * se:.3f}", "0.05", f"{n_cat}"]
    # the threshold given here, and each benchmark
    for label, slug in (("gamma>=0.3", "gamma"), ("gamma", "gamma"), ("alpha", "alpha"), ("beta", "beta")):
        n = len(diffs[slug])
        se = math.sqrt(var[slug] / n)
        assert row_of(out, label) == [str(n), "paired_differences", f"{se:.3f}", f"{z_sum() * se:.3f}",
                                      f"{z_sum() * se:.3f}", "0.05",
                                      str(math.ceil(z_sum() ** 2 * var[slug] / 0.05 ** 2))], label
    data = json.loads(out_json.read_text())
    [gate] = [r for r in data["rows"] if r["spec"] == "Clinical Decision Support>=0.55"]
    assert gate["n_for_margin"] == n_cat and gate["design"] == "paired" and gate["k"] == 2


def test_cli_power_without_a_baseline_and_its_own_margins(tmp_path, capsys, two_runs):
    from pytest_medhelm.cli import main

    _, new = two_runs
    assert main(["power", "new", "--rootdir", str(tmp_path), "--compare-fail", "overall:0.03",
                 "--alpha", "0.1", "--power", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "(no baseline): alpha 0.1 one-sided, power 0.9:" in out
    z = z_sum(0.1, 0.9)
    p = sum(new["alpha"]) / 60
    binomial = p * (1 - p)
    assert row_of(out, "alpha")[:4] == ["60", "binomial", f"{math.sqrt(binomial / 60):.3f}",
                                        f"{z * math.sqrt(binomial / 60):.3f}"]
    sample = statistics.variance(new["beta"])
    assert row_of(out, "beta")[:2] == ["40", "sample"]
    # the category gate's own margin: this run's category score minus the threshold
    cat = (p + sum(new["beta"]) / 40) / 2
    se = math.sqrt(binomial / 60 + sample / 40) / 2
    cells = row_of(out, "Clinical Decision Support>=0.55")
    assert cells[3:6] == ["mixed", f"{se:.3f}", f"{z * se:.3f}"]
    if cat > 0.55:
        assert cells[7] == f"{round(cat - 0.55, 3):g}"
        assert cells[8] == str(math.ceil(z ** 2 * (binomial + sample) / 4 / (cat - 0.55) ** 2))
    # overall: three benchmarks; the compare-fail gate detects DROP + MDE, n for DROP beyond it
    q = sum(new["gamma"]) / 50
    unit = (binomial + sample + q * (1 - q)) / 9
    se = math.sqrt(binomial / 60 + sample / 40 + q * (1 - q) / 50) / 3
    assert row_of(out, "compare-fail overall:0.03")[:9] == [
        "40-60", "x", "3", "mixed", f"{se:.3f}", f"{z * se:.3f}", f"{0.03 + z * se:.3f}", "0.03",
        str(math.ceil(z ** 2 * unit / 0.03 ** 2))]


def test_cli_power_usage_errors(tmp_path, capsys, two_runs):
    from pytest_medhelm.cli import main

    assert main(["power", "new", "--rootdir", str(tmp_path), "--threshold", "nope>=0.5"]) == 2
    assert "'nope' is not a benchmark of the run" in capsys.readouterr().err
    assert main(["power", "new", "--rootdir", str(tmp_path), "--alpha", "1.5"]) == 2
    assert "--alpha: expected a number in (0, 1)" in capsys.readouterr().err
    assert main(["power", "missing", "--rootdir", str(tmp_path)]) == 2
    assert "no saved run named 'missing'" in capsys.readouterr().err


def test_no_spread_plans_nothing_and_says_so(tmp_path, capsys):
    from pytest_medhelm.cli import main

    same = {"alpha": [1.0, 0.0, 1.0, 1.0]}
    save(results("m", same, ["alpha>=0.5"]), "a", tmp_path)
    save(results("m", same, ["alpha>=0.5"]), "b", tmp_path)
    assert main(["power", "b", "--baseline", "a", "--rootdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    cells = row_of(out, "alpha>=0.5")
    assert cells[:6] == ["4", "paired_differences", "0.000", "-", "-", "-"]
    assert "no spread: no instance changed from the baseline" in " ".join(cells[6:])


# ============================================================================================== a pytest run
@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_summary_line_per_gate_against_the_saved_baseline(pytester, toy, xdist):
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(pytester.path, toy_answers(["A"] * 28 + ["B"] * 12))  # the baseline (always "A") scores 0.7
    with running_server(answer="A") as srv:
        # (in the variant's mode: the run saved under xdist is read below, as users save and compare with one -n;
        # tests/compare/test_compare.py saves its baseline serially)
        base = pytester_runs.run(pytester, *toy_args(srv, data, *UNCACHED, "--medhelm-save", "base"), *xdist)
    assert base.ret == 0, base.stdout.str()
    # this run answers 9 of the "A" questions wrong and 3 of the "B" questions right
    flips = [(f"question {i}?", "B") for i in (*range(9), 30, 31, 32)]
    out = pytester.path / "r.json"
    with running_server(rules=flips, answer="A") as srv:
        result = pytester_runs.run(pytester, *toy_args(
            srv, data, "--medhelm-compare=base", "--medhelm-threshold", "toy>=0.5", "--medhelm-compare-fail",
            "toy:0.05", "--medhelm-power", "--medhelm-json", str(out), "--medhelm-markdown", "s.md"), *xdist)
    text = result.stdout.str()
    assert result.ret == 0, text
    report = json.loads(out.read_text())
    saved = json.loads((pytester.path / ".medhelm" / "runs" / "0001_base.json").read_text())
    before = {i["instance_id"]: i["score"] for i in saved["instances"]}
    diffs = [i["score"] - before[i["instance_id"]] for i in report["instances"]]
    assert len(diffs) == 40 and sum(d < 0 for d in diffs) == 9 and sum(d > 0 for d in diffs) == 3
    mde = z_sum() * statistics.stdev(diffs) / math.sqrt(40)
    margin = 0.7 - 0.5  # the baseline's score down to the threshold
    n_margin = math.ceil(z_sum() ** 2 * statistics.variance(diffs) / margin ** 2)
    n_drop = math.ceil(z_sum() ** 2 * statistics.variance(diffs) / 0.05 ** 2)
    result.stdout.fnmatch_lines([
        "*power of the gates:*",
        f"medhelm power: toy>=0.5 at n=40: detects a drop of {mde:.3f} or more (alpha 0.05 one-sided, power 0.8; "
        f"{n_margin} instances for 0.2)",
        f"medhelm power: compare-fail toy:0.05 at n=40: detects a drop of {0.05 + mde:.3f} or more (0.05 allowed + "
        f"{mde:.3f}; alpha 0.05 one-sided, power 0.8; {n_drop} instances for 0.05 beyond the allowed drop)",
    ])
    gates = {g["spec"]: g for g in report["gates"]}
    assert gates["toy>=0.5"]["power"]["mde"] == pytest.approx(mde)
    assert gates["toy>=0.5"]["power"]["n_for_margin"] == n_margin
    assert gates["compare-fail toy:0.05"]["power"]["detects"] == pytest.approx(0.05 + mde)
    assert gates["toy>=0.5"]["power"]["design"] == "paired"
    markdown = (pytester.path / "s.md").read_text()
    assert "#### Power of the gates" in markdown
    assert f"- medhelm power: toy>=0.5 at n=40: detects a drop of {mde:.3f} or more" in markdown


def test_summary_without_baseline_or_gate(pytester, toy):
    from pytest_medhelm.testing.server import running_server

    data = write_toy_data(pytester.path, toy_answers(["A"] * 30 + ["B"] * 10))
    with running_server(answer="A") as srv:
        plain = pytester_runs.run(pytester, *toy_args(srv, data, *UNCACHED, "--medhelm-power"))
        gated = pytester_runs.run(pytester, *toy_args(srv, data, *UNCACHED, "--medhelm-power", "--medhelm-threshold",
                                                      "toy>=0.6"))
    plain.stdout.fnmatch_lines(["medhelm power: no gate to plan*"])
    pytester.makeini("[pytest]\nmedhelm_power = true\nmedhelm_thresholds = toy>=0.6\n")
    with running_server(answer="A") as srv:
        from_ini = pytester_runs.run(pytester, *toy_args(srv, data, *UNCACHED))
    mde = z_sum() * math.sqrt(0.75 * 0.25 / 40)
    n_margin = math.ceil(z_sum() ** 2 * 0.75 * 0.25 / 0.15 ** 2)
    line = (f"medhelm power: toy>=0.6 at n=40: detects a true score {mde:.3f} or more below 0.6 (no baseline: the "
            f"binomial variance of this run's scores; alpha 0.05 one-sided, power 0.8; {n_margin} instances for 0.15)")
    gated.stdout.fnmatch_lines([line])
    from_ini.stdout.fnmatch_lines([line])  # the ini key medhelm_power
    pytester.makeini("[pytest]\nmedhelm_thresholds = toy>=0.6\n")
    with running_server(answer="A") as srv:
        without = pytester_runs.run(pytester, *toy_args(srv, data, *UNCACHED))
    assert "medhelm gates: all 1 passed" in without.stdout.str()
    assert "medhelm power" not in without.stdout.str()  # only when asked
