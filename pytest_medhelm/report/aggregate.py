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
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_medhelm.cost import add_costs
from pytest_medhelm.report.records import BenchmarkRow, CategoryRow, InstanceRecord, ModelRow

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.cost import Prices

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


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


def instance_records(records: Iterable[InstanceRecord | Mapping[str, Any]]) -> list[InstanceRecord]:
    """``records`` as typed records (a dict is read through :class:`InstanceRecord`)."""
    return [r if isinstance(r, InstanceRecord) else InstanceRecord.model_validate(r) for r in records]


def benchmark_results(records: Iterable[InstanceRecord | Mapping[str, Any]],
                      catalogue: Mapping[str, Any]) -> list[BenchmarkRow]:
    """``catalogue`` maps slug → an object with category, subcategory and metric.name (a Benchmark). The rows'
    ``category_slug``, ``n_planned`` and ``partial`` are the results' business (they know the plan)."""
    grouped: dict[tuple[str, str], list[InstanceRecord]] = defaultdict(list)
    for rec in instance_records(records):
        grouped[(rec.benchmark, rec.model)].append(rec)
    results = []
    for (slug, model), recs in sorted(grouped.items()):
        bench = catalogue.get(slug)
        recs = sorted(recs, key=lambda r: (r.subset or "", str(r.instance_id)))
        scored = [(r, r.score) for r in recs if r.score is not None]
        n_not_scored = sum(1 for r in recs if r.not_scored and r.score is None)
        result = BenchmarkRow(slug=slug, model=model, category=getattr(bench, "category", "") if bench else "",
                              subcategory=getattr(bench, "subcategory", "") if bench else "",
                              metric=bench.metric.name if bench else "", n=len(scored),
                              n_missing=len(recs) - len(scored) - n_not_scored, n_not_scored=n_not_scored,
                              n_errors=sum(1 for r in recs if r.error), mean=None, ci_low=None, ci_high=None,
                              raw_mean=None)
        ran_out = sum(1 for r in recs if r.ran_out)
        if ran_out:  # (written only where answers ran out: a plain model's rows are as they were)
            result.n_ran_out = ran_out
        if scored:
            by_subset: dict[str, list[tuple[InstanceRecord, float]]] = defaultdict(list)
            for r, score in scored:
                by_subset[r.subset or ""].append((r, score))
            subset_means = {s: _mean(score for _r, score in rs) for s, rs in by_subset.items()}
            result.mean = _mean(m for m in subset_means.values() if m is not None)
            result.raw_mean = _mean(_raw_means(by_subset.values()))
            if any((r.metrics or {}).get("aggregate") == "clipped_mean" for r, _score in scored):
                _clipped(result, [score for _r, score in scored])
            elif len(by_subset) > 1:
                result.subsets = {s: v for s, v in sorted(subset_means.items()) if v is not None}
                # the CI of a mean of subset means: resample within each subset, average the subset means
                result.ci_low, result.ci_high = _stratified_ci([[score for _r, score in rs]
                                                                for rs in by_subset.values()])
            else:
                result.ci_low, result.ci_high = bootstrap_ci([score for _r, score in scored])
        results.append(result)
    return results


def _raw_means(groups: Iterable[list[tuple[InstanceRecord, float]]]) -> list[float]:
    """Each subset's mean raw score (a record without one counts its score)."""
    means = []
    for rs in groups:
        mean = _mean(r.raw_score if r.raw_score is not None else score for r, score in rs)
        if mean is not None:
            means.append(mean)
    return means


def _clipped(result: BenchmarkRow, values: list[float]) -> None:
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


def category_scores(results: Sequence[BenchmarkRow]) -> list[CategoryRow]:
    """Per category × model: the unweighted mean of its benchmarks' scores (``category`` the category's slug)."""
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        if r.mean is not None:
            grouped[(r.category, r.model)].append(r.mean)
    return [CategoryRow(category=cat, model=model, score=_mean(vals), n_benchmarks=len(vals))
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
        values = {m: value for m, row in table.items() if (value := row.get(column)) is not None}
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


class _Totals:
    """A model's accounting over its records."""

    def __init__(self) -> None:
        self.tokens_in = self.tokens_out = self.jury_tokens_in = self.jury_tokens_out = 0
        #: the answers' costs (None: an answer came at an unknown price; an errored item's unknown cost is left out)
        self.costs: list[float | None] = []
        self.reasoning_tokens: int | None = None  # None while no server said
        self.n_answers = self.n_ran_out = 0
        self.jury_costs: list[float | None] = []  # likewise, of the items whose judges were called

    def add(self, rec: InstanceRecord) -> None:
        self.tokens_in += int(rec.tokens_in or 0)
        self.tokens_out += int(rec.tokens_out or 0)
        if rec.reasoning_tokens is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + int(rec.reasoning_tokens)
        self.n_answers += not rec.error
        self.n_ran_out += bool(rec.ran_out)
        if rec.cost_usd is not None or not rec.error:
            self.costs.append(rec.cost_usd)
        self.jury_tokens_in += int(rec.jury_tokens_in or 0)
        self.jury_tokens_out += int(rec.jury_tokens_out or 0)
        if rec.jury_cost_usd is not None or (rec.jury_tokens_in and not rec.error):
            self.jury_costs.append(rec.jury_cost_usd)


def model_summaries(results: Sequence[BenchmarkRow], records: Iterable[InstanceRecord | Mapping[str, Any]],
                    prices: Prices | None = None, litellm_models: Mapping[str, str] | None = None,
                    not_averaged: frozenset[str] = frozenset()) -> list[ModelRow]:
    """The models' rows, priced here (:meth:`pytest_medhelm.cost.Prices.total_cost`: a model the prices file
    prices costs exactly its tokens at the file's price; ``litellm_models``: the litellm string each model is sent
    as, by name). The benchmarks of ``not_averaged`` (healthbench_meta, which measures the grader) count in a
    model's accounting, never in its macro-average or win rate."""
    by_model: dict[str, dict[str, float | None]] = defaultdict(dict)
    for r in results:
        row = by_model[r.model]
        if r.slug not in not_averaged:
            row[r.slug] = r.mean
    rates = win_rates(by_model) if len(by_model) >= 2 else {m: (None, None) for m in by_model}
    totals: dict[str, _Totals] = defaultdict(_Totals)
    for rec in instance_records(records):
        totals[rec.model].add(rec)
    summaries = []
    for model in sorted(by_model):
        means = [v for v in by_model[model].values() if v is not None]
        t = totals[model]
        win, win_sd = rates.get(model, (None, None))
        # an unknown price is reported as unknown (null), never as 0
        cost = (add_costs(t.costs) if prices is None else
                prices.total_cost(model, (litellm_models or {}).get(model, model), t.tokens_in, t.tokens_out, t.costs))
        summaries.append(ModelRow(model=model, macro_avg=_mean(means), macro_sd=_std(means), win_rate=win,
                                  win_sd=win_sd, tokens_in=t.tokens_in, tokens_out=t.tokens_out,
                                  reasoning_tokens=t.reasoning_tokens, n_answers=t.n_answers, n_ran_out=t.n_ran_out,
                                  cost_usd=cost, jury_tokens_in=t.jury_tokens_in,
                                  jury_tokens_out=t.jury_tokens_out, jury_cost_usd=add_costs(t.jury_costs)))
    return summaries
