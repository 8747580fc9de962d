"""Paired statistics for a run against its baseline.

The two runs answered the same instances, so every test here is *paired*: per benchmark, the instances both runs
scored are matched by (benchmark, subset, instance id), whatever the models are called, and the unit of analysis is
the per-instance difference ``d_i = current_i − baseline_i`` of normalized scores.

Benchmark
    ``baseline`` and ``current`` are the means over the matched instances, aggregated as the benchmark's score is
    (the unweighted mean of its subset means when HELM runs it as several subsets), ``delta = current − baseline``.

    * **0/1 scores** (every matched score of both runs is 0 or 1, one subset): the **exact McNemar test**, i.e. the
      two-sided binomial test of the discordant pairs: with ``b`` instances right before and wrong now and ``c``
      wrong before and right now, ``p = min(1, 2 · P[Bin(b + c, 1/2) ≤ min(b, c)])`` (1 when ``b + c = 0``).
      This is ``scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue``.
    * **other scores** (F1, ROUGE-L, jury means, or several subsets): the **paired bootstrap**: ``RESAMPLES``
      (10,000) resamples of the instances with replacement (within each subset), the statistic recomputed on each;
      two-sided p-value of the null-shifted bootstrap distribution (Efron & Tibshirani 1993, §16.4):
      ``p = (1 + #{b : |δ*_b − δ| ≥ |δ|}) / (B + 1)``; the +1 keeps p above 0 with a finite number of resamples.

    The **95% CI** of the delta is the percentile interval of the same bootstrap (for 0/1 scores too, so that every
    row's interval is built the same way). Resampling is deterministic: the random stream of a benchmark's subset is
    seeded from ``SEED`` and the sha256 of its benchmark slug and subset name, so a benchmark's numbers do not depend
    on which other benchmarks ran, on the order of the records, or on the machine.

Category and overall
    ``delta`` is the mean of its benchmarks' deltas (the category score is the unweighted mean of benchmark scores).
    Its test is the **paired bootstrap stratified by benchmark**: each resample draws every benchmark's instances
    independently, within the benchmark (and subset), and averages the resampled benchmark deltas, which keeps each
    benchmark's weight fixed at 1/K as in the score itself. Implemented by averaging the benchmarks' own bootstrap
    vectors, which are independent streams. A category of one benchmark reuses that benchmark's test and interval.

Minimum detectable effect (the paper's Appendix E, alpha 0.05, power 0.8), for the paired design:
    ``MDE = (z_{1−α/2} + z_{power}) · SE``, ``SE = sd(d) / sqrt(n)`` for a benchmark of one subset (``sd`` the sample
    standard deviation, ddof 1), i.e. ``(1.95996 + 0.84162) · sd(d) / sqrt(n) = 2.80 · sd(d) / sqrt(n)``. For a mean
    of K independent means (subsets of a benchmark, benchmarks of a category) the same formula with
    ``SE = sqrt(Σ_k SE_k²) / K``. It is the true difference this comparison would detect 80% of the time at
    α = 0.05, using the observed spread of the differences. None when a subset has fewer than 2 matched instances.

The compare-fail gate ``NAME:DROP`` (:func:`margin_p`) asks another question than the table's "did anything
change": **is there evidence that the score dropped by more than DROP?** With ``D`` = DROP and ``θ`` the true drop
(baseline − current), ``H0: θ ≤ D`` against ``H1: θ > D``, one-sided, at the margin:

    * **0/1 scores** (the McNemar rows): **Tango's score test** for the difference of paired proportions against a
      margin (Tango 1998, Statistics in Medicine 17:891; the non-inferiority test of matched-pair designs). With
      ``b`` = right before and wrong now, ``c`` = wrong before and right now, over ``n`` pairs,
      ``Z = (b − c − n·D) / sqrt(n · (2·p̃ + D·(1 − D)))``, where ``p̃`` is the maximum-likelihood estimate of
      P(wrong before, right now) under ``θ = D``: the positive root of ``2n·x² + B·x + C = 0``,
      ``B = 2n·D − b·(1 + D) − c·(1 − D)``, ``C = −c·D·(1 − D)``. ``p = 1 − Φ(Z)``. At ``D = 0`` this is the
      one-sided McNemar score test ``(b − c)/sqrt(b + c)``; no pair that changed and ``D = 0``: p = 1. Asymptotic;
      its size stays close to α from a few dozen pairs on (Tango 1998, Table II).
    * **other scores, several subsets, categories and overall**: the same paired (stratified) bootstrap as above,
      its distribution shifted to the margin: ``p = (1 + #{b : δ*_b − δ ≤ δ + D}) / (B + 1)`` (the one-sided
      null-shifted test of ``δ = −D``, the "basic" bootstrap's one-sided interval turned into a p-value).

    ``D ≥ 1`` cannot be exceeded: p = 1. The tests simulate pairs whose true drop is exactly ``D``: the gate fails in
    at most α of the runs; with a true drop of ``2·D`` on 500 instances it fails in most
    (tests/compare/test_stats.py prints the measured rates).

Multiple comparisons: :func:`holm` (Holm–Bonferroni, controls the family-wise error rate). The comparison table
shows unadjusted two-sided p-values of "no change" (each row answers its own question); the
``--medhelm-compare-fail`` gates, which together decide one verdict (the exit status), are judged on Holm-adjusted
one-sided margin p-values over all of the run's compare-fail gates (every NAME × model pair), so that gating 20
benchmarks does not fail a run on noise one time in three.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist
from typing import Any

ALPHA = 0.05
POWER = 0.8
RESAMPLES = 10_000
SEED = 0
CI_LEVEL = 0.95
#: at most this many indices drawn at once (memory), whatever the benchmark's size
_CHUNK_ELEMENTS = 2_000_000


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """``z_{1−α/2} + z_{power}`` (2.8016 for α = 0.05, power = 0.8)."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts ``b`` and ``c`` (exact rational arithmetic)."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2 ** n)))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values, in the input order; None entries are left out of the family."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def mde_from_se(se: float | None, alpha: float = ALPHA, power: float = POWER) -> float | None:
    return None if se is None else z_sum(alpha, power) * se


def paired_se(groups: Sequence[Sequence[float]]) -> float | None:
    """Standard error of the mean over groups of the groups' mean differences: ``sqrt(Σ s_k²/n_k) / K``."""
    if not groups:
        return None
    total = 0.0
    for diffs in groups:
        n = len(diffs)
        if n < 2:
            return None
        mu = sum(diffs) / n
        total += sum((d - mu) ** 2 for d in diffs) / (n - 1) / n
    return math.sqrt(total) / len(groups)


def _stream(seed: int, *labels: str):
    import numpy as np

    words = [seed]
    for label in labels:
        words.append(int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big"))
    return np.random.default_rng(np.random.SeedSequence(words))


def bootstrap_means(diffs: Sequence[float], *, key: str, resamples: int = RESAMPLES, seed: int = SEED):
    """``resamples`` means of ``diffs`` resampled with replacement (a numpy array), seeded from ``seed`` and
    ``key``, drawn in chunks so that memory stays bounded for large benchmarks."""
    import numpy as np

    data = np.asarray(diffs, dtype=float)
    n = data.size
    if n == 0:
        raise ValueError("nothing to resample")
    rng = _stream(seed, key)
    values, counts = np.unique(data, return_counts=True)
    if values.size * 8 <= n:
        # few distinct differences (0/1 scores give at most 3): a resample is fully described by how many times it
        # draws each value, which is Multinomial(n, frequencies): the same distribution, in O(B·k) instead of O(B·n)
        draws = rng.multinomial(n, counts / n, size=resamples)
        return draws @ values / n
    rows = max(1, min(resamples, _CHUNK_ELEMENTS // n))
    out = np.empty(resamples)
    done = 0
    while done < resamples:
        take = min(rows, resamples - done)
        out[done:done + take] = data[rng.integers(0, n, size=(take, n))].mean(axis=1)
        done += take
    return out


def bootstrap_p(boot, observed: float) -> float:
    """Two-sided p-value of the null-shifted bootstrap: ``(1 + #{|δ* − δ| ≥ |δ|}) / (B + 1)``."""
    import numpy as np

    boot = np.asarray(boot, dtype=float)
    extreme = int(np.count_nonzero(np.abs(boot - observed) >= abs(observed) - 1e-12))
    return min(1.0, (1 + extreme) / (boot.size + 1))


def percentile_ci(boot, level: float = CI_LEVEL) -> tuple[float, float]:
    import numpy as np

    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.asarray(boot, dtype=float), [tail, 1.0 - tail])
    return float(low), float(high)


@dataclass
class PairedResult:
    """One row of a comparison. ``boot`` (the bootstrap deltas) and ``se`` are kept for aggregation only."""

    n: int
    baseline: float
    current: float
    delta: float
    ci_low: float
    ci_high: float
    p: float
    test: str  # "mcnemar_exact", "paired_bootstrap", "stratified_paired_bootstrap"
    mde: float | None
    se: float | None = None
    discordant: tuple[int, int] | None = None  # (right before and wrong now, wrong before and right now)
    n_benchmarks: int = 1
    boot: Any = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        data = {"n": self.n, "baseline": self.baseline, "current": self.current, "delta": self.delta,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "p": self.p, "test": self.test, "mde": self.mde,
                "n_benchmarks": self.n_benchmarks}
        if self.discordant is not None:
            data["discordant"] = {"worse": self.discordant[0], "better": self.discordant[1]}
        return data


def _is_binary(values: Sequence[float]) -> bool:
    return all(v == 0.0 or v == 1.0 for v in values)


def compare_benchmark(subsets: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, key: str,
                      resamples: int = RESAMPLES, seed: int = SEED, alpha: float = ALPHA,
                      power: float = POWER) -> PairedResult | None:
    """``subsets`` maps a subset name ("" for none) to the matched (baseline scores, current scores), in the same
    instance order. None when nothing is matched."""
    import numpy as np

    groups = {s: (list(map(float, b)), list(map(float, c))) for s, (b, c) in sorted(subsets.items()) if len(b)}
    if not groups:
        return None
    for s, (b, c) in groups.items():
        if len(b) != len(c):
            raise ValueError(f"{key}/{s}: {len(b)} baseline scores but {len(c)} current scores")
    diffs = {s: [cv - bv for bv, cv in zip(b, c)] for s, (b, c) in groups.items()}
    baseline = sum(sum(b) / len(b) for b, _ in groups.values()) / len(groups)
    current = sum(sum(c) / len(c) for _, c in groups.values()) / len(groups)
    delta = current - baseline
    boot = np.mean([bootstrap_means(d, key=f"{key}\x00{s}", resamples=resamples, seed=seed)
                    for s, d in diffs.items()], axis=0)
    ci_low, ci_high = percentile_ci(boot)
    se = paired_se(list(diffs.values()))
    n = sum(len(d) for d in diffs.values())
    discordant = None
    if len(groups) == 1:
        [(b, c)] = groups.values()
        if _is_binary(b) and _is_binary(c):
            worse = sum(1 for bv, cv in zip(b, c) if bv == 1.0 and cv == 0.0)
            better = sum(1 for bv, cv in zip(b, c) if bv == 0.0 and cv == 1.0)
            discordant = (worse, better)
    if discordant is not None:
        p, test = mcnemar_exact(*discordant), "mcnemar_exact"
    else:
        p = bootstrap_p(boot, delta)
        test = "paired_bootstrap" if len(groups) == 1 else "stratified_paired_bootstrap"
    return PairedResult(n=n, baseline=baseline, current=current, delta=delta, ci_low=ci_low, ci_high=ci_high,
                        p=p, test=test, mde=mde_from_se(se, alpha, power), se=se, discordant=discordant, boot=boot)


def combine(results: Sequence[PairedResult], *, alpha: float = ALPHA, power: float = POWER) -> PairedResult | None:
    """A category or the overall score: the mean of benchmark results, tested by the stratified paired bootstrap."""
    import numpy as np

    results = [r for r in results if r is not None]
    if not results:
        return None
    if len(results) == 1:
        only = results[0]
        return dataclasses.replace(only)
    k = len(results)
    baseline = sum(r.baseline for r in results) / k
    current = sum(r.current for r in results) / k
    delta = current - baseline
    boot = np.mean([r.boot for r in results], axis=0)
    ci_low, ci_high = percentile_ci(boot)
    errors = [r.se for r in results if r.se is not None]
    se = math.sqrt(sum(e ** 2 for e in errors)) / k if len(errors) == k else None
    return PairedResult(n=sum(r.n for r in results), baseline=baseline, current=current, delta=delta,
                        ci_low=ci_low, ci_high=ci_high, p=bootstrap_p(boot, delta),
                        test="stratified_paired_bootstrap", mde=mde_from_se(se, alpha, power), se=se,
                        n_benchmarks=sum(r.n_benchmarks for r in results), boot=boot)


# ---------------------------------------------------------------------------------------------------- margin tests
def paired_binary_margin_p(worse: int, better: int, n: int, drop: float) -> float:
    """One-sided p-value of ``H0: P(worse) − P(better) ≤ drop`` for ``n`` pairs of 0/1 scores, of which ``worse``
    went from right to wrong and ``better`` from wrong to right: Tango's score test (module docstring)."""
    if worse < 0 or better < 0 or worse + better > n:
        raise ValueError(f"discordant counts {worse} and {better} do not fit in {n} pairs")
    if not 0.0 <= drop:
        raise ValueError(f"the allowed drop must be >= 0, got {drop!r}")
    if drop >= 1.0 or n == 0:
        return 1.0
    a = 2.0 * n
    b = 2.0 * n * drop - worse * (1.0 + drop) - better * (1.0 - drop)
    c = -better * drop * (1.0 - drop)
    p_better = (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)
    variance = n * (2.0 * p_better + drop * (1.0 - drop))
    if variance <= 0.0:  # drop 0 and no pair changed: no evidence of anything
        return 1.0
    z = (worse - better - n * drop) / math.sqrt(variance)
    return 1.0 - NormalDist().cdf(z)


def bootstrap_margin_p(boot, observed: float, drop: float) -> float:
    """One-sided p-value of ``H0: true delta ≥ −drop`` from the bootstrap deltas shifted to the margin:
    ``(1 + #{δ* − δ ≤ δ + drop}) / (B + 1)``."""
    import numpy as np

    if not 0.0 <= drop:
        raise ValueError(f"the allowed drop must be >= 0, got {drop!r}")
    if drop >= 1.0:
        return 1.0
    boot = np.asarray(boot, dtype=float)
    extreme = int(np.count_nonzero(boot - observed <= observed + drop + 1e-12))
    return min(1.0, (1 + extreme) / (boot.size + 1))


MARGIN_TESTS = {"mcnemar_exact": "tango_score_margin", "paired_bootstrap": "paired_bootstrap_margin",
                "stratified_paired_bootstrap": "stratified_paired_bootstrap_margin"}


def margin_p(result: PairedResult, drop: float) -> tuple[float, str]:
    """The compare-fail gate's one-sided p-value of "the score dropped by at most ``drop``", and the test's name:
    Tango's score test for a row of 0/1 scores, the (stratified) paired bootstrap at the margin otherwise."""
    if result.discordant is not None:
        worse, better = result.discordant
        return paired_binary_margin_p(worse, better, result.n, drop), MARGIN_TESTS["mcnemar_exact"]
    return bootstrap_margin_p(result.boot, result.delta, drop), MARGIN_TESTS[result.test]
