"""Metric assertions: score an answer, record the score on the item, and report a miss.

    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)

A wrong answer raises :class:`~pytest_medhelm.recording.Missed`: the item shows as MISSED (``m``), a measurement
rather than a failure, unless ``--medhelm-strict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_medhelm.recording import CURRENT_ITEM, Missed, record_for

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue.definition import Instance
    from pytest_medhelm.metrics.base import Metric, Score
    from pytest_medhelm.models.request import Completion

__all__ = ["assert_metric", "score_answer", "Missed"]


def _text(answer: "Completion | str") -> str:
    return answer if isinstance(answer, str) else answer.text


def _compat() -> str:
    item = CURRENT_ITEM.get()
    if item is None:
        return "default"
    session = item.config.pluginmanager.get_plugin("medhelm-session")
    return session.run_config.compat if session is not None else "default"


def _metric_for(instance: "Instance", metric: "Metric | None") -> "Metric":
    """``metric``, or the benchmark's own when none is given."""
    if metric is not None:
        return metric
    from pytest_medhelm.session import registry_for_current_run

    return registry_for_current_run().get(instance.benchmark).metric


def score_answer(answer: "Completion | str", instance: "Instance", metric: "Metric | None" = None,
                 compat: str | None = None) -> "Score":
    """Score without asserting: the benchmark's own metric unless another is given."""
    return _metric_for(instance, metric).score(_text(answer), instance, compat or _compat())


def assert_metric(answer: "Completion | str", instance: "Instance", metric: "Metric | None" = None,
                  pass_mark: float | None = None) -> "Score":
    """Score ``answer``, record the score on the running item, and raise :class:`Missed` below the pass mark.

    The pass mark is 1 for 0/1 metrics (only a right answer passes) and the metric's own ``pass_mark`` for
    continuous ones, unless given here."""
    metric = _metric_for(instance, metric)
    score = score_answer(answer, instance, metric)
    if score.not_scored:
        _record_not_scored(score, instance, metric)
    mark = pass_mark if pass_mark is not None else (1.0 if metric.binary else metric.pass_mark)
    missed = score.value < mark
    record: dict[str, Any] = record_for() if CURRENT_ITEM.get() is not None else {}
    record.update(score=score.value, raw_score=score.raw_value, metric=metric.name, missed=missed,
                  expected=instance.expected, detail=score.detail)
    if score.extra:
        record.setdefault("metrics", {}).update(score.extra)
    if missed:
        raise Missed(score.detail or f"expected {instance.expected!r}, got {_text(answer)!r}")
    return score


def _record_not_scored(score: "Score", instance: "Instance", metric: "Metric") -> None:
    """An item its metric cannot score (``Score.not_scored``): recorded with score null and the reason, and
    reported as skipped, so that it counts neither for nor against and is never dropped silently."""
    import pytest

    record: dict[str, Any] = record_for() if CURRENT_ITEM.get() is not None else {}
    record.update(score=None, raw_score=None, metric=metric.name, missed=False, expected=instance.expected,
                  detail=score.detail, not_scored=score.not_scored)
    if score.extra:
        record.setdefault("metrics", {}).update(score.extra)
    pytest.skip(f"not scored: {score.not_scored}")
