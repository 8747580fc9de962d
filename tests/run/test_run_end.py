"""The end of a run: a large run keeps what lives until its end out of the garbage collector's way, and gives it
back (roles.py: ``freeze_if_large``, ``freeze_again``); the libraries the results need are imported while the items
run (reporting.py: ``prefetch``)."""

from __future__ import annotations

import gc

import pytest

FREEZE_PROBE = """
import gc

during = []


def pytest_runtest_call(item):
    if not during:  # (once: gc.get_freeze_count walks the whole permanent generation)
        during.append(gc.get_freeze_count())


def pytest_sessionfinish(session):
    print(f"frozen while the items ran: {during[0]}; after them: {gc.get_freeze_count()}")
"""


def frozen_counts(pytester: pytest.Pytester, data, url: str) -> tuple[int, int]:
    pytester.makepyfile(freeze_probe=FREEZE_PROBE)
    pytester.syspathinsert()
    run = pytester.runpytest("-p", "freeze_probe", "-p", "no:cacheprovider", "-p", "no:xdist", "--medhelm-model",
                             "openai/x", "--medhelm-api-base", url, "--medhelm-data-dir", str(data),
                             "--medhelm-cache", "off", "-q")
    assert run.ret == 0, run.stdout.str()[-3000:]
    line = run.stdout.str().split("frozen while the items ran: ")[1].split("\n")[0]
    during, after = line.split("; after them: ")
    return int(during), int(after)


@pytest.mark.e2e  # (a whole run of 1,000 items)
def test_a_large_run_freezes_its_items_then_their_reports_and_releases_them_at_the_end(pytester, toy, server):
    assert gc.get_freeze_count() == 0
    during, after = frozen_counts(pytester, toy(1000), server.url)
    assert during > 0  # the collected items (and all that was alive then)
    assert after > during  # and, once the items ran, their reports and records
    assert gc.get_freeze_count() == 0  # a caller of pytest.main (here, pytester) gets them all collectable again


def test_a_small_run_freezes_nothing(pytester, toy, server):
    # gc.get_referrers does not see frozen referrers, which a library checking for leaks may notice
    assert frozen_counts(pytester, toy(10), server.url) == (0, 0)


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
    data = toy(6)
    pytester.makepyfile(numpy_probe=NUMPY_PROBE)
    run = pytester.runpytest_subprocess("-p", "numpy_probe", "-p", "no:cacheprovider", "-p", "no:xdist", "-s",
                                        "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                                        "--medhelm-data-dir", str(data), "--medhelm-cache", "off",
                                        "--rootdir", str(pytester.path))
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert "numpy before the results: True" in run.stdout.str()
