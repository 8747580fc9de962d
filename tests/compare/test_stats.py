"""The statistics of comparisons (compare/stats.py): the compare-fail gate's margin tests, by hand and by simulation,
several subsets, the combination of benchmarks into categories and overall, and McNemar, Holm, the MDE and the
paired bootstrap against hand computations, scipy and an independent plain-Python bootstrap.

The simulations draw paired runs whose *true* drop is known. At the margin (true drop = DROP) a valid gate fails
in at most alpha = 0.05 of the runs; the tests allow the Monte Carlo error of the simulated rate (three standard
errors of a binomial proportion at 0.05 over the number of runs, stated in each test). With a true drop of 2 x DROP
on n = 500 the gate must fail in most runs; the measured rates are printed (``pytest -s``).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from pytest_medhelm.compare import stats

np = pytest.importorskip("numpy")

ALPHA = stats.ALPHA


def slack(runs: int) -> float:
    """Three Monte Carlo standard errors of a rejection rate of alpha over ``runs`` simulated runs."""
    return 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def report(label: str, rate: float, runs: int) -> None:
    print(f"\n[compare-fail simulation] {label}: the gate failed in {rate:.3f} of {runs} runs")


# ============================================================================================== Tango's score test
def tango_by_likelihood(worse: int, better: int, n: int, drop: float) -> float:
    """The same test computed independently: the constrained maximum-likelihood estimate of P(better) found by a
    fine grid search of the multinomial log-likelihood under P(worse) = P(better) + drop, then the score Z."""
    same = n - worse - better
    grid = np.linspace(1e-9, (1 - drop) / 2 - 1e-9, 200_001)
    loglik = better * np.log(grid) + (worse * np.log(grid + drop) if worse else 0) \
        + (same * np.log(1 - 2 * grid - drop) if same else 0)
    x = grid[int(np.argmax(loglik))]
    z = (worse - better - n * drop) / math.sqrt(n * (2 * x + drop * (1 - drop)))
    return 1 - statistics.NormalDist().cdf(z)


@pytest.mark.parametrize("worse, better, n, drop", [
    (30, 0, 100, 0.05), (6, 4, 10, 0.05), (45, 20, 500, 0.05), (60, 10, 500, 0.1), (3, 9, 40, 0.02),
    (120, 80, 400, 0.01),
])
def test_tango_score_test_equals_the_likelihood_computed_independently(worse, better, n, drop):
    assert stats.paired_binary_margin_p(worse, better, n, drop) == pytest.approx(
        tango_by_likelihood(worse, better, n, drop), abs=2e-4)


def test_tango_by_hand_and_its_limits():
    # b = 6, c = 4, n = 10, D = 0.05: 20·x² − 9.1·x − 0.19 = 0 → x = (9.1 + 9.9) / 40 = 0.475
    z = (6 - 4 - 0.5) / math.sqrt(10 * (2 * 0.475 + 0.05 * 0.95))
    assert stats.paired_binary_margin_p(6, 4, 10, 0.05) == pytest.approx(1 - statistics.NormalDist().cdf(z))
    # D = 0: the one-sided McNemar score test (b − c) / √(b + c)
    assert stats.paired_binary_margin_p(30, 10, 100, 0.0) == pytest.approx(
        1 - statistics.NormalDist().cdf(20 / math.sqrt(40)))
    assert stats.paired_binary_margin_p(0, 0, 50, 0.0) == 1.0  # nothing changed: no evidence
    assert stats.paired_binary_margin_p(50, 0, 50, 1.0) == 1.0  # a drop beyond 1 is impossible
    assert stats.paired_binary_margin_p(0, 0, 0, 0.05) == 1.0
    # a drop at the point estimate exactly equal to the margin: Z = 0, p = 1/2
    assert stats.paired_binary_margin_p(15, 10, 100, 0.05) == pytest.approx(0.5)
    # the larger the allowed drop, the weaker the evidence against it
    ps = [stats.paired_binary_margin_p(40, 10, 200, d) for d in (0.0, 0.05, 0.1, 0.15, 0.2)]
    assert ps == sorted(ps) and ps[0] < 1e-4 < ps[-1]
    with pytest.raises(ValueError, match="do not fit"):
        stats.paired_binary_margin_p(8, 5, 10, 0.05)
    with pytest.raises(ValueError, match=">= 0"):
        stats.paired_binary_margin_p(1, 1, 10, -0.1)


def test_bootstrap_margin_p_by_hand():
    boot = [-0.10, -0.08, -0.06, -0.04, -0.02]  # observed −0.06; shifted to the margin −0.05: δ* − δ ≤ δ + D
    # δ* + 0.06 ≤ −0.01 ⟺ δ* ≤ −0.07: two of five
    assert stats.bootstrap_margin_p(boot, -0.06, 0.05) == pytest.approx(3 / 6)
    assert stats.bootstrap_margin_p(boot, -0.06, 0.0) == pytest.approx(1 / 6)  # δ* ≤ −0.12: none
    assert stats.bootstrap_margin_p(boot, -0.06, 0.1) == pytest.approx((1 + 5) / 6)  # δ* ≤ 0.04: all
    assert stats.bootstrap_margin_p([-0.3] * 99, -0.3, 0.05) == pytest.approx(1 / 100)  # no spread: certain
    assert stats.bootstrap_margin_p([0.02] * 99, 0.02, 0.01) == 1.0  # an improvement
    assert stats.bootstrap_margin_p(boot, -0.06, 1.0) == 1.0
    with pytest.raises(ValueError, match=">= 0"):
        stats.bootstrap_margin_p(boot, -0.06, -0.01)


def test_margin_p_picks_the_test_of_the_row():
    binary = stats.compare_benchmark({"": ([1] * 30 + [0] * 70, [0] * 30 + [0] * 70)}, key="b", resamples=500)
    p, test = stats.margin_p(binary, 0.05)
    assert test == "tango_score_margin" and p == stats.paired_binary_margin_p(30, 0, 100, 0.05)
    cont = stats.compare_benchmark({"": ([0.5] * 40, [0.5 - 0.01 * (i % 7) for i in range(40)])}, key="c",
                                   resamples=500)
    p, test = stats.margin_p(cont, 0.02)
    assert test == "paired_bootstrap_margin" and p == stats.bootstrap_margin_p(cont.boot, cont.delta, 0.02)
    cat = stats.combine([binary, cont])
    p, test = stats.margin_p(cat, 0.05)
    assert test == "stratified_paired_bootstrap_margin" and p == stats.bootstrap_margin_p(cat.boot, cat.delta, 0.05)
    assert stats.margin_p(stats.combine([binary]), 0.05)[1] == "tango_score_margin"  # one benchmark: its own test


# ============================================================================================== simulations
def binary_pairs(rng, n: int, drop: float, better: float = 0.05, both: float = 0.55):
    """n pairs of 0/1 scores: P(right → wrong) = better + drop, P(wrong → right) = better, so the true drop of the
    mean is exactly ``drop``."""
    counts = rng.multinomial(n, [both, better + drop, better, 1 - both - 2 * better - drop])
    base = [1] * counts[0] + [1] * counts[1] + [0] * counts[2] + [0] * counts[3]
    cur = [1] * counts[0] + [0] * counts[1] + [1] * counts[2] + [0] * counts[3]
    return base, cur


def level_pairs(rng, n: int, drop: float, spread: float = 0.12):
    """n pairs of jury-like scores (steps of 0.25): the current score is a step lower with probability
    spread + 2·drop, a step higher with probability spread − 2·drop: a true drop of exactly ``drop``."""
    steps = rng.choice([-0.25, 0.0, 0.25], size=n, p=[spread + 2 * drop, 1 - 2 * spread, spread - 2 * drop])
    return [0.5] * n, list(0.5 + steps)


def continuous_pairs(rng, n: int, drop: float, sd: float = 0.15):
    """n pairs of continuous scores (ROUGE-like): differences uniform with mean −drop and standard deviation sd."""
    half = sd * math.sqrt(3)
    diffs = rng.uniform(-drop - half, -drop + half, size=n)
    base = list(rng.uniform(0.4, 0.6, size=n))
    return base, [b + d for b, d in zip(base, diffs)]


def gate_fails(result: stats.PairedResult, drop: float) -> bool:
    return stats.margin_p(result, drop)[0] < ALPHA


def rejection_rate(make, drop_true: float, drop_gate: float, runs: int, n: int, seed: int,
                   resamples: int = 1000) -> float:
    rng = np.random.default_rng(seed)
    fails = 0
    for run in range(runs):
        base, cur = make(rng, n, drop_true)
        result = stats.compare_benchmark({"": (base, cur)}, key=f"sim{run}", resamples=resamples)
        fails += gate_fails(result, drop_gate)
    return fails / runs


@pytest.mark.parametrize("n", [100, 500])
def test_binary_gate_at_the_margin_fails_in_at_most_alpha_of_runs(n):
    runs, drop = 3000, 0.05
    rng = np.random.default_rng(1234 + n)
    fails = 0
    for _ in range(runs):
        base, cur = binary_pairs(rng, n, drop)
        worse = sum(1 for b, c in zip(base, cur) if b > c)
        better = sum(1 for b, c in zip(base, cur) if b < c)
        fails += stats.paired_binary_margin_p(worse, better, n, drop) < ALPHA
    rate = fails / runs
    report(f"0/1 scores, n={n}, true drop = DROP = {drop}", rate, runs)
    assert rate <= ALPHA + slack(runs)  # 0.05 + 0.012


def test_binary_gate_power_at_twice_the_margin():
    runs, n, drop = 3000, 500, 0.05
    rng = np.random.default_rng(77)
    fails = 0
    for _ in range(runs):
        base, cur = binary_pairs(rng, n, 2 * drop)
        worse = sum(1 for b, c in zip(base, cur) if b > c)
        better = sum(1 for b, c in zip(base, cur) if b < c)
        fails += stats.paired_binary_margin_p(worse, better, n, drop) < ALPHA
    rate = fails / runs
    report(f"0/1 scores, n={n}, true drop = 2 x DROP = {2 * drop}, DROP = {drop} (power)", rate, runs)
    assert rate > 0.6
    # and the old rule's failure: a true drop of 0.01 against a 0.05 gate essentially never fails now
    rng = np.random.default_rng(78)
    small = 0
    for _ in range(500):
        base, cur = binary_pairs(rng, n, 0.01)
        worse = sum(1 for b, c in zip(base, cur) if b > c)
        better = sum(1 for b, c in zip(base, cur) if b < c)
        small += stats.paired_binary_margin_p(worse, better, n, drop) < ALPHA
    assert small / 500 <= 0.01


def test_binary_gate_through_the_benchmark_result():
    """The whole path of a 0/1 benchmark (compare_benchmark → margin_p) at the margin and at 2 x DROP."""
    runs = 800
    size = rejection_rate(binary_pairs, 0.05, 0.05, runs, 500, seed=5, resamples=200)
    power = rejection_rate(binary_pairs, 0.10, 0.05, runs, 500, seed=6, resamples=200)
    report("0/1 benchmark rows, n=500, true drop = DROP = 0.05", size, runs)
    report("0/1 benchmark rows, n=500, true drop = 2 x DROP = 0.10 (power)", power, runs)
    assert size <= ALPHA + slack(runs)  # 0.05 + 0.023
    assert power > 0.6


def test_bootstrap_gate_on_jury_like_scores_at_the_margin_and_at_twice_it():
    runs, n, drop = 1000, 500, 0.02
    size = rejection_rate(level_pairs, drop, drop, runs, n, seed=11)
    power = rejection_rate(level_pairs, 2 * drop, drop, runs, n, seed=12)
    report(f"scores in steps of 0.25, n={n}, true drop = DROP = {drop}", size, runs)
    report(f"scores in steps of 0.25, n={n}, true drop = 2 x DROP = {2 * drop} (power)", power, runs)
    assert size <= ALPHA + slack(runs)  # 0.05 + 0.021
    assert power > 0.6


def test_bootstrap_gate_on_continuous_scores_at_the_margin_and_at_twice_it():
    runs, n, drop = 300, 500, 0.02
    size = rejection_rate(continuous_pairs, drop, drop, runs, n, seed=21, resamples=500)
    power = rejection_rate(continuous_pairs, 2 * drop, drop, runs, n, seed=22, resamples=500)
    report(f"continuous scores, n={n}, true drop = DROP = {drop}", size, runs)
    report(f"continuous scores, n={n}, true drop = 2 x DROP = {2 * drop} (power)", power, runs)
    assert size <= ALPHA + slack(runs)  # 0.05 + 0.038
    assert power > 0.6


def test_category_gate_stratified_at_the_margin_and_at_twice_it():
    """A category of a 0/1 benchmark and a jury-like one, each with true drop d: the category's drop is d."""
    runs, n, drop = 600, 250, 0.03
    rng = np.random.default_rng(31)

    def category(d: float, run: int) -> stats.PairedResult:
        a = stats.compare_benchmark({"": binary_pairs(rng, n, d)}, key=f"a{run}", resamples=1000)
        b = stats.compare_benchmark({"": level_pairs(rng, n, d)}, key=f"b{run}", resamples=1000)
        return stats.combine([a, b])

    size = sum(gate_fails(category(drop, r), drop) for r in range(runs)) / runs
    power = sum(gate_fails(category(2 * drop, r), drop) for r in range(runs)) / runs
    report(f"category of two benchmarks (0/1 and steps), 2 x {n} pairs, true drop = DROP = {drop}", size, runs)
    report(f"category of two benchmarks, 2 x {n} pairs, true drop = 2 x DROP = {2 * drop} (power)", power, runs)
    assert size <= ALPHA + slack(runs)  # 0.05 + 0.027
    assert power > 0.5


def test_holm_keeps_several_gates_at_the_margin_within_alpha_together():
    """Five independent benchmarks, each exactly at its margin: the run fails (any Holm-adjusted gate below
    alpha) in at most alpha of runs."""
    runs, n, drop, gates = 1000, 300, 0.05, 5
    rng = np.random.default_rng(41)
    fails = 0
    for _ in range(runs):
        ps = []
        for _ in range(gates):
            base, cur = binary_pairs(rng, n, drop)
            worse = sum(1 for b, c in zip(base, cur) if b > c)
            better = sum(1 for b, c in zip(base, cur) if b < c)
            ps.append(stats.paired_binary_margin_p(worse, better, n, drop))
        fails += min(stats.holm(ps)) < ALPHA
    rate = fails / runs
    report(f"{gates} gates at their margins, Holm-adjusted, run failed", rate, runs)
    assert rate <= ALPHA + slack(runs)


# ============================================================================================== several subsets
def test_a_benchmark_of_several_subsets_is_the_mean_of_subset_deltas():
    subsets = {"a": ([1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]),  # delta −0.25
               "b": ([0.5, 0.5], [0.75, 0.75])}  # delta +0.25
    result = stats.compare_benchmark(subsets, key="s", resamples=2000)
    assert result.n == 6 and result.test == "stratified_paired_bootstrap" and result.discordant is None
    assert result.baseline == pytest.approx((0.75 + 0.5) / 2) and result.current == pytest.approx((0.5 + 0.75) / 2)
    assert result.delta == pytest.approx(0.0)
    # subset b has no spread: the bootstrap is subset a's resampled mean difference (−1/4 per draw of the 1) / 2
    # + 0.125; its values are (−k/4)/2 + 0.125 for k of 4 draws hitting the changed pair
    values = set(np.round(result.boot, 9))
    assert values <= {round(0.125 - k / 8, 9) for k in range(5)}
    # the subsets are resampled independently, each within itself: the mean of the bootstrap is the delta
    assert float(np.mean(result.boot)) == pytest.approx(0.0, abs=0.01)
    # subset order in the input does not change anything
    again = stats.compare_benchmark(dict(reversed(list(subsets.items()))), key="s", resamples=2000)
    assert np.array_equal(again.boot, result.boot) and again.p == result.p
    # a subset with nothing matched is left out
    with_empty = stats.compare_benchmark({**subsets, "c": ([], [])}, key="s", resamples=2000)
    assert with_empty.delta == result.delta and with_empty.n == 6
    with pytest.raises(ValueError, match="2 baseline scores but 1 current"):
        stats.compare_benchmark({"x": ([1, 0], [1])}, key="bad")
    assert stats.compare_benchmark({"x": ([], [])}, key="none") is None


def test_two_subsets_of_0_1_scores_use_the_bootstrap_not_mcnemar():
    result = stats.compare_benchmark({"a": ([1, 1, 0], [0, 1, 0]), "b": ([1, 0], [1, 1])}, key="t", resamples=500)
    assert result.test == "stratified_paired_bootstrap" and result.discordant is None
    assert result.delta == pytest.approx((-1 / 3 + 1 / 2) / 2)
    assert stats.margin_p(result, 0.05)[1] == "stratified_paired_bootstrap_margin"


def test_combine_categories_into_overall_by_hand():
    r1 = stats.compare_benchmark({"": ([1.0] * 4, [0.0, 1.0, 1.0, 1.0])}, key="one", resamples=300)
    r2 = stats.compare_benchmark({"": ([0.2, 0.4], [0.4, 0.6])}, key="two", resamples=300)
    r3 = stats.compare_benchmark({"": ([0.5] * 3, [0.5] * 3)}, key="three", resamples=300)
    cat_a = stats.combine([r1, r2])
    overall = stats.combine([r1, r2, r3])
    assert cat_a.delta == pytest.approx((-0.25 + 0.2) / 2) and cat_a.n == 6 and cat_a.n_benchmarks == 2
    assert overall.delta == pytest.approx((-0.25 + 0.2 + 0.0) / 3) and overall.n == 9 and overall.n_benchmarks == 3
    assert overall.baseline == pytest.approx((1.0 + 0.3 + 0.5) / 3)
    assert overall.current == pytest.approx((0.75 + 0.5 + 0.5) / 3)
    # the stratified bootstrap: the average of the benchmarks' own bootstrap vectors, draw by draw
    assert np.allclose(overall.boot, (r1.boot + r2.boot + r3.boot) / 3)
    assert (overall.ci_low, overall.ci_high) == stats.percentile_ci(overall.boot)
    assert overall.p == stats.bootstrap_p(overall.boot, overall.delta)
    # SE of a mean of K independent means: sqrt(Σ SE_k²) / K
    assert overall.se == pytest.approx(math.sqrt(r1.se ** 2 + r2.se ** 2 + r3.se ** 2) / 3)
    assert overall.mde == pytest.approx(stats.z_sum() * overall.se)
    # one benchmark with no spread (n = 1) leaves the combined SE unknown, not zero
    tiny = stats.compare_benchmark({"": ([1.0], [0.0])}, key="tiny", resamples=300)
    assert stats.combine([r1, tiny]).se is None and stats.combine([r1, tiny]).mde is None
    assert stats.combine([]) is None and stats.combine([None]) is None
    assert stats.combine([r2]).delta == r2.delta and stats.combine([r2]) is not r2


def test_bootstrap_streams_depend_on_key_and_seed_only():
    data = [0.1, -0.2, 0.3, 0.0, -0.1, 0.25, 0.05, -0.3, 0.2, 0.15]
    a = stats.bootstrap_means(data, key="k", resamples=50)
    assert np.array_equal(a, stats.bootstrap_means(data, key="k", resamples=50))
    assert not np.array_equal(a, stats.bootstrap_means(data, key="other", resamples=50))
    assert not np.array_equal(a, stats.bootstrap_means(data, key="k", resamples=50, seed=1))
    assert a.size == 50 and set(np.round(a * 10, 9)) <= {round(v, 9) for v in np.arange(-3, 3.01, 0.01)}
    with pytest.raises(ValueError, match="nothing to resample"):
        stats.bootstrap_means([], key="k")


def test_percentile_ci_and_two_sided_p_by_hand():
    boot = list(np.linspace(-1, 1, 101))
    assert stats.percentile_ci(boot) == pytest.approx((-0.95, 0.95))
    assert stats.percentile_ci(boot, level=0.5) == pytest.approx((-0.5, 0.5))
    # observed 0.5: |δ* − 0.5| ≥ 0.5 ⟺ δ* ≤ 0 or δ* = 1: 51 + 1
    assert stats.bootstrap_p(boot, 0.5) == pytest.approx((1 + 52) / 102)
    assert stats.bootstrap_p([0.0] * 9, 0.0) == 1.0


def test_paired_se_by_hand():
    assert stats.paired_se([[1.0, 0.0, 0.0, -1.0]]) == pytest.approx(math.sqrt(2 / 3 / 4))
    assert stats.paired_se([[1.0, 0.0], [0.5, 0.5, 0.5]]) == pytest.approx(math.sqrt(0.5 / 2 + 0.0) / 2)
    assert stats.paired_se([]) is None and stats.paired_se([[1.0]]) is None
    assert stats.mde_from_se(None) is None and stats.mde_from_se(0.1) == pytest.approx(0.1 * stats.z_sum())
    assert stats.z_sum(0.05, 0.9) == pytest.approx(1.959964 + 1.281552, abs=1e-6)


def test_mcnemar_rejects_negative_counts_and_as_dict_names_the_discordant_pairs():
    with pytest.raises(ValueError, match="^discordant counts must be >= 0$"):
        stats.mcnemar_exact(-1, 3)
    result = stats.compare_benchmark({"": ([1, 1, 0, 0], [0, 1, 1, 1])}, key="d", resamples=100)
    data = result.as_dict()
    assert data["discordant"] == {"worse": 1, "better": 2} and data["test"] == "mcnemar_exact"
    assert set(data) == {"n", "baseline", "current", "delta", "ci_low", "ci_high", "p", "test", "mde",
                         "n_benchmarks", "discordant"}
    assert data["n"] == 4 and data["n_benchmarks"] == 1 and data["delta"] == pytest.approx(0.25)


# ======================================================================================== edges (mutation testing)
def test_margin_tests_at_their_limits():
    with pytest.raises(ValueError, match="do not fit"):
        stats.paired_binary_margin_p(-1, 3, 10, 0.05)
    with pytest.raises(ValueError, match="do not fit"):
        stats.paired_binary_margin_p(3, -1, 10, 0.05)
    # the smallest evidence: one pair changed for the worse out of two, drop 0: Z = 1 / √1
    assert stats.paired_binary_margin_p(1, 0, 2, 0.0) == pytest.approx(1 - statistics.NormalDist().cdf(1.0))
    # an allowed drop of 1 or more cannot be exceeded
    assert stats.paired_binary_margin_p(3, 1, 10, 1.5) == 1.0
    assert stats.bootstrap_margin_p([-1.0, -0.5], -1.0, 1.0) == 1.0  # shifted it would give 2/3
    assert stats.bootstrap_margin_p([-1.0, 1.0], -1.0, 1.5) == 1.0
    assert stats.bootstrap_margin_p([-1.0, -0.5], -1.0, 0.999) == pytest.approx(1 / 3)


def test_two_sided_bootstrap_p_on_an_asymmetric_distribution():
    # observed 0.3: |δ* − 0.3| ≥ 0.3 only for 0.9 (and 0.0 would be a tie, counted)
    assert stats.bootstrap_p([0.1, 0.2, 0.3, 0.9], 0.3) == pytest.approx(2 / 5)
    assert stats.bootstrap_p([0.0, 0.2, 0.3, 0.9], 0.3) == pytest.approx(3 / 5)


def _independent_stream(seed: int, key: str):
    import hashlib

    word = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng(np.random.SeedSequence([seed, word]))


def test_bootstrap_means_of_few_distinct_values_is_the_multinomial_draw():
    """Documented recipe, recomputed here: the stream seeded from [seed, first 8 bytes of sha256(key)], and for at
    most n / 8 distinct values one multinomial draw of the value counts per resample."""
    data = [0.0] * 10 + [1.0] * 6  # 2 distinct values, n = 16 = 2 · 8: the multinomial path
    rng = _independent_stream(3, "bench\x00sub")
    expected = rng.multinomial(16, np.array([10, 6]) / 16, size=40) @ np.array([0.0, 1.0]) / 16
    assert np.allclose(stats.bootstrap_means(data, key="bench\x00sub", resamples=40, seed=3), expected)


def test_bootstrap_means_of_many_distinct_values_draws_indices_in_chunks():
    data = [i / 5000 for i in range(5000)]  # 5,000 distinct values: 2,000,000 // 5,000 = 400 resamples a chunk
    rng = _independent_stream(0, "chunks")
    arr = np.asarray(data)
    expected = np.concatenate([arr[rng.integers(0, 5000, size=(take, 5000))].mean(axis=1) for take in (400, 400, 200)])
    got = stats.bootstrap_means(data, key="chunks", resamples=1000)
    assert got.shape == (1000,) and np.allclose(got, expected)
    # just above n / 8 distinct values: indices, not the multinomial
    few = [0.0, 1.0, 2.0] * 5 + [3.0, 4.0]  # 5 distinct values in 17 (5 · 8 > 17)
    rng = _independent_stream(0, "few")
    expected = np.asarray(few)[rng.integers(0, 17, size=(30, 17))].mean(axis=1)
    assert np.allclose(stats.bootstrap_means(few, key="few", resamples=30), expected)
    with pytest.raises(ValueError, match="^nothing to resample$"):
        stats.bootstrap_means([], key="k")


def test_compare_benchmark_passes_its_seed_alpha_and_power_on():
    base, cur = [0.5] * 30, [0.5 + (i % 5) / 10 - 0.2 for i in range(30)]
    default = stats.compare_benchmark({"": (base, cur)}, key="k", resamples=200)
    seeded = stats.compare_benchmark({"": (base, cur)}, key="k", resamples=200, seed=7)
    assert not np.array_equal(default.boot, seeded.boot) and default.boot.size == 200
    assert np.array_equal(seeded.boot, stats.bootstrap_means([c - b for b, c in zip(base, cur)], key="k\x00",
                                                             resamples=200, seed=7))
    strict = stats.compare_benchmark({"": (base, cur)}, key="k", resamples=200, alpha=0.01, power=0.9)
    assert strict.mde == pytest.approx(stats.z_sum(0.01, 0.9) * default.se)
    assert (default.ci_low, default.ci_high) == stats.percentile_ci(default.boot)
    assert default.p == stats.bootstrap_p(default.boot, default.delta)
    two = stats.combine([default, stats.compare_benchmark({"": (cur, base)}, key="j", resamples=200)],
                        alpha=0.01, power=0.9)
    assert two.mde == pytest.approx(stats.z_sum(0.01, 0.9) * two.se)
    # 0/1 baseline but a continuous current run: not McNemar
    mixed = stats.compare_benchmark({"": ([1.0, 0.0, 1.0], [0.5, 0.5, 1.0])}, key="m", resamples=50)
    assert mixed.test == "paired_bootstrap" and mixed.discordant is None


# ================================================== McNemar, Holm, the MDE and the bootstrap, by hand and independently
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
