"""Whole pytest runs inside a test (pytester): the one helper the plugin's tests start them with, and the
arguments of the two projects they run (the built-in suite, the toy benchmark)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pytest

#: ../shared/data beside the project (real public benchmark data); tests that need it skip when it is absent
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: the built-in suite, which the tests run as users run it
SUITE = Path(__file__).resolve().parents[1] / "benchmarks"
#: ``--medhelm-bertscore-model`` of the test runs that check nothing of BERTScore: it costs a run about 4 s (torch,
#: transformers and the model loaded in each process) and tests/metrics/test_bertscore.py checks it
NO_BERTSCORE = ("--medhelm-bertscore-model", "off")
#: the answer cache off: for a test whose runs in one project must each ask the server (its answers change between
#: them)
UNCACHED = ("--medhelm-cache", "off")

#: what every inner run leaves out: the pytest cache (no .pytest_cache written into the test's project),
#: pytest-randomly and pytest-benchmark when they are installed (an inner run's order and seeds are not what these
#: tests check; pytest-benchmark's options and summary are not the plugin's), and the
#: pytest plugins of two test extras that almost no inner run uses (EXTRAS_PLUGINS) but each new interpreter paid
#: for (each xdist worker too): anyio's imports its event-loop backends (trio's when installed) at load,
#: Hypothesis's imports Hypothesis and its entry points in every terminal summary; 0.3-0.5 s of CPU per interpreter
_ALWAYS_LEFT_OUT = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")
#: the two plugins of test extras above, which a run loads when its test names them (``run(..., plugins=...)``)
EXTRAS_PLUGINS = ("anyio", "hypothesispytest")
#: all of them as flags, for an inner session not started through run() (tests/catalogue/test_suite_modules.py)
INNER_RUN_FLAGS = (*_ALWAYS_LEFT_OUT, *(flag for name in EXTRAS_PLUGINS for flag in ("-p", f"no:{name}")))
#: the reporters and plugins users combine with ours (test extras), left out of an inner run unless its test names
#: them (``run(..., plugins=("html",))``): they cost each new interpreter 0.1 s of loading (jinja2 among them), in
#: the suite's ~550 interpreters, and most do nothing in a run that does not ask for them (no --html, --reruns,
#: --timeout); tests/run/test_outcomes.py runs ours with each of them for real, and with all of them loaded in both
#: modes (under xdist pytest-rerunfailures is not idle: it hands its workers a port of its own)
USERS_PLUGINS = ("html", "metadata", "sugar", "rerunfailures", "timeout")


def run(pytester: pytest.Pytester, *args: str, subprocess: bool = False,
        pytest_cache: bool = False, plugins: tuple[str, ...] = ()) -> pytest.RunResult:
    """pytest with ``args`` in ``pytester``'s project, in this process (fast; the conftest imports up front what
    an inner session must not import twice) or, with ``subprocess``, in a fresh interpreter (signals, the
    environment of a new process, sys.modules as a user's process starts with it). An inner xdist run (``-n N``)
    always runs in a fresh interpreter: its controller's cache connections, pipes and threads then live and end
    with a process of their own, as a user's do (in this process, one such run of the full suite once ended with
    its cache database unreadable, which no run in a process of its own has shown). ``pytest_cache`` keeps pytest's
    cache plugin for the tests of what reads it (``--lf``); ``plugins`` names those of USERS_PLUGINS the run
    loads (or of EXTRAS_PLUGINS)."""
    unknown = set(plugins) - {*USERS_PLUGINS, *EXTRAS_PLUGINS}
    assert not unknown, f"not one of USERS_PLUGINS or EXTRAS_PLUGINS: {sorted(unknown)}"
    if starts_xdist(args):
        subprocess = True
    # (the pytest cache is the first pair: kept for the tests of what reads it, --lf)
    always = _ALWAYS_LEFT_OUT[2:] if pytest_cache else _ALWAYS_LEFT_OUT
    left_out = [flag for name in (*EXTRAS_PLUGINS, *USERS_PLUGINS) if name not in plugins
                for flag in ("-p", f"no:{name}")]
    flags = (*always, *left_out, *args)
    if subprocess:
        return pytester.runpytest_subprocess(*flags)
    watch = _TorchWatch()
    result = pytester.runpytest(*flags, plugins=[watch])
    if watch.loaded and not torch_kept:
        pytest.fail("this in-process run loaded torch (it scored BERTScore), which must be imported before the "
                    "test's fixtures: mark the test @pytest.mark.loads_torch (tests/conftest.py), or turn BERTScore "
                    "off in its run (NO_BERTSCORE)", pytrace=False)
    return result


class _TorchWatch:
    """Tells whether an inner session imported torch (pytester drops what the session imported when it ends)."""

    loaded = False

    def pytest_unconfigure(self) -> None:
        self.loaded = "torch" in sys.modules


#: whether torch was imported before the running test's fixtures (set by tests/conftest.py before each test): only
#: then does pytester's snapshot of sys.modules, taken when its fixture is set up, keep it after the test
torch_kept = False


def before_fixtures(loads_torch: bool) -> None:
    """Before a test's fixtures (tests/conftest.py): bert-score and torch imported for a test marked
    ``loads_torch``, and whether torch is now in this process recorded for :func:`run`."""
    global torch_kept
    if loads_torch:
        try:
            import bert_score  # noqa: F401 - imported for the test process to keep (above)
            import torch  # noqa: F401 - imported for the test process to keep (above)
        except ImportError:  # without the [bertscore] extra nothing loads torch
            pass
    torch_kept = "torch" in sys.modules


def starts_xdist(args: Sequence[str]) -> bool:
    """Whether ``args`` start an inner xdist run (``-n N``, N not 0): for a test's xdist variant to tell itself from
    its serial one."""
    return "-n" in args[:-1] and args[list(args).index("-n") + 1] != "0"


class Served(Protocol):
    """A test server as the arguments below read it (pytest_medhelm.testing.server's, in process or not)."""

    @property
    def url(self) -> str: ...


def toy_args(server: Served, data: Path, *extra: str) -> list[str]:
    """The toy benchmark (tests/toy_benchmark.py, the ``toy`` fixture) run with the model ``openai/toy-model`` on
    ``server``, its data from ``data``; ``extra`` after these."""
    return ["--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
            *extra]


def suite_args(url: str, data: Path, benchmark: str, n: int, *extra: str,
               judges: tuple[str, ...] = ("openai/judge-a",), bertscore: str = "off") -> list[str]:
    """The built-in suite on ``n`` instances of ``benchmark``: the model ``openai/writer`` and the judges on our
    test server at ``url``, the data from ``data``, BERTScore with the model ``bertscore`` (off unless the test
    checks it); ``extra`` after these."""
    args = [str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base", url, "--medhelm-jury-api-base", url,
            "--medhelm-benchmark", benchmark, "--medhelm-max-instances", str(n), "--medhelm-data-dir", str(data),
            "--medhelm-bertscore-model", bertscore]
    for judge in judges:
        args += ["--medhelm-jury", judge]
    return [*args, *extra]
