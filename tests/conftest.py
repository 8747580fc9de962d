"""Shared fixtures of the plugin's own tests: our OpenAI-compatible test server, the shared data, a toy benchmark."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

# pytester's in-process runs drop every module the inner session imported; numpy's C core cannot be imported twice
# in one process, so what the plugin imports lazily is imported here once, before any inner session.
import aiohttp  # noqa: F401 - imported once here, before any inner session (above)
import diskcache  # noqa: F401 - imported once here, before any inner session (above)
import numpy.fft  # noqa: F401 - a C extension too; first imported lazily, by an inner session or not
import pydantic  # noqa: F401 - imported once here, before any inner session (above)
import pytest
import pytester_runs
import tabulate  # noqa: F401 - imported once here, before any inner session (above)
from fuzzing import choose_budget
from pytester_runs import SHARED_DATA
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows, write_toy_data

# The suite starts hundreds of interpreters (pytester's subprocess runs, their xdist workers, test servers). Under
# PYTHONDONTWRITEBYTECODE (set on CI's machine) each of them would compile every module it imports from source and
# rewrite every pytest plugin's modules again (pytest caches rewritten modules only where bytecode is written): about
# 0.7 s of each interpreter's start. The suite's interpreters write bytecode, as on a developer's machine; a test
# that measures a cold start sets the variable for its own processes (tests/perf/bench_processes.py).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Never the network from a test: the Hugging Face client reads these two when it is first imported (below).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _import_before_inner_sessions() -> None:
    """What must be imported in this process before any in-process pytester run (each reason below)."""
    # The importlib_metadata backport (imported by litellm._version) appends its finder to sys.meta_path and
    # deletes find_distributions from the stdlib PathFinder class when it is first imported. pytester restores
    # sys.meta_path after each in-process run but cannot undo the class patch: if litellm is first imported inside an
    # inner session (a dry run counts tokens with it), no finder is left that finds distributions, importlib.metadata
    # sees no installed package, and every later in-process run in this worker loads no pytest11 plugin (--medhelm-*
    # options are "unrecognized arguments", exit 4). Imported here, before any inner session, its finder is part of
    # what pytester restores. (A user calling pytest.main twice is not affected: nothing restores sys.meta_path.)
    try:
        import importlib_metadata  # noqa: F401 - imported for its side effect, before any inner session
    except ImportError:  # not installed: nothing patches PathFinder then
        pass

    # litellm too, as the plugin imports it: first imported inside an inner session, it (with pydantic-settings and
    # the rest of what it loads) is dropped when that session ends, and importing it again in the same process
    # breaks on pydantic's half-kept state ("tuple.index(x): x not in tuple" at start-up) or crashes the worker
    # outright; the full suite hid it only because some earlier test happened to import it at the outer level.
    from pytest_medhelm.thirdparty import import_litellm
    import_litellm()

    # and every module of the plugin: one first imported inside an inner session is dropped at its end, but its
    # package keeps the attribute naming it, so a test's later ``from pytest_medhelm.cache import shared``
    # got the dropped module while the plugin imported a new one, and the test patched a module nobody used (a test
    # failed so, depending on which tests ran before it in its worker); and each in-process run imported again what
    # the run imports lazily. (So a module of the package must import an optional extra lazily, as they all do:
    # at its top, it would stop every session here; and state a module keeps, a "said once" flag, now outlives an
    # inner session: the tests that read such state reset it.)
    import importlib
    import pkgutil

    import pytest_medhelm

    for module in pkgutil.walk_packages(pytest_medhelm.__path__, "pytest_medhelm."):
        if not module.name.endswith(".__main__"):  # (a command: importing it runs it)
            importlib.import_module(module.name)

    # and Hypothesis (a test extra): its pytest plugin imports it in every session's terminal summary, which in an
    # inner in-process session meant importing it again each time (it is dropped at the session's end), and with it
    # every installed package's "hypothesis" entry point (trio's, when installed): 0.3 s idle, seconds on a loaded
    # machine, per in-process run.
    try:
        import hypothesis  # noqa: F401 - imported once here, before any inner session (above)
    except ImportError:  # hypothesis is a test extra
        pass


def pytest_configure(config: pytest.Config) -> None:
    choose_budget(config)  # (before the test modules' decorators read it)
    # (before any test: a session that runs none skips these seconds of imports: one that only collects, as the
    # tier guard's collection of the whole suite (tests/test_tiers.py), and xdist's controller, whose seconds here
    # would hold back the start of its workers)
    from pytest_medhelm.options import starts_xdist_workers

    if not config.option.collectonly and not starts_xdist_workers(config):
        # (no collection walks these imports on the way: what they leave of cyclic garbage is collected once, before
        # the freeze, and a collector someone turned off stays off)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            _import_before_inner_sessions()
        finally:
            if was_enabled:
                gc.enable()
        _freeze_what_lives_on()


# A test process's heap is large (litellm, the plugin, Hypothesis; then the libraries some tests load for good:
# torch, scipy, pandas, NLTK; then the collected items) and lives to its end, while its tests make and drop a great
# deal (pytester's in-process sessions import modules and drop them), so the collector's automatic full collections
# came often, each walking all of it: 0.2-1 s each. Frozen once imported (collections held back meanwhile), once
# collected and after a test that imported libraries for good, those walk only what the tests made: a fast-tier
# worker's collections took 5.4-6.7 s of its 38-42 s of CPU before, 4.0-4.8 s after (gc.callbacks). An
# in-process run of 1,000 items or more gives back everything frozen when it ends, as the plugin gives a caller of
# pytest.main (pytest_medhelm/run/garbage.py): frozen again after such a test. (A freeze after a test also keeps the
# values of module- and session-scoped fixtures alive then: what cyclic garbage they leave is freed at the exit.)
_froze = False
_ran_inner_session = False  # (whether the running test may start an in-process session: it uses pytester)
_modules_when_frozen = 0
#: this many more modules imported for good since the last freeze: frozen again (torch's stack is 2,000 and more)
MODULES_TO_FREEZE_AGAIN = 100


def _freeze_what_lives_on() -> None:
    global _froze, _modules_when_frozen
    gc.collect()
    gc.freeze()
    _froze, _modules_when_frozen = True, len(sys.modules)


@pytest.fixture
def nothing_frozen(pytester: pytest.Pytester) -> None:
    """For a test of what an in-process session freezes: this process's own freeze (above) given back. The process
    freezes again once the test and its fixtures are done (pytest_runtest_logfinish: nothing frozen after a test
    using pytester), not when this fixture ends, which would freeze the test's other fixtures' objects."""
    if _froze:
        gc.unfreeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    if _froze:
        _freeze_what_lives_on()  # (the items, which live to the end too)


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    # (gc.get_freeze_count walks the frozen objects, some 5 ms: asked only after a test with an in-process session)
    if _froze and (len(sys.modules) > _modules_when_frozen + MODULES_TO_FREEZE_AGAIN
                   or (_ran_inner_session and not gc.get_freeze_count())):
        _freeze_what_lives_on()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # BERTScore's stack, for a test marked ``loads_torch`` only: an in-process run of an open-ended benchmark scores
    # BERTScore beside the jury, which loads torch inside the inner session; dropped at its end, torch's objects
    # crash the garbage collector later in the same process (a segfault, seen as a crashed xdist worker). Imported
    # here, before the test's fixtures (pytester's among them, whose snapshot of sys.modules would drop it too), it
    # stays; a worker whose tests never score BERTScore in process is spared its 3 s. pytester_runs.run fails a test
    # whose in-process run loaded torch when it was not imported before the test's fixtures.
    global _ran_inner_session
    _ran_inner_session = "pytester" in getattr(item, "fixturenames", ())
    pytester_runs.before_fixtures(item.get_closest_marker("loads_torch") is not None)


pytest_plugins = ["pytester"]


#: no test of ours takes more than a few minutes; one that hangs (a deadlock between two processes) fails after this
#: many seconds with every thread's stack printed, instead of holding CI until its own limit ends it unexplained
HUNG_AFTER = 900


#: tests/e2e/: whole runs with real heavy parts (a llama.cpp server and its model, real benchmarks' data, a built
#: wheel, signals to a process group); ``pytest -m "not e2e"`` is the tier a developer runs in a minute
E2E_FOLDER = Path(__file__).resolve().parent / "e2e"
#: fixtures that make any test using them end-to-end wherever it lives (a real headless Chromium)
E2E_FIXTURES = frozenset({"browser"})


def is_e2e(item: pytest.Item) -> bool:
    """A test of tests/e2e/ or one using a fixture of E2E_FIXTURES; every other end-to-end test carries
    ``@pytest.mark.e2e`` itself (or its parameter does: ``pytest.param(..., marks=pytest.mark.e2e)``), and
    tests/test_tiers.py fails naming any test that starts a new interpreter or an inner xdist run without it."""
    return item.path.is_relative_to(E2E_FOLDER) or bool(E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    if not config.pluginmanager.hasplugin("timeout") or config.getoption("timeout", None):
        return  # (pytest-timeout is a test extra; a --timeout given on the command line is the user's to keep)
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(HUNG_AFTER, method="thread"))


def _distribution_finders() -> list:
    return [f for f in sys.meta_path if callable(getattr(f, "find_distributions", None))]


@pytest.fixture(autouse=True)
def _installed_packages_stay_visible():
    """Fail the test that leaves importlib.metadata unable to find any installed package (see above), instead of
    a later in-process pytester run in the same worker failing with a usage error."""
    had = bool(_distribution_finders())
    yield
    if had and not _distribution_finders():
        pytest.fail("this test left no finder with find_distributions on sys.meta_path: importlib.metadata now sees "
                    "no installed package, and later in-process pytest runs load no plugin (see tests/conftest.py)",
                    pytrace=False)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (real benchmark data for integration tests)")
    return SHARED_DATA


@pytest.fixture
def server():
    """A fresh in-process test server answering "A" (its counters are read in this process)."""
    from pytest_medhelm.testing.server import running_server

    with running_server(answer="A") as srv:
        yield srv


@pytest.fixture
def toy(pytester: pytest.Pytester):
    """A pytester project with the toy benchmark (registered through the plugin's hook) and its data dir.

    Returns a function ``write(n, yes_every)`` that writes the data and gives the data dir."""
    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(test_toy=TOY_TEST)

    def write(n: int = 10, yes_every: int = 2) -> Path:
        return write_toy_data(pytester.path, toy_rows(n, yes_every))

    return write
