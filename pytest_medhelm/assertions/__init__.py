"""Metric assertions: score an answer, record the score on the item, and report a miss.

    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)

A wrong answer raises :class:`~pytest_medhelm.item_api.Missed`: the item shows as MISSED (``m``), a measurement
rather than a failure, unless ``--medhelm-strict``.

:func:`benchmark_test` is that test, made for one benchmark: a suite module (``benchmarks/<category>/test_<slug>.py``)
is ``test_<slug> = benchmark_test("<slug>")``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pytest_medhelm.item_api import CURRENT_ITEM, RUN_SERVICES, Missed, record_for

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.item_record import ItemRecord
    from pytest_medhelm.metrics.base import Metric, Score, ScoringContext
    from pytest_medhelm.values import Completion, Instance

__all__ = ["assert_metric", "benchmark_test", "score_answer", "Missed"]


def _text(answer: Completion | str) -> str:
    return answer if isinstance(answer, str) else answer.text


def _context() -> ScoringContext:
    """The running item's scoring context (compat, the run's jury, the BERTScore model); outside a run, the
    default one (no judges)."""
    item = CURRENT_ITEM.get()
    services = item.config.stash.get(RUN_SERVICES, None) if item is not None else None
    if services is None:
        from pytest_medhelm.metrics.base import ScoringContext

        return ScoringContext()
    return services.scoring_context()


def _metric_for(instance: Instance, metric: Metric | None) -> Metric:
    """``metric``, or the benchmark's own when none is given."""
    if metric is not None:
        return metric
    item = CURRENT_ITEM.get()
    if item is not None and RUN_SERVICES in item.config.stash:
        registry = item.config.stash[RUN_SERVICES].registry
    else:
        from pytest_medhelm.catalogue import build_registry

        registry = build_registry()
    return registry.get(instance.benchmark).metric


def score_answer(answer: Completion | str, instance: Instance, metric: Metric | None = None,
                 compat: str | None = None) -> Score:
    """Score without asserting: the benchmark's own metric unless another is given."""
    import dataclasses

    from pytest_medhelm.metrics.base import score_in_context

    context = _context()
    if compat is not None:
        context = dataclasses.replace(context, compat=compat)
    return score_in_context(_metric_for(instance, metric), _text(answer), instance, context)


def assert_metric(answer: Completion | str, instance: Instance, metric: Metric | None = None,
                  pass_mark: float | None = None) -> Score:
    """Score ``answer``, record the score on the running item, and raise :class:`Missed` below the pass mark.

    The pass mark is 1 for 0/1 metrics (only a right answer passes) and the metric's own ``pass_mark`` for
    continuous ones, unless given here."""
    from pytest_medhelm.item_record import RanOut
    from pytest_medhelm.metrics.base import ScoreNotANumber, require_finite

    metric = _metric_for(instance, metric)
    score = score_answer(answer, instance, metric)
    record = _running_record()
    try:
        require_finite(score, metric.name, instance.id)
    except ScoreNotANumber:
        record.metric, record.score, record.raw_score, record.score_nan = metric.name, None, None, True
        raise
    if score.not_scored:
        _record_not_scored(record, score, instance, metric)
    mark = pass_mark if pass_mark is not None else (1.0 if metric.binary else metric.pass_mark)
    # an answer the token limit cut before it began (a reasoning model's thinking took it all) is never a pass,
    # whatever the metric makes of an empty answer: it is scored as one, and missed with the reason
    ran_out = record.ran_out or (RanOut.of(answer) if not isinstance(answer, str) else None)
    missed = score.value < mark or ran_out is not None
    detail = score.detail
    if ran_out is not None:
        detail = f"{ran_out.reason()}; {score.detail or f'expected {instance.expected!r}'}"
    detail = _bounded_detail(detail)
    _record_score(record, metric, score.value, score.raw_value, missed, instance, detail, score.extra)
    if missed:
        raise Missed(detail or _bounded_detail(f"expected {instance.expected!r}, got {_text(answer)!r}"))
    return score


#: the longest detail a miss line or a record holds (a metric may quote a huge answer or query result)
MAX_DETAIL_CHARS = 2000


def _bounded_detail(detail: str) -> str:
    if len(detail) <= MAX_DETAIL_CHARS:
        return detail
    return f"{detail[:MAX_DETAIL_CHARS - 1]}… (a detail of {len(detail):,} characters, cut)"


def _running_record() -> ItemRecord:
    """The running item's record; outside a run, one that is thrown away (``assert_metric`` in a plain test)."""
    if CURRENT_ITEM.get() is not None:
        return record_for()
    from pytest_medhelm.item_record import ItemRecord

    return ItemRecord()


def _record_score(record: ItemRecord, metric: Metric, value: float | None, raw: float | None, missed: bool,
                  instance: Instance, detail: str, extra: dict[str, Any]) -> None:
    record.metric, record.score, record.raw_score, record.missed = metric.name, value, raw, missed
    record.expected, record.detail = instance.expected, detail
    record.add_metrics(extra)


def ran_out_reason(ran_out: Mapping[str, Any]) -> str:
    """Why an answer is empty, from a record's ``ran_out`` (:meth:`pytest_medhelm.item_record.RanOut.reason`)."""
    from pytest_medhelm.item_record import RanOut

    return RanOut(**{key: ran_out.get(key) for key in RanOut.__dataclass_fields__}).reason()


def _record_not_scored(record: ItemRecord, score: Score, instance: Instance, metric: Metric) -> None:
    """An item its metric cannot score (``Score.not_scored``): recorded with score null and the reason, and
    reported as skipped, so that it counts neither for nor against and is never dropped silently."""
    import pytest

    _record_score(record, metric, None, None, False, instance, score.detail, score.extra)
    record.not_scored = score.not_scored
    pytest.skip(f"not scored: {score.not_scored}")


class _AnswersInstances(Protocol):
    """What a benchmark test needs of the ``medhelm_model`` fixture: a benchmark's answer for an instance."""

    def answer(self, instance: Instance) -> Completion: ...


def benchmark_test(slug: str) -> Callable[[Instance, _AnswersInstances], None]:
    """The test of a benchmark's items, named ``test_<slug>`` and marked ``@pytest.mark.medhelm(benchmark=slug)``:
    the model's answer to the item's instance (the benchmark's exact prompt, from the cache when answered), scored
    by the benchmark's metric (a wrong answer is a miss). Bound to the name ``test_<slug>`` in a test module, it is
    collected as that module's test::

        test_pubmedqa = benchmark_test("pubmedqa")

    is the suite module of PubMedQA, the same test as::

        @pytest.mark.medhelm(benchmark="pubmedqa")
        def test_pubmedqa(medhelm_instance, medhelm_model):
            answer = medhelm_model.answer(medhelm_instance)
            assert_metric(answer, medhelm_instance)
    """
    import sys

    import pytest

    def test(medhelm_instance: Instance, medhelm_model: _AnswersInstances) -> None:
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)

    test.__name__ = test.__qualname__ = f"test_{slug}"
    test.__doc__ = f"The items of benchmark {slug!r}: its model's answer to each instance, scored by its metric."
    # The test is placed where it is bound, at the line that calls this function: pytest takes an item's file and
    # line from its function's code (a skip's "file:line", -v, JUnit XML, a traceback's first frame), and they
    # should name the suite module, not this one.
    caller = sys._getframe(1)
    where = caller.f_globals.get("__file__")
    if isinstance(where, str):
        test.__module__ = str(caller.f_globals.get("__name__", test.__module__))
        test.__code__ = test.__code__.replace(co_filename=where, co_firstlineno=caller.f_lineno)
    return pytest.mark.medhelm(benchmark=slug)(test)
