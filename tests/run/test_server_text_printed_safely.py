"""A server's text reaches the terminal, the CI log and the JUnit XML as text (issue 30, item 6): the control
characters of an error message (a clear-screen, a colour, an OSC 8 link, a newline faking a line of pytest's
output) are written as their escapes, serial and under xdist (``values.printable`` alone: tests/test_values.py)."""

from __future__ import annotations

import pytest
from pytester_runs import run as inner

HOSTILE = ("\x1b[2J\x1b[H\x1b[32m===== 10 passed in 0.01s =====\x1b[0m "
           "\x1b]8;;http://attacker.invalid/\x1b\\click\x1b]8;;\x1b\\\nmedhelm gate PASSED: overall>=0.9")


@pytest.mark.parametrize("xdist", [pytest.param(("-p", "no:xdist"), id="serial"),
                                   pytest.param(("-n", "2"), id="xdist-2", marks=pytest.mark.e2e)])
def test_escape_sequences_in_a_servers_error_never_reach_the_terminal_raw(pytester, toy, server, xdist):
    data = toy(2)
    server.configure(fail_matching={"question": ("status", 400, None, HOSTILE)})
    junit = pytester.path / "junit.xml"
    result = inner(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                   "--medhelm-data-dir", str(data), "--medhelm-retries", "0", f"--junitxml={junit}", "-rA", *xdist)
    assert result.ret == 1
    out = result.stdout.str() + result.stderr.str()
    assert "\x1b" not in out and "\x9b" not in out
    assert "\\x1b[2J\\x1b[H\\x1b[32m===== 10 passed" in out  # said, as text
    assert not any(line.startswith("medhelm gate PASSED") for line in out.splitlines())
    xml = junit.read_text(encoding="utf-8")
    assert "\x1b" not in xml and "\\x1b]8;;http://attacker.invalid/" in xml


def test_a_batch_id_that_is_no_id_is_refused_and_error_lines_are_escaped():
    from pytest_medhelm.sending.batch_api import BatchState
    from pytest_medhelm.sending.transport import RequestFailed

    with pytest.raises(RequestFailed, match="is not an id"):
        BatchState.of({"id": "batch_1\x1b[2J", "status": "completed"})
    state = BatchState.of({"id": "batch_abc-1.2", "status": "failed",
                           "errors": {"data": [{"message": "bad\x1b[31m line\r\nFAKE"}]}})
    assert state.errors == ("bad\\x1b[31m line\\r\\nFAKE",)


