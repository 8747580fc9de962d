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
import os
import sys
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from pytest_medhelm.run.collection import asked_pairs, has_medhelm_items
from pytest_medhelm.run.context import Handover, run_every_step
from pytest_medhelm.run.session import Run

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

    from pytest_medhelm.values import ModelSpec

#: from this many collected items on, the collected objects are frozen out of the garbage collector's scans
FREEZE_MIN_ITEMS = 1000

_exit_freeze_registered = False


def freeze_at_exit(config: pytest.Config) -> None:
    """Have this process, when it exits, collect the garbage it made since its last freeze, flush its open files,
    then freeze what is still alive; only when the process is pytest's own (``__main__`` is pytest, or an xdist
    worker), never in a script that calls ``pytest.main`` and goes on.

    The interpreter's finalization walks every object still alive in several full collections while it tears the
    modules down: in a 2,000-item run that was 0.25-0.45 s between the last exit handler and the process's end
    (0.03 s with everything frozen). The session of such a process keeps what it froze frozen to the end
    (:meth:`Role._unfreeze`), so the one collection here walks only what was made after (a full one walked all
    158,000 objects of a 2,000-item run: 0.11 s): the finalizers of that garbage still run. The files still open,
    frozen or not, are flushed, as their finalizers would have done (one kept alive by a reference cycle is
    otherwise never finalized once frozen); the finalizers of other objects still alive at exit, or frozen while
    alive, are not run, which Python does not promise either. Exit handlers registered earlier (logging's flush)
    still run after it."""
    global _exit_freeze_registered
    from pytest_medhelm.options import is_xdist_worker

    # pytest's own command (``pytest``, ``python -m pytest``, ``coverage run -m pytest``), or an xdist worker; not a
    # script that calls pytest.main and goes on
    main = sys.modules.get("__main__")
    own_process = is_xdist_worker(config) or (
        getattr(getattr(main, "__spec__", None), "name", "") == "pytest.__main__"
        or os.path.basename(getattr(sys, "argv", [""])[0]).lower().startswith(("pytest", "py.test")))
    if _exit_freeze_registered or not own_process:
        return
    import atexit

    atexit.register(_collect_flush_freeze)
    _exit_freeze_registered = True


def _collect_flush_freeze() -> None:
    import gc

    try:
        if gc.isenabled():  # (a program that turned the collector off keeps it off)
            gc.collect()  # (what is frozen is skipped)
        gc.unfreeze()  # (two list splices) so that the frozen files are found too
        _flush_open_files(gc.get_objects())
    except Exception:  # noqa: BLE001 - anything odd: the process ends as Python ends it, unfrozen
        return
    gc.freeze()


def nested_session() -> bool:
    """Whether the pytest session now ending runs inside another one of this process (as pytester's in-process
    runs do): pytest's session wrapper (``_pytest.main.wrap_session``) is on the stack more than once. When the
    wrapper is not found at all (a pytest that renamed it), the session is taken as nested: what it froze is then
    given back, as for a caller that goes on."""
    frame: FrameType | None = sys._getframe(1)
    sessions = 0
    while frame is not None:
        code = frame.f_code
        sessions += code.co_name == "wrap_session" and frame.f_globals.get("__name__") == "_pytest.main"
        frame = frame.f_back
    return sessions != 1


def _flush_open_files(objects: list[Any]) -> None:
    """Flush every file object open for writing on a regular file (a pipe or a socket is left to its own end: a
    reader that is gone or slow must not hold the exit). A file object here is an instance of a real subclass of
    io's C base, whose finalizer is the one that flushes (a class only registered with ``io.IOBase`` has none);
    objects are told apart by their type only, in C loops: ``isinstance`` would ask a proxy for its ``__class__``
    (a dead weak proxy raises) and ``io.IOBase``'s ABC check costs tens of microseconds per type (40 ms of a
    2,000-item run's exit, against 15 ms)."""
    import _io
    import functools
    import itertools
    import stat

    is_file_type = functools.partial(type.__subclasscheck__, _io._IOBase)  # (never asks a metaclass)
    file_types = {kind for kind in set(map(type, objects)) if is_file_type(kind)}
    for obj in list(itertools.compress(objects, map(file_types.__contains__, map(type, objects)))):
        try:
            if not obj.closed and obj.writable() and stat.S_ISREG(os.fstat(obj.fileno()).st_mode):
                obj.flush()
        except Exception:  # noqa: BLE001 - a file that cannot be flushed now would not have been at exit either
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
        self._frozen = False
        # registered now, before pytest's own plugins register theirs, so that it runs after them: the session's
        # last full garbage collections (pytest's unraisable-exception check) still skip the frozen items
        config.add_cleanup(self._unfreeze)

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
        failure = self.ctx.shared_cache_failure()
        if failure:
            terminalreporter.write_line(failure, yellow=True)

    def end_session(self, session: pytest.Session, exitstatus: int) -> None:
        if self.ctx.configured:
            self.run.reporting.write_files(
                interrupted=exitstatus == pytest.ExitCode.INTERRUPTED and self.stopped_early is None)

    # ------------------------------------------------------------------------------------------ hooks
    @pytest.hookimpl(trylast=True)
    def pytest_medhelm_model_spec(self, name: str, api_base: str | None, config: pytest.Config,
                                  role: str) -> ModelSpec:
        # the built-in resolution: any litellm string, local/... models, --medhelm-endpoint, the key variable of
        # the model's part in the run (``role``: a model under test or a judge)
        from pytest_medhelm.models.endpoints import spec_for

        return spec_for(self.ctx.run_config, name, role)  # type: ignore[arg-type]  # the hookspec's str: "model" or "judge"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.check_start()
        self.while_collecting()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return self._header

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        self.run.delivery.session = session
        if self.reports and self.asks_models():
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
            self.freeze_again()
            if not interrupted and not self.config.option.collectonly:  # (--collect-only measures nothing)
                self.after_items(session)
                self.freeze_again()  # (the results just built live until the end too)
        return result

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        self.summarize(terminalreporter, config)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        try:
            self.end_session(session, exitstatus)
        finally:
            self.ctx.close()  # (also when a report could not be written: the run's files still go)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # (the delivery normally finished when the loop ended; the servers stop even if it fails now)
        run_every_step([self.run.delivery.finish, self.ctx.stop_local_servers])

    # ------------------------------------------------------------------------------------------ helpers
    def asks_models(self) -> bool:
        """Whether this session asks models anything (a run with models, not a dry run, not ``--collect-only``)."""
        ctx = self.ctx
        return (ctx.configured and bool(ctx.run_config.models) and not ctx.run_config.dry_run
                and not self.config.option.collectonly)

    def uses_models(self, session: pytest.Session) -> bool:
        ctx = self.ctx
        return (not self.config.option.collectonly and ctx.configured and bool(ctx.run_config.models)
                and has_medhelm_items(session.items))

    def freeze_if_large(self, items: int) -> None:
        """In a run of ``items`` items (or more), move everything alive into the garbage collector's permanent
        generation until the session ends.

        Thousands of items live until the end of the session anyway, and every full collection during the run
        (and pytest's five at the end) would walk all of them again: for 10,000 items that was 2 s of a 20 s
        re-run. Frozen objects are simply not scanned; they are handed back at the session's cleanup (and the
        process's exit is lighter too: :func:`freeze_at_exit`). Only for
        large runs: ``gc.get_referrers`` does not see frozen referrers, which a library checking for leaks (as
        Hypothesis's ``register_random`` does) could notice in a small run for no gain."""
        if items < FREEZE_MIN_ITEMS or self._frozen:
            return
        import gc

        gc.freeze()
        self._frozen = True
        freeze_at_exit(self.config)

    def freeze_again(self) -> None:
        """Once the items have run, what they made (reports, records), and then the results built from it, also
        live until the end: frozen too, the last full collections (one while the results are built, pytest's five
        at its end) skip them: 0.15-0.2 s of a 2,000 item run (measured with gc.callbacks)."""
        if self._frozen:
            import gc

            gc.freeze()

    def _unfreeze(self) -> None:
        """At the session's cleanup, what it froze is given back to the garbage collector, unless the process ends
        with the session: pytest's own process (:func:`freeze_at_exit`), not a session nested in another. There the
        exit handler collects only what was made since, instead of walking everything again (0.11 s of a 2,000-item
        run)."""
        if self._frozen and not (_exit_freeze_registered and not nested_session()):
            import gc

            gc.unfreeze()
            self._frozen = False


class Central(Role):
    """No xdist: this process does everything."""

    def before_items(self, session: pytest.Session) -> None:
        run, ctx = self.run, self.ctx
        uses_models = self.uses_models(session)
        if uses_models:
            self.freeze_if_large(len(session.items))
        if ctx.configured:
            run.reporting.selected, run.reporting.planned = run.collection.selection(session.items)
        if uses_models:
            planned = run.plan.answers(asked_pairs(session.items))
            if ctx.run_config.dry_run:
                from pytest_medhelm.run.preflight import dry_run

                dry_run(ctx, planned, run.write_line)  # exits
            run.delivery.start(planned)
