"""A Ctrl-C that lands on an instruction without a line number (CPython 3.11 gives its traceback entry no line)
still ends the run as an interruption, exit status 2 with pytest's summary, in the process that reports: not as a
crash of pytest's terminal reporter (it happened on CI, the signal landing in pydantic building a record class)."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
from types import TracebackType

import pytest
from pytester_runs import run, toy_args
from toy_benchmark import TOY_CONFTEST

from pytest_medhelm.run.interrupt_traceback import give_every_entry_a_line
from pytest_medhelm.testing.server import running_server


def traceback_without_a_line() -> TracebackType:
    """A traceback entry where a signal can land: on an instruction the compiler added (here the exception
    handler's), which has no line number."""
    try:
        pass
    except ValueError:
        pass
    frame = sys._getframe()
    offset = next(start for start, _end, line in frame.f_code.co_lines() if line is None)
    return TracebackType(None, frame, offset, -1)


#: the interruption as the controller (or the one process) meets it while it records an item's report
INTERRUPT_WITHOUT_A_LINE = "import sys\nfrom types import TracebackType\n\n\n" + inspect.getsource(
    traceback_without_a_line) + textwrap.dedent('''
    ON_A_WORKER = []

    def pytest_configure(config):
        ON_A_WORKER.append(hasattr(config, "workerinput"))

    def pytest_runtest_logreport(report):
        if report.when == "call" and not ON_A_WORKER[0]:
            raise KeyboardInterrupt().with_traceback(traceback_without_a_line())
''')


def no_line_traceback() -> TracebackType:
    tb = traceback_without_a_line()
    assert tb.tb_lineno is None  # (what the test stands on: such an entry exists on this Python)
    return tb


@pytest.mark.e2e  # (in a process of its own: pytester's in-process run raises an inner Ctrl-C again)
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"), pytest.param(["-n", "2"], id="xdist")])
def test_a_ctrl_c_whose_traceback_has_an_entry_without_a_line_ends_as_an_interruption(pytester, toy, mode):
    no_line_traceback()
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + INTERRUPT_WITHOUT_A_LINE)
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = run(pytester, *toy_args(server, data, "--medhelm-json", str(out), *mode), subprocess=True)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "TypeError" not in output, output
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "*conftest.py*"])
    assert json.loads(out.read_text())["run"]["interrupted"] is True  # the results say so, as for any Ctrl-C


def test_an_entry_without_a_line_gets_its_functions_first_line_and_the_rest_is_kept():
    def raising():
        raise KeyboardInterrupt

    try:
        raising()
    except KeyboardInterrupt as exc:
        exc.__traceback__.tb_next.tb_next = no_line_traceback()  # (the innermost entry: as a signal's)
        context = ValueError("before")
        context.__traceback__ = no_line_traceback()
        exc.__context__ = context
        excinfo = pytest.ExceptionInfo.from_exception(exc)
    give_every_entry_a_line(excinfo)
    entries = list(excinfo.traceback)
    assert [e.lineno + 1 for e in entries[:2]] == [
        test_an_entry_without_a_line_gets_its_functions_first_line_and_the_rest_is_kept.__code__.co_firstlineno + 5,
        raising.__code__.co_firstlineno + 1]
    first_line = traceback_without_a_line.__code__.co_firstlineno
    assert entries[2].lineno + 1 == first_line  # (it was None)
    assert excinfo.value.__context__.__traceback__.tb_lineno == first_line
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))  # what pytest's reporter calls
