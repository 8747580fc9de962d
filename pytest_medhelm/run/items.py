"""The per-item hooks, all on one object (so that their number, paid by every item, does not grow).

* setup and call run with ``CURRENT_ITEM`` set, so that the fixtures and assertions find the item (and through
  its config, the run);
* a miss, a model error or a data error is reported in one line, without pytest's traceback formatting (which
  costs tens of milliseconds per item);
* the item's record (answer, accounting, score) rides on its report (``report.medhelm``), which xdist carries to
  the controller; records are handed to ``on_record`` in the process that reports (never in a worker);
* a miss is a measurement, not a failure: its report has pytest's own *xfail* outcome (``skipped`` with
  ``wasxfail = "MISSED: <expected vs got>"``), which every reporter already shows apart without knowing this plugin
  (JUnit XML ``<skipped type="pytest.xfail">`` with the message, pytest-html "XFailed", pytest-sugar) and which
  never fails the run; the terminal shows it as ``m``/MISSED and counts "missed". Under ``--medhelm-strict`` it
  fails. ``--lf`` selects misses again. The score is recorded as the JUnit property ``medhelm_score``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.item_api import CURRENT_ITEM, RECORD, TIMEOUT_SETTINGS, Missed, case_of

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.report.records import InstanceRecord
    from pytest_medhelm.run.context import RunContext


class ItemHooks:
    def __init__(self, ctx: RunContext, on_record: Callable[[pytest.TestReport, InstanceRecord], None]) -> None:
        self.ctx = ctx
        self.on_record = on_record
        #: the records this process built, by node id, until reported here (under xdist the controller reads the
        #: plain data the report carries through the models instead)
        self._built: dict[str, InstanceRecord] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        if RECORD in item.stash:  # a rerun (pytest-rerunfailures): the new attempt's own record and score
            del item.stash[RECORD]
            item.user_properties[:] = [p for p in item.user_properties if p[0] != "medhelm_score"]
        token = CURRENT_ITEM.set(item)
        try:
            return (yield)
        finally:
            CURRENT_ITEM.reset(token)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        token = CURRENT_ITEM.set(item)
        try:
            return (yield)
        finally:
            CURRENT_ITEM.reset(token)

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> None:
        """pytest-timeout armed the item's timer: keep its settings, so that the wait for the item's answer in the
        send queue can be left out of its time (Delivery pauses the timer while it waits)."""
        item.stash[TIMEOUT_SETTINGS] = settings

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A miss or a model/data error needs one line, not a traceback: the report is built here."""
        excinfo = call.excinfo
        if excinfo is None or case_of(item) is None:
            return None
        if not excinfo.errisinstance(one_line_errors()):
            return None
        error, when = excinfo.value, call.when
        if when == "collect":  # (items are not collected through this hook)
            return None
        longrepr = _one_line(error)
        sections = [(f"Captured {key} {when}", content) for rwhen, key, content in item._report_sections
                    if rwhen == when and content]
        return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed", longrepr,
                                 when, sections, call.duration, call.start, call.stop,
                                 user_properties=item.user_properties)

    # (pytest only reads hook implementations whose names start with "pytest_"; specname maps it to the hook)
    @pytest.hookimpl(wrapper=True, specname="pytest_runtest_makereport")
    def pytest_runtest_makereport_record(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        case = case_of(item)
        if case is None or case.deselected:
            return report
        skipped = call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception)
        written = item.stash.get(RECORD, None)
        if skipped and (written is None or written.not_scored is None):
            return report  # skipped while running (the budget, the test's own skip): nothing was measured
        if report.when == "call" or (report.failed and report.when == "setup"):
            self._attach_record(item, call, report, case)
        return report

    def _attach_record(self, item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport, case: Any) -> None:
        """The item's results record, built once from what its fixtures and assertions wrote (its typed
        :class:`~pytest_medhelm.item_record.ItemRecord`) and how it ended, rides on its report as plain data (xdist
        carries it; the controller reads it back through the same model)."""
        from pytest_medhelm.metrics.base import ScoringError
        from pytest_medhelm.report.records import INVALID_RECORD, InstanceRecord

        excinfo = call.excinfo
        error = excinfo.value if excinfo is not None else None
        outcome: dict[str, Any] = {"benchmark": case.benchmark, "model": case.model,
                                   "instance_id": case.instance.id if case.instance else None,
                                   "subset": case.instance.subset if case.instance else ""}
        if case.instance is not None and self.ctx.run_config.report_text:  # opt-in: may be patient data
            from pytest_medhelm.report.texts import instance_texts

            outcome.update(instance_texts(case.instance))
        if isinstance(error, Missed):
            outcome["missed"] = True
            missed = _one_line(error)
            if not self.ctx.run_config.strict:
                report.outcome = "skipped"
                report.wasxfail = missed  # (pytest's own attribute of an xfail)
            report.longrepr = missed  # the one line reporters print (pytest-html's log)
        elif excinfo is not None and isinstance(error, one_line_errors()):
            outcome.update(error=str(error), score=None, error_kind=type(error).__name__)
            if isinstance(error, ScoringError):
                outcome["judge_failures"] = error.reasons
            report.longrepr = _one_line(error)
        elif excinfo is not None and not excinfo.errisinstance(pytest.skip.Exception):
            outcome.update(error=f"{excinfo.typename}: {error}", score=None)
        # (the answer's thinking is opt-in, as the question: it may quote patient data)
        record = InstanceRecord.of_item(item.stash.get(RECORD, None), self.ctx.run_config.report_text, **outcome)
        if record.error_kind == INVALID_RECORD and not report.failed:  # its score was refused: nothing measured
            report.outcome = "failed"
            if hasattr(report, "wasxfail"):
                del report.wasxfail
            report.longrepr = f"{INVALID_RECORD}: {record.error}"
        if report.when == "call" or record.error is not None:
            report.medhelm = record.wire()  # type: ignore[attr-defined]  # (xdist carries report attributes)
            self._built[report.nodeid] = record
            if record.score is not None:
                # on the item: JUnit XML writes the properties of the item's last report (its teardown's)
                item.user_properties.append(("medhelm_score", record.score))
                report.user_properties.append(("medhelm_score", record.score))

    @pytest.hookimpl(tryfirst=True)  # before pytest's own, which would call a miss "xfailed"
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        rec = getattr(report, "medhelm", None)
        if rec is None or report.when != "call":
            return None
        if rec.get("missed"):
            if report.failed:  # --medhelm-strict
                return "failed", "M", ("MISSED", {"red": True})
            outcome: str = report.outcome  # pytest-rerunfailures sets "rerun", beyond pytest's own three
            if outcome == "rerun":
                return None
            return "missed", "m", ("MISSED", {"yellow": True})
        if rec.get("error_kind") and report.failed:  # a model, data or scoring error (any other is a failure)
            return "error", "E", ("ERROR", {"red": True})
        return None

    @pytest.hookimpl(trylast=True)  # after the cache plugin's own bookkeeping, which drops passed items
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = getattr(report, "medhelm", None)
        record = self._built.pop(report.nodeid, None)
        if rec is None or not self.ctx.role.reports:
            return
        if record is None:  # built in a worker
            from pytest_medhelm.report.records import InstanceRecord

            record = InstanceRecord.model_validate(rec)
        self.on_record(report, record)
        if rec.get("missed") and not report.failed:
            # a miss is selectable with --lf like a failure, without failing the run
            lf = self.ctx.config.pluginmanager.get_plugin("lfplugin")
            if lf is not None:
                lf.lastfailed[report.nodeid] = True


def one_line_errors() -> tuple[type[BaseException], ...]:
    """The item errors reported in one line: a model error, a data error, a scoring error (no judgement, a score
    that is not a number)."""
    from pytest_medhelm.data.errors import DataError
    from pytest_medhelm.metrics.base import ScoreNotANumber, ScoringError
    from pytest_medhelm.values import ModelError

    return (Missed, ModelError, DataError, ScoringError, ScoreNotANumber)


def _one_line(error: BaseException) -> str:
    """The line an item's miss or error is reported with (terminal, CI log, JUnit XML), with the control characters
    of any server's text in it escaped (a judge's failure reason quoting its reply, a data file's, a cache's): a
    miss's detail keeps its line breaks."""
    from pytest_medhelm.values import printable

    if isinstance(error, Missed):
        return printable(f"MISSED: {error.detail}", keep_breaks=True)
    return printable(f"{type(error).__name__}: {error}")
