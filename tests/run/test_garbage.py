"""The garbage collector and the end of a run (run/garbage.py): no full collection while the items are collected; a
large run keeps what lives until its end out of the collector's way and makes full collections rarer while its items
run (``freeze_if_large``, ``freeze_again``), Hypothesis imported first where its plugin is loaded; a small run
whose process ends with it freezes what is alive at its cleanup (``freeze_for_the_end``); at the session's end a
large run gives all of it back when the session is nested in another, and otherwise keeps it frozen to the exit,
where its process collects what was made since, flushes its open files and freezes the rest (``ends_with_process``,
``freeze_at_exit``). The libraries the results need are imported while the items run (reporting.py: ``prefetch``),
and xdist's controller imports the HTTP client while its workers collect (delivery.py: ``prefetch``)."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass

import pytest
import pytester_runs

FREEZE_PROBE = """
import gc

import pytest

during = []


def pytest_runtest_call(item):
    if not during:  # (once: gc.get_freeze_count walks the whole permanent generation)
        during.append(gc.get_freeze_count())


@pytest.hookimpl(wrapper=True)  # (the run's own finish aside: what its items and results left frozen)
def pytest_sessionfinish(session):
    print(f"frozen while the items ran: {during[0]}; after them: {gc.get_freeze_count()}")
    return (yield)
"""


def frozen_counts(pytester: pytest.Pytester, data, url: str) -> tuple[int, int]:
    pytester.makepyfile(freeze_probe=FREEZE_PROBE)
    pytester.syspathinsert()
    run = pytester_runs.run(pytester, "-p", "freeze_probe", "-p", "no:xdist", "--medhelm-model", "openai/x",
                            "--medhelm-api-base", url, "--medhelm-data-dir", str(data), "--medhelm-cache", "off", "-q")
    assert run.ret == 0, run.stdout.str()[-3000:]
    line = run.stdout.str().split("frozen while the items ran: ")[1].split("\n")[0]
    during, after = line.split("; after them: ")
    return int(during), int(after)


def probed_run(pytester: pytest.Pytester, probe: str, source: str, data, url: str, *args: str) -> pytest.RunResult:
    """A run of the toy benchmark in a new interpreter, with the plugin ``probe`` (``source``) loaded, that passed."""
    pytester.makepyfile(**{probe: source})
    run = pytester_runs.run(pytester, "-p", probe, *args, "--medhelm-model", "openai/x", "--medhelm-api-base", url,
                            "--medhelm-data-dir", str(data), "--medhelm-cache", "off", "--rootdir", str(pytester.path),
                            subprocess=True)
    assert run.ret == 0, run.stdout.str()[-3000:]
    return run


@pytest.mark.e2e  # (a whole run of 1,000 items)
def test_a_large_run_freezes_its_items_then_their_reports_and_releases_them_at_the_end(pytester, toy, server,
                                                                                      nothing_frozen):
    assert gc.get_freeze_count() == 0
    during, after = frozen_counts(pytester, toy(1000), server.url)
    assert during > 0  # the collected items (and all that was alive then)
    assert after > during  # and, once the items ran, their reports and records
    assert gc.get_freeze_count() == 0  # a caller of pytest.main (here, pytester) gets them all collectable again


def test_a_small_run_inside_another_session_freezes_nothing(pytester, toy, server, nothing_frozen):
    # gc.get_referrers does not see frozen referrers, which a library checking for leaks may notice; and a session
    # nested in another (here pytester's) does not end with its process
    assert frozen_counts(pytester, toy(10), server.url) == (0, 0)
    assert gc.get_freeze_count() == 0  # nor at its cleanup


PER_PROCESS_PROBE = """
import atexit
import gc
import os
import random

import pytest

#: a module's random generator, made before the run began (as trio's): Hypothesis, imported by its pytest plugin in
#: the terminal summary, registers it then and warns when gc.get_referrers finds no referrer (frozen ones are not seen)
KEPT = random.Random()
seen = {}


def pytest_configure(config):
    seen["name"] = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
    atexit.register(_write)  # (registered before the plugin's exit handler: runs after it)


def pytest_runtest_call(item):
    seen.setdefault("during", gc.get_freeze_count())


def _look(when):
    gc.collect()
    seen[when] = f"{gc.get_freeze_count()},{len(gc.get_referrers(KEPT))}"


@pytest.hookimpl(trylast=True)  # (after the run's own finish)
def pytest_sessionfinish(session):
    _look("finish")


@pytest.hookimpl(trylast=True)  # (where Hypothesis's plugin imports Hypothesis; xdist's workers have none)
def pytest_terminal_summary(terminalreporter):
    _look("summary")


def _write():
    with open(os.path.join(MARKERS, seen["name"]), "w") as f:
        f.write(f"{seen.get('during', 'no items')};{seen['finish']};{seen.get('summary', 'no summary')};"
                f"{gc.get_freeze_count()}")
"""


@pytest.mark.e2e  # (a new interpreter; xdist's workers)
@pytest.mark.parametrize("mode", [("-p", "no:xdist"), ("-n", "2")], ids=["serial", "xdist-2"])
def test_a_small_runs_summary_sees_nothing_frozen_and_its_exit_skips_what_lives_on(pytester, toy, server, mode):
    # (a large run freezes its items: the in-process test above; Hypothesis then comes first: the test below)
    markers = pytester.mkdir("markers")
    probed_run(pytester, "per_process_probe", f"MARKERS = {str(markers)!r}\n{PER_PROCESS_PROBE}", toy(10),
               server.url, *mode)
    seen = {path.name: path.read_text().split(";") for path in markers.iterdir()}
    assert set(seen) == ({"main"} if mode[0] == "-p" else {"main", "gw0", "gw1"})
    for name, (during, finish, summary, at_exit) in seen.items():
        # nothing frozen while a small run's items run (a library checking for leaks may look then); xdist's
        # controller runs none
        assert during == ("no items" if name == "main" and mode[0] == "-n" else "0"), (name, during)
        # the session's finish, its terminal summary and the plugins that look then see nothing frozen, and the
        # module's generator referred to
        assert finish == "0,1", name
        assert summary == "0,1" or (name != "main" and summary == "no summary"), name
        # the exit skips what lived to the end, in every process that ends with the session
        assert int(at_exit) > 0, name


@pytest.mark.e2e  # (a new interpreter, with Hypothesis's and anyio's plugins as a user's process loads them)
@pytest.mark.parametrize("items", [10, 1000], ids=["small", "large"])
def test_hypothesis_and_trio_installed_the_run_ends_without_a_warning(pytester, toy, server, items):
    # Hypothesis's plugin imports Hypothesis in the terminal summary (unless it came first), whose entry points
    # register trio's random generator (trio imported at load by anyio's plugin), checked with gc.get_referrers,
    # which does not see what is frozen
    pytest.importorskip("trio")  # (selenium's dependency, with the test extras)
    pytest.importorskip("hypothesis")
    # (no -W filter naming the warning's class: it would import Hypothesis at the start)
    run = pytester_runs.run(pytester, "-p", "no:xdist", *pytester_runs.toy_args(server, toy(items)), subprocess=True,
                            plugins=pytester_runs.EXTRAS_PLUGINS)
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert "HypothesisWarning" not in run.stdout.str() + run.stderr.str()


THRESHOLD_PROBE = """
import gc

BEFORE = gc.get_threshold()
seen = {}


def pytest_collectstart(collector):
    seen.setdefault("collecting", gc.get_threshold())


def pytest_runtest_call(item):
    seen.setdefault("items", gc.get_threshold())


def pytest_sessionfinish(session):
    full = [BEFORE[2], seen["collecting"][2], seen["items"][2], gc.get_threshold()[2]]
    young = {BEFORE[:2], seen["collecting"][:2], seen["items"][:2], gc.get_threshold()[:2]}
    print(f"full collections after: {full}; young: {sorted(young)}")
"""


def full_collection_thresholds(pytester: pytest.Pytester, data, url: str) -> list[int]:
    """The full-collection threshold before the run, while it collects, while its items run, and at its end."""
    pytester.makepyfile(threshold_probe=THRESHOLD_PROBE)
    pytester.syspathinsert()
    before = gc.get_threshold()
    run = pytester_runs.run(pytester, "-p", "threshold_probe", "-p", "no:xdist", "--medhelm-model", "openai/x",
                            "--medhelm-api-base", url, "--medhelm-data-dir", str(data), "--medhelm-cache", "off", "-q",
                            "-s")
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert gc.get_threshold() == before  # (a caller of pytest.main gets its collector as it was)
    out = run.stdout.str().split("full collections after: ")[1].split("\n")[0]
    full, young = out.split("; young: ")
    assert young == str([before[:2]])  # the young generations are collected as before throughout
    return [int(n) for n in full.strip("[]").split(", ")]


#: the collector's thresholds as CPython's generational collector has them (3.14's incremental one has no third)
GENERATIONAL = pytest.mark.skipif(gc.get_threshold()[2] == 0, reason="no threshold for full collections here")


@GENERATIONAL
@pytest.mark.e2e  # (a whole run of 1,000 items)
def test_a_large_run_holds_full_collections_while_it_collects_and_makes_them_rarer_while_its_items_run(
        pytester, toy, server):
    from pytest_medhelm.run.garbage import NEVER, RARER_WHILE_ITEMS_RUN

    before, collecting, items, after = full_collection_thresholds(pytester, toy(1000), server.url)
    assert (collecting, items, after) == (NEVER, before * RARER_WHILE_ITEMS_RUN, before)


@GENERATIONAL
def test_a_small_run_only_holds_full_collections_while_it_collects(pytester, toy, server):
    from pytest_medhelm.run.garbage import NEVER

    before, collecting, items, after = full_collection_thresholds(pytester, toy(10), server.url)
    assert (collecting, items, after) == (NEVER, before, before)


TUNER_PROBE = """
import gc


def pytest_collection_modifyitems(items):
    gc.set_threshold(500, 5, 5)  # (a conftest or a test tuning the collector its own way)


def pytest_unconfigure(config):
    print(f"thresholds at the end: {gc.get_threshold()}")
"""


@GENERATIONAL
@pytest.mark.e2e  # (a new interpreter: the collector's settings are the process's)
def test_thresholds_someone_else_set_while_they_were_held_are_theirs_at_the_end(pytester, toy, server):
    run = probed_run(pytester, "tuner_probe", TUNER_PROBE, toy(10), server.url, "-p", "no:xdist", "-s")
    assert "thresholds at the end: (500, 5, 5)" in run.stdout.str()


CONTROLLER_FREEZE_PROBE = """
import gc

import pytest


@pytest.hookimpl(wrapper=True)  # (the run's own finish aside: what the controller froze)
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # (xdist's controller: it collected nothing itself)
        print(f"controller frozen: {gc.get_freeze_count()}")
    return (yield)
"""


@pytest.mark.e2e  # (an xdist run of 1,000 items)
def test_the_controller_of_a_large_run_freezes_what_its_workers_sent(pytester, toy, server):
    run = probed_run(pytester, "controller_freeze_probe", CONTROLLER_FREEZE_PROBE, toy(1000), server.url,
                     "-n", "2", "-s", "-q")
    assert int(run.stdout.str().split("controller frozen: ")[1].split()[0]) > 0


@pytest.mark.e2e  # (an xdist run of 1,000 tests)
def test_the_controller_of_a_large_session_of_other_tests_freezes_nothing(pytester):
    # (a frozen referrer is one gc.get_referrers does not see: Hypothesis's register_random then warns)
    pytester.makepyfile(controller_freeze_probe=CONTROLLER_FREEZE_PROBE)
    pytester.makepyfile(test_plain="import pytest\n\n\n@pytest.mark.parametrize('i', range(1000))\n"
                                   "def test_plain(i):\n    assert i < 1000\n")
    run = pytester_runs.run(pytester, "-p", "controller_freeze_probe", "-n", "2", "-s", "--rootdir", str(pytester.path),
                            "-q", subprocess=True)
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert "controller frozen: 0" in run.stdout.str()


NUMPY_PROBE = """
import sys
import time


def pytest_runtest_logfinish(nodeid, location):
    # (the last item; the results are built after it): did the libraries arrive while the items ran?
    if nodeid.endswith("q005]"):
        deadline = time.monotonic() + 10
        while "numpy" not in sys.modules and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"numpy before the results: {'numpy' in sys.modules}")
"""


@pytest.mark.e2e  # (a new interpreter: this one has numpy already)
def test_the_libraries_the_results_need_are_imported_while_the_items_run(pytester, toy, server):
    run = probed_run(pytester, "numpy_probe", NUMPY_PROBE, toy(6), server.url, "-p", "no:xdist", "-s")
    assert "numpy before the results: True" in run.stdout.str()


FIRST_ITEM_PROBE = """
import sys
import threading

seen = []


def pytest_runtest_setup(item):
    if not seen:  # the first item: the sending has started, no answer is here yet
        importing = any(t.name == "medhelm-report-imports" for t in threading.enumerate())
        seen.append(importing or "numpy" in sys.modules)
        print(f"report libraries before the first answer: {seen[0]}")
"""


@pytest.mark.e2e  # (a new interpreter: this one has numpy already)
def test_the_central_process_imports_the_report_libraries_only_once_its_first_item_is_done(pytester, toy, server):
    # (before that, the import would hold the interpreter while the sending thread sends its first requests)
    run = probed_run(pytester, "first_item_probe", FIRST_ITEM_PROBE, toy(6), server.url, "-p", "no:xdist", "-s")
    assert "report libraries before the first answer: False" in run.stdout.str()


EXIT_PROBE = """
import atexit
import gc
import os
import sys

MARKER = os.environ["EXIT_PROBE_MARKER"]


def _report():  # registered before the plugin's exit handler: runs after it
    with open(MARKER + ".frozen", "w") as f:
        f.write(str(gc.get_freeze_count()))


atexit.register(_report)


class Finalized:
    def __del__(self):
        with open(MARKER + ".finalized", "w") as f:
            f.write("yes")


def _make_garbage():
    # (runs just before the plugin's exit handler) what the session left frozen when it ended
    with open(MARKER + ".frozen-before", "w") as f:
        f.write(str(gc.get_freeze_count()))
    # garbage that exists when the plugin's exit handler runs: a cycle, which only a collection frees
    first, second = Finalized(), Finalized()
    first.other, second.other = second, first


class Holder:
    def __init__(self, file):
        self.file = file
        self.me = self  # (alive at exit, in a reference cycle: only a collection would finalize it)


KEPT = []


def pytest_sessionstart(session):
    # opened before the items are collected: a large run freezes it with them
    KEPT.append(Holder(open(MARKER + ".written-early", "w")))


def pytest_configure(config):
    # at the session's cleanup, after the plugin's own there (its cleanups are added later and run first), whatever
    # the run's size: registered after the plugin's exit handler, so it runs before it
    config.add_cleanup(lambda: atexit.register(_make_garbage))


def pytest_unconfigure(config):
    holder = Holder(open(MARKER + ".written", "w"))
    KEPT.append(holder)
    for kept in KEPT:
        kept.file.write("all of it")  # buffered, never flushed nor closed by its owner
"""


@dataclass(frozen=True)
class ExitState:
    frozen_before_handler: int  # what the session left frozen (an exit handler that runs just before the plugin's)
    frozen_at_end: int  # what the interpreter's last collections skip
    finalized: bool  # garbage that existed at exit had its finalizer run
    written: str  # a file opened at the end, never flushed nor closed by its owner
    written_early: str  # the same, opened before the items were collected


def exit_state(pytester: pytest.Pytester, data, url: str) -> ExitState:
    marker = pytester.path / "exit-probe"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXIT_PROBE_MARKER", str(marker))
        probed_run(pytester, "exit_probe", EXIT_PROBE, data, url, "-p", "no:xdist", "-q")

    def read(suffix: str) -> str:
        return (marker.parent / f"exit-probe.{suffix}").read_text()

    return ExitState(int(read("frozen-before")), int(read("frozen")),
                     (marker.parent / "exit-probe.finalized").exists(), read("written"), read("written-early"))


@pytest.mark.e2e  # (a new interpreter, and a whole run of 1,000 items)
def test_a_large_run_exits_without_walking_what_is_alive_and_still_finalizes_its_garbage(pytester, toy, server):
    state = exit_state(pytester, toy(1000), server.url)
    # the session ends with the process: what it froze stays frozen, the exit's collection skips it
    assert state.frozen_before_handler > 0
    assert state.frozen_at_end > 0  # the interpreter's last collections skip what is still alive
    assert state.finalized  # the garbage made after the items ran was collected first: its finalizers ran
    assert state.written == "all of it"  # a file still open was flushed first
    assert state.written_early == "all of it"  # one frozen with the items too


@pytest.mark.e2e  # (a new interpreter)
def test_a_small_run_exits_without_walking_what_is_alive_and_still_finalizes_its_garbage(pytester, toy, server):
    # frozen once its items ran (not while they ran: above), then as a large run
    state = exit_state(pytester, toy(10), server.url)
    assert state.frozen_before_handler > 0
    assert state.frozen_at_end > 0
    assert state.finalized
    assert (state.written, state.written_early) == ("all of it", "all of it")


@pytest.mark.e2e  # (a new interpreter, and a whole run of 1,000 items)
def test_a_large_run_inside_another_program_leaves_its_exit_alone(pytester, toy, server):
    # a script that calls pytest.main and goes on: its exit is its own
    data = toy(1000)
    pytester.makepyfile(driver=f"""
import pytest

code = pytest.main(["-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--medhelm-model", "openai/x",
                    "--medhelm-api-base", {server.url!r}, "--medhelm-data-dir", {str(data)!r},
                    "--medhelm-cache", "off"])
from pytest_medhelm.run import garbage

print(f"ran: {{int(code)}}; exit handler: {{garbage._exit_freeze_registered}}")
""")
    run = pytester.run(sys.executable, "driver.py")
    assert "ran: 0; exit handler: False" in run.stdout.str(), run.stdout.str()[-3000:]


CONTROLLER_PROBE = """
import sys
import time

import pytest

seen = []


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_node_collection_finished(node, ids):
    # (the controller, when the first worker has collected, before its plan is read and sending starts)
    if seen:
        return
    seen.append(node)
    deadline = time.monotonic() + 10
    while "aiohttp" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.05)
    node.config.pluginmanager.getplugin("terminalreporter").write_line(
        f"http client before the plan: {'aiohttp' in sys.modules}")
"""


@pytest.mark.e2e  # (an xdist run)
def test_the_controller_imports_the_http_client_while_its_workers_collect(pytester, toy, server):
    run = probed_run(pytester, "controller_probe", CONTROLLER_PROBE, toy(4), server.url, "-n", "2")
    assert "http client before the plan: True" in run.stdout.str()
