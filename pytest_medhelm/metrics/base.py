"""The metric interface: a metric turns (answer, instance) into a :class:`Score`.

Scores are normalized to [0, 1] for aggregation (``value``); ``raw`` keeps the metric on its own scale (a jury
mean on 1-5, for example). ``compat`` is ``"default"`` (corrected metrics), ``"helm"`` (HELM's numbers, bugs
included) or ``"medhelm"`` (medhelm 0.8.0's); a metric asks :mod:`pytest_medhelm.compat` what the mode means for
it; see docs/fidelity.md.

A score that is not a finite number (a custom metric dividing 0 by 0) is no measurement: :func:`require_finite`
raises :class:`ScoreNotANumber`, so the item fails with that message and its record says ``score_nan: true``
with no score (never a pass, never in a mean).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

#: (instance, answer text) -> the judges' verdicts: a :class:`~pytest_medhelm.jury.JuryVerdicts` (each reply, with
#: the prompt hashes and criteria of the run's instrument), or a plain mapping judge -> reply or the exception its
#: request ended with (then the benchmark's own rubric's criteria apply)
JudgeCompletions = Callable[["Instance", str], Any]


@dataclass(frozen=True)
class Score:
    value: float
    raw: float | None = None
    #: one line for a person: why this score (shown for misses)
    detail: str = ""
    #: secondary values (query validity, sentence accuracy, ROUGE-2 ...), recorded beside the main score
    extra: dict[str, Any] = field(default_factory=dict)
    #: why this item cannot be scored, when it cannot (an EHRSQL gold query that returns no rows on the database in
    #: use tells no answer from another); None for a scored item. A not-scored item counts neither for nor against:
    #: its ``value`` (0) means nothing, the run records it with score null and this reason (``not_scored``) and
    #: reports the item as skipped, as the loaders report the instances they filter out
    not_scored: str | None = None

    @property
    def raw_value(self) -> float:
        return self.value if self.raw is None else self.raw


class Metric(Protocol):
    #: HELM's main metric name, e.g. "exact_match", "medcalc_bench_accuracy"
    name: str
    #: 0/1 metrics: a miss is a 0. Continuous metrics: a miss is a value below ``pass_mark``.
    binary: bool
    pass_mark: float

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score: ...


class ScoringError(Exception):
    """The metric could not score the answer: not a wrong answer but no measurement (the jury gave no valid
    judgement). The item is an error, left out of the benchmark's mean; ``reasons`` says why, per source (judge)."""

    def __init__(self, message: str, reasons: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.reasons = dict(reasons or {})


@dataclass(frozen=True)
class ScoringContext:
    """What a metric may need from the run, handed to it explicitly (never found through a global).

    ``compat``: a mode of :mod:`pytest_medhelm.compat`; ``judge_completions``: the run's jury (None outside a run,
    where a judged metric needs its own); ``bertscore_model``: ``--medhelm-bertscore-model`` (None: the default)."""

    compat: str = "default"
    judge_completions: JudgeCompletions | None = None
    bertscore_model: str | None = None
    #: called with a benchmark's slug before its first secondary metrics: the run scores the BERTScore of every
    #: answer it has at hand in one batch (then each item's score comes from the memo)
    prime_secondary: Callable[[str], None] | None = None
    #: (instance, answer text) -> the rubric grader's replies (a
    #: :class:`~pytest_medhelm.metrics.healthbench.GraderReplies`): HealthBench's one call per rubric criterion
    grader_completions: Callable[[Instance, str], Any] | None = None


def score_in_context(metric: Metric, answer: str, instance: Instance, context: ScoringContext) -> Score:
    """Score with the run's context: a metric that needs more than ``compat`` (the jury) implements
    ``score_with(answer, instance, context)``; every other metric gets ``score(answer, instance, compat)``."""
    score_with = getattr(metric, "score_with", None)
    if score_with is not None:
        return score_with(answer, instance, context)
    return metric.score(answer, instance, context.compat)


class ScoreNotANumber(ValueError):
    """A metric returned NaN (or an infinity, or no number) as a score: the item has no score."""


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def require_finite(score: Score, metric_name: str, instance_id: Any) -> Score:
    """``score`` when its value is a finite number; else :class:`ScoreNotANumber` naming the metric and instance."""
    if not is_finite_number(score.value):
        raise ScoreNotANumber(f"the metric {metric_name} returned {score.value!r} for instance {instance_id}: "
                              "not a score (the item has no score; fix the metric)")
    return score
