"""The run's cleanup (issue 20, point 2): every step runs even when an earlier one fails, so a ``--medhelm-cache off``
directory (prompts, answers: patient text) never stays on disk because the cache could not close; and the hand-over
a controller writes into each worker's input round-trips as plain values."""

from __future__ import annotations

import json

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST

#: the fault: closing the answer cache fails (as it did once a model's PRAGMA had capped SQLite's heap)
CACHE_CLOSE_FAILS = '''
from pytest_medhelm.cache.store import AnswerCache

def _broken_close(self):
    raise OSError("the cache could not close: disk went away")

AnswerCache.close = _broken_close
'''


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_failing_cache_close_still_removes_the_run_directory(pytester: pytest.Pytester, toy, server,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               xdist: list[str]) -> None:
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + CACHE_CLOSE_FAILS)
    temp = pytester.path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    run = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                            "--medhelm-data-dir", str(data), "--medhelm-cache", "off", *xdist, subprocess=True)
    text = run.stdout.str() + run.stderr.str()
    assert "disk went away" in text  # the failure is said, not hidden
    assert run.ret != 0
    assert [p.name for p in temp.iterdir() if p.name.startswith("medhelm-run-")] == []


def test_every_step_runs_and_the_first_failure_is_raised_with_the_others_noted() -> None:
    from pytest_medhelm.run.context import run_every_step

    done: list[str] = []

    def fails(name: str):
        def step() -> None:
            done.append(name)
            raise RuntimeError(name)
        return step

    with pytest.raises(RuntimeError, match="first") as info:
        run_every_step([fails("first"), lambda: done.append("middle"), fails("last")])
    assert done == ["first", "middle", "last"]
    assert info.value.__notes__ == ["also, at the end of the run: RuntimeError: last"]


def test_the_hand_over_round_trips_through_workerinput():
    from pytest_medhelm.run.context import Handover

    handed = Handover.new()
    assert Handover.read(_written(handed)) == handed
    full = Handover(run_id="r", coordination_key=b"\x01\x02", cache_dir="cache-dir", shared_cache="")
    assert Handover.read(_written(full)) == full  # "" (no shared cache) is not "not handed" (None)
    assert Handover.new().run_id != Handover.new().run_id


def _written(handover) -> dict:
    workerinput: dict = {}
    handover.write(workerinput)
    return json.loads(json.dumps(workerinput))  # as execnet carries it: plain values only
