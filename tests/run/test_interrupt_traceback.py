"""A Ctrl-C that lands on an instruction without a line number (CPython 3.11 and later give its traceback entry no
line) still ends the session as an interruption, exit status 2 with pytest's summary: in the process that reports
(the one process, xdist's controller), in an xdist worker, and in a session that runs no medhelm test. Without the
mend pytest's terminal reporter crashed on it (exit 1; under xdist a worker's crash was an INTERNALERROR, exit 3).
It happened on CI, the signal landing in pydantic building a record class."""

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


def traceback_without_a_line() -> TracebackType | None:
    """A traceback entry where a signal can land: on an instruction the compiler added (here the exception
    handler's entry), which has no line number; None on a Python whose code has no such instruction here."""
    try:
        pass
    except ValueError:
        pass
    frame = sys._getframe()
    offsets = [start for start, _end, line in frame.f_code.co_lines() if line is None]
    return TracebackType(None, frame, offsets[0], -1) if offsets else None


def no_line_traceback() -> TracebackType:
    tb = traceback_without_a_line()
    if tb is None or tb.tb_lineno is not None:
        pytest.skip("this Python gives every instruction of the test's function a line number")
    return tb


#: the interruption where a process of the run meets it: the one that reports while it records an item's report
#: (the one process, or xdist's controller: as on CI), or a worker while it runs an item. (Which process this is
#: comes from its configuration: PYTEST_XDIST_WORKER is inherited from the suite's own worker.)
INTERRUPT_WITHOUT_A_LINE = "import sys\nfrom types import TracebackType\n\n\n" + inspect.getsource(
    traceback_without_a_line) + textwrap.dedent('''
    WHERE = {}

    def pytest_configure(config):
        WHERE["worker"] = hasattr(config, "workerinput")

    def pytest_runtest_logreport(report):
        if report.when == "call" and not WHERE["worker"] and INTERRUPTED_IN == "reporting":
            raise KeyboardInterrupt().with_traceback(traceback_without_a_line())

    def pytest_runtest_call(item):
        if WHERE["worker"] and INTERRUPTED_IN == "worker":
            raise KeyboardInterrupt().with_traceback(traceback_without_a_line())
''')


@pytest.mark.e2e  # (in a process of its own: pytester's in-process run raises an inner Ctrl-C again)
@pytest.mark.parametrize("mode, where", [
    pytest.param(["-p", "no:xdist"], "reporting", id="serial"),
    pytest.param(["-n", "2"], "reporting", id="xdist-controller"),
    pytest.param(["-n", "2"], "worker", id="xdist-worker"),
])
def test_a_ctrl_c_whose_traceback_has_an_entry_without_a_line_ends_as_an_interruption(pytester, toy, mode, where):
    no_line_traceback()
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + INTERRUPT_WITHOUT_A_LINE + f"\nINTERRUPTED_IN = {where!r}\n")
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = run(pytester, *toy_args(server, data, "--medhelm-json", str(out), *mode), subprocess=True)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "TypeError" not in output and "INTERNALERROR" not in output, output
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*" if where == "reporting" else "*received keyboard-interrupt*"])
    assert json.loads(out.read_text())["run"]["interrupted"] is True  # the results say so, as for any Ctrl-C


@pytest.mark.e2e  # (a process of its own, as above)
def test_a_session_without_a_medhelm_test_interrupted_so_ends_as_an_interruption(pytester):
    """The run starts with its first medhelm test; a Ctrl-C in a session that has none is mended all the same."""
    no_line_traceback()
    pytester.makeconftest("import sys\nfrom types import TracebackType\n\n\n" + inspect.getsource(
        traceback_without_a_line) + textwrap.dedent('''
        def pytest_runtest_call(item):
            raise KeyboardInterrupt().with_traceback(traceback_without_a_line())
    '''))
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = run(pytester, "-p", "no:xdist", subprocess=True)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "TypeError" not in output, output
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "*conftest.py*"])


def test_an_entry_without_a_line_gets_the_line_before_it_and_every_frame_is_kept_in_order():
    def raising():
        raise KeyboardInterrupt

    no_line = no_line_traceback()
    try:
        raising()
    except KeyboardInterrupt as exc:
        assert exc.__traceback__ is not None and exc.__traceback__.tb_next is not None
        exc.__traceback__.tb_next.tb_next = no_line  # (the innermost entry: as a signal's)
        context = ValueError("before")
        context.__traceback__ = no_line_traceback()
        exc.__context__ = context
        excinfo = pytest.ExceptionInfo.from_exception(exc)
    before = [(e.tb_frame, e.tb_lasti, e.tb_lineno) for e in walk(excinfo.tb)]
    give_every_entry_a_line(excinfo)

    after = [(e.tb_frame, e.tb_lasti, e.tb_lineno) for e in walk(excinfo.value.__traceback__)]
    assert [frame for frame, _, _ in after] == [frame for frame, _, _ in before]  # every frame, in order
    assert after[:2] == before[:2]  # the entries that had a line are as they were
    source, first = inspect.getsourcelines(traceback_without_a_line)
    in_try = first + next(i for i, text in enumerate(source) if text.strip() == "pass")  # (before the handler)
    assert after[2][1:] == (-1, in_try)  # (its line was None)
    assert [e.lineno + 1 for e in excinfo.traceback] == [line for _, _, line in after]  # what pytest reads
    assert [e.tb_lineno for e in walk(excinfo.value.__context__.__traceback__)] == [in_try]
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))  # what pytest's reporter calls


def walk(tb: TracebackType | None) -> list[TracebackType]:
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    return entries
