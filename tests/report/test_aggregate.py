"""report/aggregate.py against hand-made tables: HELM's win rate (ties, missing cells, three and more models,
lower_is_better), the bootstrap CIs (known values, the stratified CI of a benchmark of several subsets), the
macro-average and its SD, the win SD, categories, and the token and cost totals.

Both standard deviations are *population* SDs (divide by the number of values, ddof 0): ``macro_sd`` over a
model's benchmark scores, ``win_sd`` over its per-column win rates (docs/results.md).
"""

from __future__ import annotations

import math
import statistics
from types import SimpleNamespace

import pytest

from pytest_medhelm.report import aggregate
from pytest_medhelm.report.aggregate import benchmark_results, bootstrap_ci, category_scores, model_summaries, win_rates

np = pytest.importorskip("numpy")


# ============================================================================================== win rate
def test_win_rate_three_models_with_a_tie_and_missing_cells():
    table = {
        "A": {"x": 0.9, "y": 0.1, "z": 0.7},
        "B": {"x": 0.5, "y": 0.3},
        "C": {"x": 0.5, "y": None, "z": None},
    }
    rates = win_rates(table)
    # x: A beats 2 of 2 → 1; B and C tie: (0 worse + (2 − 1)/2) / 2 = 0.25 each
    # y: A 0.1 < B 0.3 (C has no value): A 0, B 1;  z: only A has a value → not a column
    assert rates["A"] == pytest.approx((0.5, 0.5))  # mean(1, 0), population SD 0.5
    assert rates["B"] == pytest.approx((0.625, 0.375))  # mean(0.25, 1), population SD 0.375
    assert rates["C"] == pytest.approx((0.25, 0.0))  # one column
    assert set(rates) == {"A", "B", "C"}


def test_win_rate_lower_is_better():
    table = {"A": {"x": 0.9, "y": 0.1}, "B": {"x": 0.5, "y": 0.3}, "C": {"x": 0.5}}
    rates = win_rates(table, lower_is_better=True)
    # x: A is beaten by both → 0; B, C: 1 worse (A) + tie (1)/2 → 1.5 / 2 = 0.75;  y: A 1, B 0
    assert rates["A"] == pytest.approx((0.5, 0.5))
    assert rates["B"] == pytest.approx((0.375, 0.375))
    assert rates["C"] == pytest.approx((0.75, 0.0))


def test_win_rate_four_models_known_values_and_a_model_without_any_column():
    table = {
        "m1": {"a": 0.8, "b": 0.6, "c": 0.2},
        "m2": {"a": 0.7, "b": 0.6, "c": 0.4},
        "m3": {"a": 0.7, "b": 0.9},
        "m4": {"a": 0.1, "b": 0.6, "c": 0.4},
        "m5": {"d": 1.0},  # alone in its column: no win rate at all
    }
    rates = win_rates(table)
    # a: m1 3/3; m2, m3 tie: (1 + 1/2)/3 = 0.5; m4 0
    # b: m3 3/3; m1, m2, m4 tie three ways: (0 + 2/2)/3 = 1/3
    # c: m1 0; m2, m4 tie: (1 + 1/2)/2 = 0.75
    expected = {"m1": [1, 1 / 3, 0], "m2": [0.5, 1 / 3, 0.75], "m3": [0.5, 1], "m4": [0, 1 / 3, 0.75]}
    for model, values in expected.items():
        assert rates[model] == pytest.approx((statistics.fmean(values), statistics.pstdev(values))), model
    assert rates["m5"] == (None, None)


def test_win_rate_everyone_tied_is_one_half_and_two_models_are_zero_or_one():
    rates = win_rates({m: {"x": 0.5, "y": 0.25} for m in "ABCD"})
    assert all(v == pytest.approx((0.5, 0.0)) for v in rates.values())
    assert win_rates({"A": {"x": 1.0}, "B": {"x": 0.0}}) == {"A": (1.0, 0.0), "B": (0.0, 0.0)}
    assert win_rates({}) == {}


# ============================================================================================== bootstrap CIs
def test_bootstrap_ci_of_one_value_or_none_and_of_constants():
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    low, high = bootstrap_ci([])
    assert math.isnan(low) and math.isnan(high)
    assert bootstrap_ci([0.25] * 30) == pytest.approx((0.25, 0.25))


def test_bootstrap_ci_known_values():
    # the same draws computed here from the documented recipe: default_rng(0), indices of 1000 × n, 2.5/97.5 %
    values = [0.0, 1.0, 1.0, 0.5, 0.25]
    rng = np.random.default_rng(0)
    means = np.asarray(values)[rng.integers(0, 5, size=(1000, 5))].mean(axis=1)
    assert bootstrap_ci(values) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    # and the normal approximation on a large sample: 400 values, half 1: mean 0.5, SE 0.025
    low, high = bootstrap_ci([1.0, 0.0] * 200)
    assert low == pytest.approx(0.5 - 1.96 * 0.025, abs=0.01) and high == pytest.approx(0.5 + 1.96 * 0.025, abs=0.01)
    assert high - low == pytest.approx(2 * 1.96 * 0.025, rel=0.12)
    # the level: a 50% interval is inside the 95% one
    mid = bootstrap_ci([1.0, 0.0] * 200, level=0.5)
    assert low < mid[0] < 0.5 < mid[1] < high
    # other resample counts and seeds give other draws
    assert bootstrap_ci(values, seed=1) != bootstrap_ci(values)
    assert bootstrap_ci(values, resamples=2000) != bootstrap_ci(values)


def test_bootstrap_ci_in_blocks_for_large_benchmarks_equals_one_draw():
    data = [float(i % 3) / 2 for i in range(20_000)]  # 20,000 × 1000 draws: above the block limit
    rng = np.random.default_rng(0)
    arr = np.asarray(data)
    means = np.concatenate([arr[rng.integers(0, arr.size, size=(min(800, 1000 - done), arr.size))].mean(axis=1)
                            for done in range(0, 1000, 800)])
    assert bootstrap_ci(data) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))


def test_stratified_ci_resamples_each_subset_within_itself():
    groups = [[0.0, 1.0, 1.0], [0.2, 0.4, 0.6, 0.8]]
    rng = np.random.default_rng(0)
    total = np.zeros(1000)
    for values in groups:
        arr = np.asarray(values)
        total += arr[rng.integers(0, arr.size, size=(1000, arr.size))].mean(axis=1)
    expected = tuple(np.quantile(total / 2, [0.025, 0.975]))
    assert aggregate._stratified_ci(groups) == pytest.approx(expected)
    # a subset without spread shifts the interval by its mean / K
    low, high = aggregate._stratified_ci([[0.0, 1.0] * 50, [0.6] * 10])
    low1, high1 = bootstrap_ci([0.0, 1.0] * 50)
    assert (low, high) != (low1, high1)
    assert 0.3 + 0.5 / 2 - 0.1 < low < 0.55 < high < 0.3 + 0.5 / 2 + 0.1


# ============================================================================================== benchmark rows
CATALOGUE = {
    "b1": SimpleNamespace(category="medical_research", subcategory="s1", metric=SimpleNamespace(name="exact_match")),
    "b2": SimpleNamespace(category="medical_research", subcategory="s2", metric=SimpleNamespace(name="rouge_l")),
    "b3": SimpleNamespace(category="patient_communication", subcategory="s3", metric=SimpleNamespace(name="jury")),
}


def _plain(rows, without=()):
    """Typed rows as the results JSON holds them (``without``: fields the results fill in later)."""
    return [row.model_dump(exclude_unset=True, exclude=set(without)) for row in rows]


def rec(bench, model, iid, score, subset="", **extra):
    return {"benchmark": bench, "model": model, "instance_id": iid, "score": score, "subset": subset, **extra}


def test_benchmark_results_counts_means_and_subsets():
    records = [
        rec("b1", "m", "1", 1.0), rec("b1", "m", "2", 0.0), rec("b1", "m", "3", 1.0),
        rec("b1", "m", "4", None, error="ModelError: down"), rec("b1", "m", "5", None),
        rec("b1", "m", "6", None, not_scored="the gold query returns no rows"),
        # b2: two subsets of unequal size: the unweighted mean of the subset means, not the pooled mean
        rec("b2", "m", "1", 1.0, subset="a", raw_score=5.0), rec("b2", "m", "2", 0.0, subset="a", raw_score=1.0),
        rec("b2", "m", "3", 1.0, subset="a", raw_score=5.0), rec("b2", "m", "1", 0.0, subset="b", raw_score=1.0),
        rec("b3", "m", "1", None, error="DataError: bad row"),
        rec("zz", "m", "1", 0.5),  # not in the catalogue
    ]
    rows = {r.slug: r for r in benchmark_results(records, CATALOGUE)}
    b1 = rows["b1"]
    assert (b1.n, b1.n_errors, b1.n_missing, b1.n_not_scored) == (3, 1, 2, 1)
    assert b1.mean == pytest.approx(2 / 3) and b1.raw_mean == pytest.approx(2 / 3) and b1.subsets == {}
    assert (b1.category, b1.subcategory, b1.metric) == ("medical_research", "s1", "exact_match")
    assert (b1.ci_low, b1.ci_high) == bootstrap_ci([1.0, 0.0, 1.0])  # sorted by instance id: 1, 2, 3
    b2 = rows["b2"]
    assert b2.n == 4 and b2.mean == pytest.approx((2 / 3 + 0.0) / 2)  # pooled would be 0.5
    assert b2.subsets == pytest.approx({"a": 2 / 3, "b": 0.0}) and list(b2.subsets) == ["a", "b"]
    assert b2.raw_mean == pytest.approx((11 / 3 + 1.0) / 2)
    assert (b2.ci_low, b2.ci_high) == pytest.approx(aggregate._stratified_ci([[1.0, 0.0, 1.0], [0.0]]))
    b3 = rows["b3"]
    assert (b3.n, b3.n_errors, b3.n_missing, b3.mean, b3.ci_low) == (0, 1, 1, None, None)
    assert (rows["zz"].category, rows["zz"].metric, rows["zz"].mean) == ("", "", 0.5)


def test_benchmark_results_do_not_depend_on_record_order():
    records = [rec("b1", "m", str(i), float(i % 2)) for i in range(12)]
    a = benchmark_results(records, CATALOGUE)
    b = benchmark_results(list(reversed(records)), CATALOGUE)
    assert a == b


def test_category_scores_are_unweighted_means_of_benchmark_scores():
    records = [rec("b1", "m", "1", 1.0), rec("b1", "m", "2", 1.0), rec("b1", "m", "3", 1.0),
               rec("b2", "m", "1", 0.0), rec("b3", "m", "1", 0.5), rec("b3", "m", "2", None, error="x"),
               rec("b1", "n", "1", 0.0), rec("b3", "n", "1", None, error="x")]
    cats = _plain(category_scores(benchmark_results(records, CATALOGUE)), without=["category_slug"])
    assert cats == [
        {"category": "medical_research", "model": "m", "score": 0.5, "n_benchmarks": 2},  # (1 + 0)/2, not 3/4
        {"category": "medical_research", "model": "n", "score": 0.0, "n_benchmarks": 1},
        {"category": "patient_communication", "model": "m", "score": 0.5, "n_benchmarks": 1},
    ]  # n has no score on b3: no row


# ============================================================================================== model summaries
def test_model_summaries_macro_sd_win_sd_and_totals():
    records = [
        rec("b1", "A", "1", 1.0, tokens_in=10, tokens_out=2, cost_usd=0.5),
        rec("b2", "A", "1", 0.5, tokens_in=20, tokens_out=3, cost_usd=0.25, jury_tokens_in=100,
            jury_tokens_out=7, jury_cost_usd=0.125),
        rec("b3", "A", "1", 0.0, tokens_in=5, tokens_out=None, cost_usd=None, error="ModelError: down"),
        rec("b1", "B", "1", 0.0, tokens_in=1, tokens_out=1, cost_usd=None),  # no price: B's cost is unknown
        rec("b2", "B", "1", 0.5, tokens_in=2, tokens_out=2, cost_usd=0.0, jury_tokens_in=3, jury_cost_usd=None),
    ]
    results = benchmark_results(records, CATALOGUE)
    summaries = {s["model"]: s for s in _plain(model_summaries(results, records))}
    a, b = summaries["A"], summaries["B"]
    # A's benchmark means 1, 0.5, 0 → macro 0.5, population SD sqrt(((0.5)² + 0 + (0.5)²) / 3)
    assert a["macro_avg"] == pytest.approx(0.5) and a["macro_sd"] == pytest.approx(math.sqrt(0.5 / 3))
    assert a["macro_sd"] == pytest.approx(statistics.pstdev([1.0, 0.5, 0.0]))
    # win rates: b1 A 1 > B 0 → A 1; b2 tie → 0.5 each; b3 A alone
    assert (a["win_rate"], a["win_sd"]) == pytest.approx((0.75, 0.25))
    assert (b["win_rate"], b["win_sd"]) == pytest.approx((0.25, 0.25))
    assert (a["tokens_in"], a["tokens_out"], a["cost_usd"]) == (35, 5, pytest.approx(0.75))
    assert (a["jury_tokens_in"], a["jury_tokens_out"], a["jury_cost_usd"]) == (100, 7, pytest.approx(0.125))
    # an errored item without a price does not make the cost unknown; a priceless answer does
    assert (b["tokens_in"], b["tokens_out"], b["cost_usd"]) == (3, 3, None)
    assert b["jury_tokens_in"] == 3 and b["jury_cost_usd"] is None  # judges were paid at an unknown price
    assert b["macro_avg"] == pytest.approx(0.25) and b["macro_sd"] == pytest.approx(0.25)
    assert [s["model"] for s in _plain(model_summaries(results, records))] == ["A", "B"]


def test_a_single_model_has_no_win_rate_and_a_known_zero_cost():
    records = [rec("b1", "solo", "1", 0.25, tokens_in=4, tokens_out=1, cost_usd=0.0),
               rec("b2", "solo", "1", None, error="ModelError: x")]
    results = benchmark_results(records, CATALOGUE)
    [s] = _plain(model_summaries(results, records))
    assert (s["win_rate"], s["win_sd"]) == (None, None)
    assert s["macro_avg"] == 0.25 and s["macro_sd"] == 0.0  # b2 has no score: left out of the macro-average
    assert (s["cost_usd"], s["jury_cost_usd"], s["jury_tokens_in"]) == (0.0, 0.0, 0)
    assert (s["reasoning_tokens"], s["n_answers"], s["n_ran_out"]) == (None, 1, 0)  # no server said; b2 errored
    assert set(s) == {"model", "macro_avg", "macro_sd", "win_rate", "win_sd", "tokens_in", "tokens_out",
                      "reasoning_tokens", "n_answers", "n_ran_out", "cost_usd", "jury_tokens_in", "jury_tokens_out",
                      "jury_cost_usd"}


def test_a_model_without_any_score_has_no_macro_average():
    records = [rec("b1", "down", "1", None, error="ModelError: x"), rec("b1", "up", "1", 1.0)]
    summaries = {s["model"]: s for s in _plain(model_summaries(benchmark_results(records, CATALOGUE), records))}
    assert (summaries["down"]["macro_avg"], summaries["down"]["macro_sd"]) == (None, None)
    assert summaries["up"]["win_rate"] is None  # the only column has one value


# ======================================================================================== edges (mutation testing)
def test_two_values_are_bootstrapped_and_a_column_with_one_value_does_not_stop_the_others():
    low, high = bootstrap_ci([0.0, 1.0])
    assert (low, high) == (0.0, 1.0)  # resamples of two 0/1 values: means 0, 0.5 and 1
    assert win_rates({"A": {"a": 1.0, "b": 0.5}, "B": {"b": 0.2}}) == {"A": (1.0, 0.0), "B": (0.0, 0.0)}


def test_subsets_are_taken_in_order_of_name_then_instance_id_whatever_the_record_order():
    records = [rec("b2", "m", "1", 0.0, subset="b"), rec("b2", "m", "3", 1.0, subset="b"),
               rec("b2", "m", "2", 1.0, subset="a"), rec("b2", "m", "4", 0.25, subset="a"),
               rec("b2", "m", "6", 0.5, subset="a"), rec("b2", "m", "5", 0.0, subset="")]
    [row] = benchmark_results(list(reversed(records)), CATALOGUE)
    assert list(row.subsets) == ["", "a", "b"]
    assert row.subsets == pytest.approx({"": 0.0, "a": 1.75 / 3, "b": 0.5})
    assert (row.ci_low, row.ci_high) == pytest.approx(aggregate._stratified_ci([[0.0], [1.0, 0.25, 0.5], [0.0, 1.0]]))
    one = [rec("b1", "m", str(i), v) for i, v in zip("31425", (0.0, 1.0, 1.0, 0.0, 0.5))]
    [row] = benchmark_results(one, CATALOGUE)
    assert (row.ci_low, row.ci_high) == bootstrap_ci([1.0, 1.0, 0.0, 0.0, 0.5])  # ids 1..5


def test_a_catalogue_entry_without_category_and_a_score_beside_not_scored():
    catalogue = {"b": SimpleNamespace(metric=SimpleNamespace(name="f1"))}
    records = [rec("b", "m", "1", 1.0, not_scored="inconsistent: a score wins"), rec("x", "m", "1", 0.5)]
    rows = {r.slug: r for r in benchmark_results(records, catalogue)}
    assert (rows["b"].category, rows["b"].subcategory, rows["b"].metric) == ("", "", "f1")
    assert (rows["b"].n, rows["b"].n_not_scored, rows["b"].n_missing) == (1, 0, 0)
    assert (rows["x"].category, rows["x"].subcategory, rows["x"].metric) == ("", "", "")


def test_totals_add_every_record():
    records = [
        rec("b1", "A", "1", 1.0, tokens_in=None, tokens_out=4, cost_usd=0.25, jury_tokens_in=5, jury_cost_usd=0.5),
        rec("b1", "A", "2", 1.0, tokens_in=7, jury_tokens_in=5, jury_cost_usd=0.25),
        rec("b2", "A", "1", None, error="ModelError: x", jury_tokens_in=9, jury_cost_usd=None, cost_usd=None),
    ]
    [s] = _plain(model_summaries(benchmark_results(records, CATALOGUE), records))
    assert (s["tokens_in"], s["tokens_out"]) == (7, 4)
    assert s["cost_usd"] is None  # record 2 was answered without a price
    assert (s["jury_tokens_in"], s["jury_cost_usd"]) == (19, pytest.approx(0.75))  # an errored item's judges: known


# ========================================================================================= reasoning models' counts
#: (the benchmarks of the reasoning records below; their records carry token counts and costs)
REASONING_CATALOGUE = {
    "b1": SimpleNamespace(category="medical_research", subcategory="s", metric=SimpleNamespace(name="em")),
    "b2": SimpleNamespace(category="medical_research", subcategory="s", metric=SimpleNamespace(name="em"))}
RAN_OUT = {"max_output_tokens": 101, "reasoning_budget": 100, "reasoning_tokens": 101}


def reasoning_rec(bench: str, model: str, iid: str, score: float | None, **extra):
    return {"benchmark": bench, "model": model, "instance_id": iid, "score": score, "tokens_in": 5,
            "tokens_out": 3, "cost_usd": 0.0, **extra}


def test_reasoning_tokens_are_summed_and_unknown_stays_null():
    records = [reasoning_rec("b1", "think", "1", 1.0, reasoning_tokens=40, tokens_out=41),
               reasoning_rec("b1", "think", "2", 0.0, reasoning_tokens=None),  # this server said nothing
               reasoning_rec("b2", "think", "1", 0.0, reasoning_tokens=7, ran_out=RAN_OUT, answer=""),
               reasoning_rec("b2", "think", "2", None, error="ModelError: down", reasoning_tokens=None),
               reasoning_rec("b1", "plain", "1", 1.0), reasoning_rec("b1", "plain", "2", 1.0, reasoning_tokens=None),
               reasoning_rec("b1", "zero", "1", 1.0, reasoning_tokens=0)]
    rows = benchmark_results(records, REASONING_CATALOGUE)
    summary = {s.model: s for s in model_summaries(rows, records)}
    think, plain, zero = summary["think"], summary["plain"], summary["zero"]
    assert (think.reasoning_tokens, think.n_answers, think.n_ran_out, think.tokens_out) == (47, 3, 1, 50)
    assert (plain.reasoning_tokens, plain.n_ran_out) == (None, 0)  # no server said: unknown, never 0
    assert zero.reasoning_tokens == 0  # a server that said 0 said it
    by = {(r.slug, r.model): r for r in rows}
    assert by[("b2", "think")].n_ran_out == 1 and by[("b2", "think")].n == 1  # a miss, scored as one
    assert "n_ran_out" in by[("b2", "think")].model_dump(exclude_unset=True)
    # where nothing ran out the row is written as a plain model's was
    assert all("n_ran_out" not in by[key].model_dump(exclude_unset=True)
               for key in (("b1", "think"), ("b1", "plain")))
