"""What the user sees while items wait for a slow model (models/waiting.py): a plain line now and then in a log,
a status rewritten in place on a terminal, and pytest's own progress output intact. Against our test server with a
slow answer; the terminal case runs pytest in a real pseudo-terminal."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time

import pytest
from pytester_runs import run

from pytest_medhelm.sending import background, waiting


def _args(server, data, *extra: str) -> list[str]:
    return ["-p", "no:cacheprovider", "-p", "no:randomly", "--medhelm-model", "openai/toy-model",
            "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data), *extra]


def test_off_a_terminal_a_plain_line_says_what_is_awaited(pytester, toy, monkeypatch):
    from pytest_medhelm.testing.server import running_server

    data = toy(2)
    # the first line after 0.2 s rather than 5 s, said at one of the wait's ticks (every 0.1 s rather than every
    # second; the modules are this process's, the run in-process), well before the answer comes at 1 s; still one line
    # per item, PLAIN_EVERY (30 s) being far off
    monkeypatch.setattr(waiting, "PLAIN_FIRST", 0.2)
    monkeypatch.setattr(background, "WAIT_TICK_S", 0.1)
    wait = 1.0
    with running_server(answer="A", latency=wait) as server:
        result = run(pytester, *_args(server, data, "--medhelm-concurrency", "1"))
    assert result.ret == 0, result.stdout.str()[-2000:]
    # the first item waited longer than PLAIN_FIRST for its answer: one line said so, with the counts
    result.stdout.re_match_lines([r"medhelm: waiting \d+ s; answers 0/2$"])
    # then pytest's own progress goes on below it: the next item under its file name, the run's [100%]
    result.stdout.re_match_lines([r"medhelm: waiting \d+ s; answers 0/2$", r"^\.$", r"^test_toy\.py $",
                                  r"medhelm: waiting \d+ s; answers 1/2$", r"^m +\[100%\]$"])


def test_quick_answers_show_nothing(pytester, toy, server):
    data = toy(4)
    result = run(pytester, *_args(server, data))
    assert result.ret == 0
    assert "medhelm: waiting" not in result.stdout.str()


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal")
@pytest.mark.parametrize("plugins", [["-p", "no:sugar"], []], ids=["pytest", "with-sugar-if-installed"])
def test_on_a_terminal_the_status_is_rewritten_in_place_and_erased(pytester, toy, plugins):
    import pty

    from pytest_medhelm.testing.server import start_subprocess_server

    data = toy(2)
    # the status from the first tick of the wait loop rather than after 2 s, a tick every 0.1 s rather than every
    # second: each answer then takes 1.6 s, not 4.5 s, still long enough for ticks whose seconds differ (0 and 1:
    # rewritten, not printed once)
    with (pytester.path / "conftest.py").open("a") as conftest:
        conftest.write("\nfrom pytest_medhelm.sending import background, waiting\nwaiting.TTY_FIRST = 0.0\n"
                       "background.WAIT_TICK_S = 0.1\n")
    with start_subprocess_server(answer="A", latency=1.6) as server:
        master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *plugins,
                                 *_args(server, data, "--medhelm-concurrency", "1")],
                                cwd=pytester.path, stdin=slave, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        chunks = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its side
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
        proc.wait(timeout=30)
        os.close(master)
    raw = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, raw[-2000:]
    statuses = re.findall(r"  \[medhelm: waiting (\d+) s; answers (\d)/2\]", raw)
    assert statuses, raw[-2000:]
    assert len({s for s, _ in statuses}) >= 2  # rewritten as the seconds go by, not printed once
    # each status was erased with backspaces on the same line before pytest (or pytest-sugar) wrote again
    line = [text for text in raw.split("\n") if "test_toy.py" in text and "MISSED" not in text][-1]
    visible = _render(line)
    assert "medhelm: waiting" not in visible, visible
    if plugins:  # pytest's own line: the file, both letters, the progress column
        assert re.fullmatch(r"test_toy\.py [.m]{2} +\[100%\]", visible), visible
    else:
        assert "test_toy.py" in visible and "100%" in visible, visible


def _render(line: str) -> str:
    """What a terminal shows for ``line``: backspaces move the cursor back, later characters overwrite."""
    line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line)  # colours
    cells: list[str] = []
    pos = 0
    for ch in line:
        if ch == "\r":
            pos = 0
            continue
        if ch == "\b":
            pos = max(0, pos - 1)
            continue
        if pos < len(cells):
            cells[pos] = ch
        else:
            cells.append(ch)
        pos += 1
    return "".join(cells).rstrip()


