"""The role of this pytest process in the run: one object, chosen once when the run starts, registered as the run's
pytest plugin (``medhelm-run``); every hook of the run is a method of it (as pytest-cov's Central, DistMaster and
DistWorker).

* :class:`Central` (no xdist): this process collects, plans, sends, runs the items, aggregates and reports;
* :class:`~pytest_medhelm.run.xdist.Controller` (xdist's controlling process): it sends the answers the workers'
  items wait for, aggregates and reports, and runs no item;
* :class:`~pytest_medhelm.run.xdist.Worker` (an xdist worker): it collects, runs items, and reads the answers from
  the shared cache; it neither sends the planned answers nor reports.

What the roles share is :class:`Role`; what differs is in the methods each one overrides (what happens before the
items, after them, when the loop is interrupted), and in three traits the run's rooms read (:class:`~.context.
ProcessRole`). No code of the run asks which role it is in.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from pytest_medhelm.run.collection import asked_pairs, has_medhelm_items
from pytest_medhelm.run.context import Handover, run_every_step
from pytest_medhelm.run.garbage import CollectorPolicy
from pytest_medhelm.run.session import Run
from pytest_medhelm.values import printable

if TYPE_CHECKING:  # pragma: no cover
    pass


class StoppedEarly(enum.Enum):
    """How a loop that stopped before its last item stopped by itself (not by Ctrl-C)."""

    MAXFAIL = "-x / --maxfail"
    EVERY_MODEL_BROKEN = "every model under test fails every request"


class Role:
    """What every process of a run does; the subclasses say what differs."""

    sends_answers: ClassVar[bool] = True
    reports: ClassVar[bool] = True
    runs_items: ClassVar[bool] = True

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.run = Run(config, self, self.handover(), on_sender_finished=self.sender_finished)
        self.ctx = self.run.ctx
        #: set when the loop stopped before its last item by itself (the results are then not "interrupted")
        self.stopped_early: StoppedEarly | None = None
        self._header: list[str] = []  # start-up lines: the cache, the shared cache, each model's endpoint
        self.collector = CollectorPolicy(config)
        # registered now, before pytest's own plugins register theirs, so that it runs after them: the session's
        # last full garbage collections (pytest's unraisable-exception check) still skip the frozen items
        config.add_cleanup(self.collector.at_cleanup)

    def handover(self) -> Handover:
        """The run's identity: a new one (the workers get theirs from the controller)."""
        return Handover.new()

    def register(self) -> None:
        pm = self.config.pluginmanager
        pm.register(self, "medhelm-run")
        pm.register(self.run.collection, "medhelm-collection")
        pm.register(self.run.items, "medhelm-items")
        self.register_reporting()

    def register_reporting(self) -> None:
        """The plugins of the process that reports: saved runs and comparisons (when one of their options is set)."""
        from pytest_medhelm.compare.plugin import register

        register(self.config)

    # ------------------------------------------------------------------------------------------ what differs
    def check_start(self) -> None:
        """At the session's start, before anything is sent: the checks of the process that sends."""
        ctx = self.ctx
        if ctx.configured and ctx.run_config.local_only:
            from pytest_medhelm.run.preflight import check_local_only

            check_local_only(ctx)
        if ctx.configured and ctx.run_config.models:
            # the cache directory refused (not the user's own, writable by others, damaged) before anything is
            # sent; the header then says where each model's answers come from and what the cache did
            from pytest_medhelm.run.preflight import identity_lines

            self._header = ctx.check_cache() + identity_lines(ctx)

    def while_collecting(self) -> None:
        """At the session's start, once the start checks passed: what this process does while the items are
        collected (here or, under xdist, by the workers)."""

    def before_items(self, session: pytest.Session) -> None:
        """When the items are collected, before the first one runs."""

    def after_items(self, session: pytest.Session) -> None:
        """When the loop ended by itself (its last item, ``-x``, ``--maxfail``): results, gates."""
        self.run.reporting.finish()
        if self.run.reporting.gate_failed and session.testsfailed == 0:
            # as pytest-cov's --cov-fail-under: the loop is over, so this still decides the exit status
            session.testsfailed = 1

    def stop_reason(self, session: pytest.Session) -> StoppedEarly | None:
        """Why a KeyboardInterrupt ended the loop, when it was not Ctrl-C (None: it was)."""
        return None

    def sender_finished(self) -> None:
        """Called by the sender when nothing more will be sent (or at once, when there is nothing to send)."""

    def summarize(self, terminalreporter: Any, config: pytest.Config) -> None:
        self.run.reporting.terminal_summary(terminalreporter, config)
        for line in self.ctx.shared_cache_lines() if self.ctx.configured else []:
            terminalreporter.write_line(printable(line), yellow=True)  # (a Redis server's text among it: escaped)

    def end_session(self, session: pytest.Session, exitstatus: int) -> None:
        if self.ctx.configured:
            self.run.reporting.write_files(
                interrupted=exitstatus == pytest.ExitCode.INTERRUPTED and self.stopped_early is None)

    # ------------------------------------------------------------------------------------------ hooks
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.check_start()
        self.while_collecting()

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session):
        if self.ctx.configured:  # (thousands of items may come: run/garbage.py)
            self.collector.before_collection()
        try:
            return (yield)
        finally:
            self.collector.release_full_collections()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return self._header

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        self.run.delivery.session = session
        if self.reports and self.asks_models():
            if self.sends_answers and self.runs_items:  # (the items' answers are sent from here too)
                self.run.reporting.prefetch_at_first_record()
            else:
                self.run.reporting.prefetch()
        self.before_items(session)
        interrupted = True
        try:
            result = yield
            interrupted = False
        except pytest.Session.Failed:  # -x, --maxfail: the run stopped by itself, not by Ctrl-C
            interrupted = False
            raise
        except KeyboardInterrupt:
            reason = self.stop_reason(session)
            if reason is None:
                raise  # Ctrl-C
            # the run stopped by itself (the answers in flight are kept, the gates evaluated)
            interrupted = False
            self.stopped_early = reason
            if reason is not StoppedEarly.EVERY_MODEL_BROKEN:
                raise
            from pytest_medhelm.run.delivery import EVERY_MODEL_BROKEN

            session.shouldfail = EVERY_MODEL_BROKEN  # that is a run with errors (exit 1), not a Ctrl-C (exit 2)
            session.testsfailed = max(session.testsfailed, 1)
            result = True
        finally:
            self.run.delivery.finish(interrupted=interrupted)
            self.collector.release_full_collections()
            self.collector.freeze_again()
            if not interrupted and not self.config.option.collectonly:  # (--collect-only measures nothing)
                self.after_items(session)
                self.collector.freeze_again()  # (the results just built live until the end too)
        return result

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        self.summarize(terminalreporter, config)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.plans_answers():  # (a run of ours) registered now: it runs before pytest's own cleanups (LIFO)
            self.config.add_cleanup(self.collector.freeze_for_the_end)
        try:
            self.end_session(session, exitstatus)
        finally:
            self.ctx.close()  # (also when a report could not be written: the run's files still go)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # (the delivery normally finished when the loop ended; the servers stop even if it fails now)
        run_every_step([self.run.delivery.finish, self.ctx.stop_local_servers])

    # ------------------------------------------------------------------------------------------ helpers
    def plans_answers(self) -> bool:
        """Whether this session plans what to ask models (a run with models, not ``--collect-only``); a dry run
        does, and stops there."""
        ctx = self.ctx
        return ctx.configured and bool(ctx.run_config.models) and not self.config.option.collectonly

    def asks_models(self) -> bool:
        """Whether this session asks models anything: it plans answers and is not a dry run."""
        return self.plans_answers() and not self.ctx.run_config.dry_run

    def uses_models(self, session: pytest.Session) -> bool:
        """Whether this session plans answers for items of its own (collected here; a dry run included)."""
        return self.plans_answers() and has_medhelm_items(session.items)


class Central(Role):
    """No xdist: this process does everything."""

    def before_items(self, session: pytest.Session) -> None:
        run, ctx = self.run, self.ctx
        uses_models = self.uses_models(session)
        if uses_models:
            self.collector.freeze_if_large(len(session.items))
        if ctx.configured:
            run.reporting.selected, run.reporting.planned = run.collection.selection(session.items)
        if uses_models:
            planned = run.plan.answers(asked_pairs(session.items))
            if ctx.run_config.dry_run:
                from pytest_medhelm.run.preflight import dry_run

                dry_run(ctx, planned, run.write_line)  # exits
            run.delivery.start(planned)
