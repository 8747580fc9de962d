"""How much the judges agree with each other: ICC(3,k) and Krippendorff's alpha (interval), numpy only.

**ICC(3,k)** (Shrout & Fleiss 1979, case 3, "consistency", two-way mixed): the targets (instances) are rows, the
raters (judges) columns, every cell filled. With the two-way ANOVA mean squares between targets ``MSR`` and residual
``MSE``::

    ICC(3,1) = (MSR - MSE) / (MSR + (k - 1) MSE)        reliability of one rater
    ICC(3,k) = (MSR - MSE) / MSR                         reliability of the mean of the k raters

It ignores a constant offset between raters (a lenient judge), not disagreement about which answers are better.
Only instances that every judge graded enter it. It is undefined (None) with fewer than two instances or raters,
or when all instances get the same mean.

**Krippendorff's alpha, interval metric**: ``1 - D_o / D_e``, observed over expected disagreement of squared
differences, using every instance graded by at least two judges (missing judgements allowed). 1 is perfect
agreement, 0 agreement at chance level; undefined (None) without variation.

:func:`judge_agreement` computes both over the judges' per-instance composite (the mean of a judge's criteria, the
quantity the jury averages), and per criterion, from the per-instance ``jury`` records that
:class:`~pytest_medhelm.metrics.jury.JuryMetric` writes; it also counts each judge's failures and the flagged
instances. The report shows it per benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["icc3", "icc3k", "krippendorff_alpha_interval", "judge_agreement"]


def icc3(matrix: Any) -> tuple[float, float]:
    """(ICC(3,1), ICC(3,k)) of an n targets x k raters matrix with no missing cell; NaN when undefined."""
    x = np.asarray(matrix, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D targets x raters matrix, got shape {x.shape}")
    n, k = x.shape
    if n < 2 or k < 2:
        return math.nan, math.nan
    if not np.all(np.isfinite(x)):
        raise ValueError("ICC needs a complete matrix (no NaN or infinite cell)")
    grand = x.mean()
    row_means = x.mean(axis=1, keepdims=True)
    col_means = x.mean(axis=0, keepdims=True)
    ss_rows = k * float(((row_means - grand) ** 2).sum())
    residual = x - row_means - col_means + grand
    ss_err = float((residual ** 2).sum())
    ms_rows = ss_rows / (n - 1)
    ms_err = ss_err / ((n - 1) * (k - 1))
    if ms_rows <= 1e-12 * max(1.0, float((x ** 2).mean())):
        return math.nan, math.nan
    single = (ms_rows - ms_err) / (ms_rows + (k - 1) * ms_err)
    average = (ms_rows - ms_err) / ms_rows
    return single, average


def icc3k(matrix: Any) -> float:
    """ICC(3,k): consistency of the mean of the k raters (columns) over the targets (rows)."""
    return icc3(matrix)[1]


def krippendorff_alpha_interval(units: Iterable[Sequence[float | None]]) -> float:
    """Krippendorff's alpha with the interval metric; ``units`` are the values of each unit (instance), one per
    coder, ``None`` or NaN where a coder gave none. NaN when undefined (no pairable values, or no variation)."""
    pairable: list[np.ndarray] = []
    for unit in units:
        values = np.array([float(v) for v in unit if v is not None and math.isfinite(float(v))], dtype=float)
        if values.size >= 2:
            pairable.append(values)
    if not pairable:
        return math.nan
    n = sum(v.size for v in pairable)
    # sum over ordered pairs (i != j) of (v_i - v_j)^2 = 2 (m * sum v^2 - (sum v)^2)
    observed = sum(2.0 * (v.size * float((v ** 2).sum()) - float(v.sum()) ** 2) / (v.size - 1) for v in pairable) / n
    pooled = np.concatenate(pairable)
    expected = 2.0 * (n * float((pooled ** 2).sum()) - float(pooled.sum()) ** 2) / (n * (n - 1))
    if expected <= 1e-12 * max(1.0, float((pooled ** 2).mean())):
        return math.nan
    return 1.0 - observed / expected


def _jury_of(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The jury dict of a record: the dict itself, ``record["jury"]`` or ``record["metrics"]["jury"]``."""
    if not isinstance(record, Mapping):
        return None
    if "per_judge" in record:
        return record
    jury = record.get("jury")
    if isinstance(jury, Mapping):
        return jury
    metrics = record.get("metrics")
    if isinstance(metrics, Mapping) and isinstance(metrics.get("jury"), Mapping):
        return metrics["jury"]
    return None


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _agreement(table: list[dict[str, float]], judges: list[str]) -> dict[str, Any]:
    complete = [[row[j] for j in judges] for row in table if all(j in row for j in judges)]
    single, average = icc3(complete) if len(judges) >= 2 and len(complete) >= 2 else (math.nan, math.nan)
    alpha = krippendorff_alpha_interval([[row.get(j) for j in judges] for row in table])
    return {"icc3k": _number(average), "icc3_1": _number(single), "alpha_interval": _number(alpha),
            "n_complete": len(complete), "n_pairable": sum(1 for row in table if len(row) >= 2)}


def judge_agreement(instance_records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Agreement among the judges over a benchmark's instances (one model's, typically).

    ``instance_records``: per-instance jury dicts (``{"per_judge": {judge: {criterion: {"score", ...}}},
    "failures": {judge: reason}, "flagged": ...}``), or records holding one under ``"jury"`` or
    ``["metrics"]["jury"]``. Returns ``judges``, ``n_instances``, ``n_complete`` (instances every judge graded),
    ``icc3k``, ``icc3_1``, ``alpha_interval`` (None when undefined), ``per_criterion`` (the same per criterion),
    ``judge_means`` (each judge's mean composite: a lenient judge shows here), ``failures`` (per judge, the number
    of instances it could not be read for) and ``flagged`` (instances per flag).
    """
    judges: list[str] = []
    criteria: list[str] = []
    composite: list[dict[str, float]] = []
    by_criterion: dict[str, list[dict[str, float]]] = {}
    failures: dict[str, int] = {}
    flagged: dict[str, int] = {}
    rows: list[Mapping[str, Any]] = []
    for record in instance_records:
        jury = _jury_of(record)
        if jury is None:
            continue
        rows.append(jury)
        for judge in list((jury.get("per_judge") or {}).keys()) + list((jury.get("failures") or {}).keys()):
            if judge not in judges:
                judges.append(judge)
        for scores in (jury.get("per_judge") or {}).values():
            for criterion in scores:
                if criterion not in criteria:
                    criteria.append(criterion)
    for jury in rows:
        for judge in jury.get("failures") or {}:
            failures[judge] = failures.get(judge, 0) + 1
        flag = jury.get("flagged")
        if flag:
            flagged[flag] = flagged.get(flag, 0) + 1
            if flag == "empty answer":
                continue  # nobody was asked: not a disagreement, not an agreement
        row: dict[str, float] = {}
        per_criterion: dict[str, dict[str, float]] = {c: {} for c in criteria}
        for judge, scores in (jury.get("per_judge") or {}).items():
            values = [float(v["score"]) for v in scores.values() if isinstance(v, Mapping) and "score" in v]
            if values:
                row[judge] = sum(values) / len(values)
            for criterion, value in scores.items():
                if isinstance(value, Mapping) and "score" in value:
                    per_criterion[criterion][judge] = float(value["score"])
        composite.append(row)
        for criterion in criteria:
            by_criterion.setdefault(criterion, []).append(per_criterion[criterion])
    overall = _agreement(composite, judges)
    means = {}
    for judge in judges:
        values = [row[judge] for row in composite if judge in row]
        means[judge] = sum(values) / len(values) if values else None
    return {
        "judges": judges,
        "n_instances": len(rows),
        **overall,
        "per_criterion": {c: _agreement(by_criterion.get(c, []), judges) for c in criteria},
        "judge_means": means,
        "failures": {judge: failures.get(judge, 0) for judge in judges},
        "flagged": flagged,
    }
