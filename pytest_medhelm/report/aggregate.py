"""From per-instance records to MedHELM's tables (docs/contract.md, "Scores and aggregation").

* benchmark × model: mean of the normalized scores of scored instances, a 95% bootstrap CI, the raw mean. A
  benchmark HELM runs as several runs (MedDialog's subsets, CLEAR's conditions) is the unweighted mean of the
  subset means, as HELM's leaderboard cell.
* category × model: unweighted mean of its benchmarks' scores; overall: unweighted mean over benchmarks (the
  paper's macro-average, ``macro_avg``) with its *population* standard deviation (``macro_sd``, ddof 0).
* win rate: HELM's ``compute_aggregate_row_win_rates`` over the benchmark columns; ``win_sd`` the
  population standard deviation (ddof 0) of the per-column win rates. (docs/results.md describes every field.)
* instances a metric cannot score (``not_scored``) count neither for nor against: ``n_not_scored``, not ``n``.

Everything here is a pure function of the records, so a run with xdist, a run without it, and shards merged later
give the same numbers: records are sorted before any resampling, and the bootstrap has a fixed seed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


@dataclass
class BenchmarkResult:
    slug: str
    model: str
    category: str
    subcategory: str
    metric: str
    n: int = 0  # scored instances
    n_missing: int = 0  # instances without a score (model or data errors)
    n_not_scored: int = 0  # instances the metric cannot score (``not_scored``: counted neither for nor against)
    n_errors: int = 0
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    raw_mean: float | None = None
    subsets: dict[str, float] = field(default_factory=dict)
    #: HealthBench's reference statistic: the bootstrap standard deviation of the clipped mean (None elsewhere)
    bootstrap_std: float | None = None


def bootstrap_ci(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap of the mean. One value (or none) has no spread: the interval is the value itself."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size <= 1:
        value = float(data[0]) if data.size else math.nan
        return value, value
    rng = np.random.default_rng(seed)
    # one index array of resamples x n (128 MB at most, n <= 16,000: every MedHELM benchmark); beyond that in
    # blocks, so that 100,000 instances do not take 800 MB
    block = resamples if data.size * resamples <= 16_000_000 else max(1, 16_000_000 // data.size)
    means = np.concatenate([data[rng.integers(0, data.size, size=(min(block, resamples - done), data.size))]
                            .mean(axis=1) for done in range(0, resamples, block)])
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    """The population standard deviation (ddof 0): the spread of these values themselves (macro_sd, win_sd)."""
    if not values:
        return None
    mu = sum(values) / len(values)
    return math.sqrt(sum((v - mu) ** 2 for v in values) / len(values))


def benchmark_results(records: Iterable[Mapping[str, Any]], catalogue: Mapping[str, Any]) -> list[BenchmarkResult]:
    """``catalogue`` maps slug → an object with category, subcategory and metric.name (a Benchmark)."""
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        grouped[(rec["benchmark"], rec["model"])].append(rec)
    results = []
    for (slug, model), recs in sorted(grouped.items()):
        bench = catalogue.get(slug)
        result = BenchmarkResult(slug=slug, model=model,
                                 category=getattr(bench, "category", "") if bench else "",
                                 subcategory=getattr(bench, "subcategory", "") if bench else "",
                                 metric=bench.metric.name if bench else "")
        recs = sorted(recs, key=lambda r: (r.get("subset") or "", str(r["instance_id"])))
        scored = [r for r in recs if r.get("score") is not None]
        result.n = len(scored)
        result.n_errors = sum(1 for r in recs if r.get("error"))
        result.n_not_scored = sum(1 for r in recs if r.get("not_scored") and r.get("score") is None)
        result.n_missing = len(recs) - len(scored) - result.n_not_scored
        if scored:
            by_subset: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
            for r in scored:
                by_subset[r.get("subset") or ""].append(r)
            subset_means = {s: _mean(r["score"] for r in rs) for s, rs in by_subset.items()}
            result.mean = _mean(subset_means.values())
            result.raw_mean = _mean(_mean(r.get("raw_score", r["score"]) for r in rs) for rs in by_subset.values())
            if any((r.get("metrics") or {}).get("aggregate") == "clipped_mean" for r in scored):
                _clipped(result, [r["score"] for r in scored])
            elif len(by_subset) > 1:
                result.subsets = {s: v for s, v in sorted(subset_means.items())}  # type: ignore[misc]
                # the CI of a mean of subset means: resample within each subset, average the subset means
                result.ci_low, result.ci_high = _stratified_ci([[r["score"] for r in rs] for rs in by_subset.values()])
            else:
                result.ci_low, result.ci_high = bootstrap_ci([r["score"] for r in scored])
        results.append(result)
    return results


def _clipped(result: BenchmarkResult, values: list[float]) -> None:
    """HealthBench's reference aggregation: the instance scores are raw (they can be negative); the benchmark's score
    is their mean clipped to [0, 1], with the bootstrap standard deviation of the clipped mean and a percentile
    interval of the clipped resampled means; ``raw_mean`` keeps the unclipped mean."""
    import numpy as np

    from pytest_medhelm.jury.rubric_scoring import clipped_bootstrap_std, clipped_mean

    result.raw_mean = sum(values) / len(values)
    result.mean = clipped_mean(values)
    result.bootstrap_std = clipped_bootstrap_std(values, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
    low, high = bootstrap_ci(values)
    result.ci_low, result.ci_high = float(np.clip(low, 0.0, 1.0)), float(np.clip(high, 0.0, 1.0))


def _stratified_ci(groups: list[list[float]]) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = np.zeros(BOOTSTRAP_RESAMPLES)
    for values in groups:
        data = np.asarray(values, dtype=float)
        means += data[rng.integers(0, data.size, size=(BOOTSTRAP_RESAMPLES, data.size))].mean(axis=1)
    means /= len(groups)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def category_scores(results: Sequence[BenchmarkResult]) -> list[dict[str, Any]]:
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        if r.mean is not None:
            grouped[(r.category, r.model)].append(r.mean)
    return [{"category": cat, "model": model, "score": _mean(vals), "n_benchmarks": len(vals)}
            for (cat, model), vals in sorted(grouped.items())]


def win_rates(table: Mapping[str, Mapping[str, float | None]],
              lower_is_better: bool = False) -> dict[str, tuple[float | None, float | None]]:
    """HELM's mean win rate. ``table[model][column]`` → value (None or absent = no value).

    Per column with at least two values: wins(v) = (#values strictly worse) + (#ties − 1)/2, divided by
    (#values − 1). A model's win rate is the mean over the columns where it has a value; Win SD the (population)
    standard deviation of those per-column win rates. Returns model → (win rate, win SD).
    """
    columns = sorted({c for row in table.values() for c in row})
    per_model: dict[str, list[float]] = {m: [] for m in table}
    for column in columns:
        values = {m: row[column] for m, row in table.items() if row.get(column) is not None}
        if len(values) < 2:
            continue
        all_values = list(values.values())
        for model, v in values.items():
            if lower_is_better:
                worse = sum(1 for o in all_values if o > v)
            else:
                worse = sum(1 for o in all_values if o < v)
            ties = sum(1 for o in all_values if o == v)  # includes v itself
            per_model[model].append((worse + (ties - 1) / 2) / (len(all_values) - 1))
    return {m: (_mean(vals), _std(vals)) for m, vals in per_model.items()}


def model_summaries(results: Sequence[BenchmarkResult], records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    by_model: dict[str, dict[str, float | None]] = defaultdict(dict)
    for r in results:
        by_model[r.model][r.slug] = r.mean
    rates = win_rates(by_model) if len(by_model) >= 2 else {m: (None, None) for m in by_model}
    totals: dict[str, dict[str, Any]] = defaultdict(lambda: {"tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                                                             "cost_known": True, "jury_cost_known": True, "jury_tokens_in": 0,
                                                             "jury_tokens_out": 0, "jury_cost_usd": 0.0})
    for rec in records:
        t = totals[rec["model"]]
        t["tokens_in"] += int(rec.get("tokens_in") or 0)
        t["tokens_out"] += int(rec.get("tokens_out") or 0)
        if rec.get("cost_usd") is None:
            if not rec.get("error"):
                t["cost_known"] = False
        else:
            t["cost_usd"] += float(rec["cost_usd"])
        t["jury_tokens_in"] += int(rec.get("jury_tokens_in") or 0)
        t["jury_tokens_out"] += int(rec.get("jury_tokens_out") or 0)
        if rec.get("jury_cost_usd") is None:
            if rec.get("jury_tokens_in") and not rec.get("error"):
                t["jury_cost_known"] = False  # judges were called at a price nobody knows
        else:
            t["jury_cost_usd"] += float(rec["jury_cost_usd"])
    summaries = []
    for model in sorted(by_model):
        means = [v for v in by_model[model].values() if v is not None]
        t = totals[model]
        win, win_sd = rates.get(model, (None, None))
        summaries.append({
            "model": model, "macro_avg": _mean(means), "macro_sd": _std(means), "win_rate": win, "win_sd": win_sd,
            "tokens_in": t["tokens_in"], "tokens_out": t["tokens_out"],
            # an unknown price is reported as unknown (null), never as 0
            "cost_usd": t["cost_usd"] if t["cost_known"] else None,
            "jury_tokens_in": t["jury_tokens_in"], "jury_tokens_out": t["jury_tokens_out"],
            "jury_cost_usd": t["jury_cost_usd"] if t["jury_cost_known"] else None,
        })
    return summaries
