"""The run's orchestrator: it owns the rooms of the run, registers them with pytest, and drives the loop.

configure (:class:`~pytest_medhelm.run.context.RunContext`) → collect (:class:`~.collection.Collection`) → plan
(:class:`~.plan.AnswerPlan`) → send (:class:`~.delivery.Delivery`) → run items (:class:`~.items.ItemHooks`) →
aggregate, gate, report (:class:`~.reporting.Reporting`). The xdist-only hooks (:mod:`~.xdist`) are registered
only in a distributed run. The items reach this object through ``config.stash[RUN_SERVICES]`` (it implements
:class:`~pytest_medhelm.recording.ItemServices`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.run.collection import Collection, has_medhelm_items, medhelm_items
from pytest_medhelm.run.context import CENTRAL, CONTROLLER, WORKER, RunContext, run_every_step
from pytest_medhelm.run.delivery import EVERY_MODEL_BROKEN, Delivery
from pytest_medhelm.run.items import ItemHooks
from pytest_medhelm.run.plan import AnswerPlan
from pytest_medhelm.run.reporting import Reporting

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.report.records import Results
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.values import Instance
    from pytest_medhelm.config import RunConfig
    from pytest_medhelm.metrics.base import ScoringContext
    from pytest_medhelm.values import ChatRequest, Completion, ModelSpec

#: from this many collected items on, the collected objects are frozen out of the garbage collector's scans
FREEZE_MIN_ITEMS = 1000


class Run:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.ctx = ctx = RunContext(config)
        self.plan = AnswerPlan(ctx)
        self.collection = Collection(ctx)
        self.delivery = Delivery(ctx, self.plan, self._write_line, on_sender_finished=self._sender_finished)
        self.reporting = Reporting(ctx, self.collection.removed, lambda: self.delivery.lines)
        self.items = ItemHooks(ctx, self.reporting.add)
        self._controller: Any = None
        self._scoring: ScoringContext | None = None
        self._primed: set[str] = set()  # benchmarks whose BERTScore was batched in this process
        self._stopped_early = False  # xdist's -x / --maxfail: its exit status says "interrupted", the run was not
        self._frozen = False
        self._header: list[str] = []  # start-up lines: the cache, the shared cache, each model's endpoint
        # registered now, before pytest's own plugins register theirs, so that it runs after them: the session's
        # last full garbage collections (pytest's unraisable-exception check) still skip the frozen items
        config.add_cleanup(self._unfreeze)

    def register(self) -> None:
        pm = self.config.pluginmanager
        pm.register(self, "medhelm-run")
        pm.register(self.collection, "medhelm-collection")
        pm.register(self.items, "medhelm-items")
        if self.ctx.role == CONTROLLER:
            from pytest_medhelm.run.xdist import ControllerHooks

            self._controller = ControllerHooks(self.ctx, self.delivery, self.reporting)
            pm.register(self._controller, "medhelm-xdist")
        elif self.ctx.role == WORKER:
            from pytest_medhelm.run.xdist import WorkerHooks

            pm.register(WorkerHooks(self.ctx, self.plan, self.delivery, self.collection), "medhelm-xdist")

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

    # ------------------------------------------------------------------------------------------ hooks
    @pytest.hookimpl(trylast=True)
    def pytest_medhelm_model_spec(self, name: str, api_base: str | None, config: pytest.Config,
                                  role: str) -> ModelSpec:
        # the built-in resolution: any litellm string, local/... models, --medhelm-endpoint, the role's key variable
        from pytest_medhelm.models.endpoints import spec_for

        return spec_for(self.ctx.run_config, name, role)  # type: ignore[arg-type]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.ctx.role != WORKER and self.ctx.configured and self.ctx.run_config.local_only:
            from pytest_medhelm.run.preflight import check_local_only

            check_local_only(self.ctx)
        if self.ctx.role != WORKER and self.ctx.configured and self.ctx.run_config.models:
            # the cache directory refused (not the user's own, writable by others, damaged) before anything is
            # sent; the header then says where each model's answers come from and what the cache did
            from pytest_medhelm.run.preflight import identity_lines

            self._header = self.ctx.check_cache() + identity_lines(self.ctx)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return self._header

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        ctx = self.ctx
        uses_models = (not self.config.option.collectonly and ctx.configured and bool(ctx.run_config.models)
                       and has_medhelm_items(session.items))
        if uses_models and ctx.role != CONTROLLER and len(session.items) >= FREEZE_MIN_ITEMS:
            self._freeze()
        self.delivery.session = session
        if ctx.role == CENTRAL and ctx.configured:
            self.reporting.selected, self.reporting.planned = self.collection.selection(session.items)
        if uses_models and ctx.role == CENTRAL:
            planned = self.plan.answers([(case.instance, case.model) for _item, case in medhelm_items(session.items)])
            if ctx.run_config.dry_run:
                from pytest_medhelm.run.preflight import dry_run

                dry_run(ctx, planned, self._write_line)  # exits
            self.delivery.start(planned)
        interrupted = True
        try:
            result = yield
            interrupted = False
        except pytest.Session.Failed:  # -x, --maxfail: the run stopped by itself, not by Ctrl-C
            interrupted = False
            raise
        except KeyboardInterrupt as exc:
            if ctx.role != CONTROLLER or not str(exc).startswith(("stopping after", EVERY_MODEL_BROKEN)):
                raise  # Ctrl-C
            # xdist's Interrupted: -x / --maxfail, or a worker stopped because every model under test fails every
            # request: the run stopped by itself (the answers in flight are kept, the gates evaluated)
            interrupted = False
            self._stopped_early = True
            if str(exc) != EVERY_MODEL_BROKEN:
                raise
            session.shouldfail = EVERY_MODEL_BROKEN  # that is a run with errors (exit 1), not a Ctrl-C (exit 2)
            session.testsfailed = max(session.testsfailed, 1)
            result = True
        finally:
            self.delivery.finish(interrupted=interrupted)
            if ctx.role != WORKER and not interrupted and not self.config.option.collectonly:
                # (--collect-only measures nothing: no gates)
                self.reporting.finish()
                if self.reporting.gate_failed and session.testsfailed == 0:
                    # as pytest-cov's --cov-fail-under: the loop is over, so this still decides the exit status
                    session.testsfailed = 1
        return result

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.ctx.role != WORKER:
            self.reporting.terminal_summary(terminalreporter, config)
            failure = self.ctx.shared_cache_failure()
            if failure:
                terminalreporter.write_line(failure, yellow=True)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        try:
            if self.ctx.role != WORKER and self.ctx.configured:
                self.reporting.write_files(
                    interrupted=exitstatus == pytest.ExitCode.INTERRUPTED and not self._stopped_early)
        finally:
            self.ctx.close()  # (also when a report could not be written: the run's files still go)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # (the delivery normally finished when the loop ended; the servers stop even if it fails now)
        run_every_step([self.delivery.finish, self.ctx.stop_local_servers])

    # ------------------------------------------------------------------------------------------ helpers
    def _write_line(self, text: str, markup: dict | None = None) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(text, **(markup or {}))

    def _sender_finished(self) -> None:
        if self._controller is not None:
            self._controller.sender_finished()

    def _freeze(self) -> None:
        """Move everything collected into the garbage collector's permanent generation until the session ends.

        Thousands of items live until the end of the session anyway, and every full collection during the run
        (and pytest's five at the end) would walk all of them again: for 10,000 items that was 2 s of a 20 s
        re-run. Frozen objects are simply not scanned; they are handed back at the session's cleanup. Only for
        large runs: ``gc.get_referrers`` does not see frozen referrers, which a library checking for leaks (as
        Hypothesis's ``register_random`` does) could notice in a small run for no gain."""
        import gc

        if not self._frozen:
            gc.freeze()
            self._frozen = True

    def _unfreeze(self) -> None:
        if self._frozen:
            import gc

            gc.unfreeze()
            self._frozen = False
