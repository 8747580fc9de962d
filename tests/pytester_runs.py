"""Whole pytest runs inside a test (pytester): the one helper the plugin's tests start them with."""

from __future__ import annotations

import pytest

#: what every inner run leaves out: the pytest cache (no .pytest_cache written into the test's project),
#: pytest-randomly when it is installed (an inner run's order and seeds are not what these tests check), and the
#: pytest plugins of two test extras that no inner run uses but each new interpreter paid for (each xdist worker
#: too): anyio's imports its event-loop backends (trio's when installed) at load, Hypothesis's imports Hypothesis
#: and its entry points in every terminal summary; 0.3-0.5 s of CPU per interpreter together
INNER_RUN_FLAGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:anyio", "-p", "no:hypothesispytest")


def run(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> pytest.RunResult:
    """pytest with ``args`` in ``pytester``'s project, in this process (fast; the conftest imports up front what
    an inner session must not import twice) or, with ``subprocess``, in a fresh interpreter (signals, the
    environment of a new process, sys.modules as a user's process starts with it). An inner xdist run (``-n N``)
    always runs in a fresh interpreter: its controller's cache connections, pipes and threads then live and end
    with a process of their own, as a user's do (in this process, one such run of the full suite once ended with
    its cache database unreadable, which no run in a process of its own has shown)."""
    flags = list(args)
    if "-n" in flags[:-1] and flags[flags.index("-n") + 1] != "0":
        subprocess = True
    runner = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    return runner(*INNER_RUN_FLAGS, *args)
