"""The run's rooms, and what the items of this process get from them.

configure (:class:`~pytest_medhelm.run.context.RunContext`) → collect (:class:`~.collection.Collection`) → plan
(:class:`~.plan.AnswerPlan`) → send (:class:`~.delivery.Delivery`) → run items (:class:`~.items.ItemHooks`) →
aggregate, gate, report (:class:`~.reporting.Reporting`). Which of these this process drives, and when, is its
role's job (:mod:`~.roles`: the role is the run's pytest plugin). The items reach this object through
``config.stash[RUN_SERVICES]`` (it implements :class:`~pytest_medhelm.item_api.ItemServices`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.run.collection import Collection
from pytest_medhelm.run.context import Handover, ProcessRole, RunContext
from pytest_medhelm.run.delivery import Delivery
from pytest_medhelm.run.items import ItemHooks
from pytest_medhelm.run.plan import AnswerPlan
from pytest_medhelm.run.reporting import Reporting
from pytest_medhelm.values import printable

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.config import RunConfig
    from pytest_medhelm.metrics.base import ScoringContext
    from pytest_medhelm.report.records import Results
    from pytest_medhelm.values import ChatRequest, Completion, Instance, ModelSpec


class Run:
    def __init__(self, config: pytest.Config, role: ProcessRole, handover: Handover,
                 on_sender_finished: Callable[[], None]) -> None:
        self.config = config
        self.ctx = ctx = RunContext(config, role, handover)
        self.plan = AnswerPlan(ctx)
        self.collection = Collection(ctx)
        self.delivery = Delivery(ctx, self.plan, self.write_line, on_sender_finished=on_sender_finished)
        self.reporting = Reporting(ctx, self.collection.removed, lambda: self.delivery.lines)
        self.items = ItemHooks(ctx, self.reporting.add)
        self._scoring: ScoringContext | None = None
        self._primed: set[str] = set()  # benchmarks whose BERTScore was batched in this process

    # ------------------------------------------------------------------------------------------ item services
    @property
    def registry(self) -> Registry:
        return self.ctx.registry

    @property
    def run_config(self) -> RunConfig:
        return self.ctx.run_config

    @property
    def results(self) -> Results | None:
        return self.reporting.results

    @property
    def data_verification(self) -> Any:
        return self.ctx.data_verification

    def model_spec(self, name: str) -> ModelSpec:
        return self.ctx.model_spec(name)

    def answer_request(self, instance: Instance, model: str) -> ChatRequest:
        return self.plan.answer_request(instance, model)

    def complete(self, spec: ModelSpec, request: ChatRequest) -> Completion:
        return self.delivery.complete(spec, request)

    def scoring_context(self) -> ScoringContext:
        if self._scoring is None:
            from pytest_medhelm.metrics.base import ScoringContext

            rc = self.ctx.run_config
            self._scoring = ScoringContext(compat=rc.compat, judge_completions=self.delivery.judge_completions,
                                           bertscore_model=rc.bertscore_model, prime_secondary=self._prime_bertscore,
                                           grader_completions=self.delivery.grader_completions)
        return self._scoring

    def _prime_bertscore(self, slug: str) -> None:
        """Once per benchmark and process, at its first scored item: the BERTScore of every answer of it at hand
        (all of them on a cached re-run) in batches, instead of one pair per item."""
        if slug in self._primed:
            return
        self._primed.add(slug)
        from pytest_medhelm.metrics.bertscore import prime_items

        rc = self.ctx.run_config
        try:
            prime_items(self.ctx.registry.get(slug).metric, self.delivery.answers_at_hand(slug), compat=rc.compat,
                        model=rc.bertscore_model)
        except Exception:  # noqa: BLE001 - a secondary metric never takes a score down: each item then reports why
            pass

    # ------------------------------------------------------------------------------------------ helpers
    def write_line(self, text: str, markup: dict | None = None) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(printable(text), **(markup or {}))  # (a server's text among it: escaped)
