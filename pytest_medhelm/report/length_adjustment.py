"""HealthBench's length-adjusted scores, reported beside the raw ones (never instead of them).

simple-evals (PR #108, the HealthBench Professional paper's section 4.1) adjusts each example's rubric score for
the length of the answer: ``score - 0.0147 * (answer_chars - 2000) / 500``, a penalty above 2,000 characters and a
bonus below, linear per character, not clipped per example; the benchmark's length-adjusted score is the mean of
those, clipped to [0, 1] as the raw one is. The metric (:mod:`pytest_medhelm.metrics.healthbench`) writes each
instance's ``metrics["length_adjusted"]`` and ``metrics["answer_chars"]``; here they become the benchmark row's
``length_adjusted`` (aggregated as the row's raw score is: clipped by the reference's scoring, a plain mean under
``--medhelm-compat medhelm``), ``run.length_adjustment`` (the rule, its constants, the benchmarks it applies to)
and a table beside the raw score in the terminal, the Markdown summary and the HTML report.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import Field

from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.record_base import Record, about, many

#: where the rule comes from
SOURCE = "openai/simple-evals PR #108 (HealthBench Professional, paper section 4.1)"


class LengthAdjustment(Record):
    """``run.length_adjustment``: the rule the benchmarks' ``length_adjusted`` scores follow, and its constants."""

    rule: str = Field(description="the formula, per example, and how the benchmark's score aggregates it")
    center_chars: float = Field(description="the answer length (characters) at which the score is unchanged")
    penalty_per_500_chars: float = Field(description="the score moved per 500 characters away from the centre")
    source: str = about("where the rule and its constants come from", SOURCE)
    benchmarks: list[str] = many("the benchmarks that carry a length_adjusted score", list)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def add_length_adjusted(results: Any, records: Sequence[Any]) -> None:
    """Each benchmark row's ``length_adjusted`` from its scored records, and ``run.length_adjustment``, when some
    record carries one (a HealthBench variant ran)."""
    from pytest_medhelm.jury.rubric_scoring import (
        LENGTH_CENTER_CHARS,
        LENGTH_PENALTY_PER_500_CHARS,
        LENGTH_RULE,
        clipped_mean,
    )

    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    clipped: set[tuple[str, str]] = set()
    for rec in records:
        metrics = rec.metrics or {}
        if rec.score is None or not _finite(metrics.get("length_adjusted")):
            continue
        values[(rec.benchmark, rec.model)].append(float(metrics["length_adjusted"]))
        if metrics.get("aggregate") == "clipped_mean":
            clipped.add((rec.benchmark, rec.model))
    if not values:
        return
    for row in results.benchmarks:
        got = values.get((row.slug, row.model))
        if got:
            row.length_adjusted = clipped_mean(got) if (row.slug, row.model) in clipped else math.fsum(got) / len(got)
    results.run.length_adjustment = LengthAdjustment(
        rule=LENGTH_RULE, center_chars=LENGTH_CENTER_CHARS, penalty_per_500_chars=LENGTH_PENALTY_PER_500_CHARS,
        benchmarks=sorted({slug for slug, _model in values}))


def length_table(benchmarks: Iterable[Any]) -> tuple[list[str], list[list[str]]]:
    """The benchmark rows with a length-adjusted score: the raw score and the length-adjusted one side by side."""
    header = ["benchmark", "model", "n", "score (raw)", "length-adjusted", "difference"]
    rows = []
    for row in benchmarks:
        if row.length_adjusted is None:
            continue
        diff = None if row.mean is None else row.length_adjusted - row.mean
        rows.append([row.slug, row.model, str(row.n), fixed(row.mean), fixed(row.length_adjusted),
                     "-" if diff is None else f"{diff:+.3f}"])
    return header, rows


def length_title(adjustment: LengthAdjustment | None) -> str:
    """The section's title, with the rule's constants."""
    if adjustment is None:
        return "HealthBench length-adjusted scores"
    return (f"HealthBench length-adjusted scores beside the raw ones (score - {adjustment.penalty_per_500_chars:g} "
            f"per 500 characters over {adjustment.center_chars:,.0f}, a bonus under)")
