"""Interruptions: Ctrl-C (SIGINT to the process group, as a terminal sends it) during the answers-ahead phase and
during the item run, and SIGKILL; then the same command again.

For each: answers already received are not requested again (only those in flight at the interrupt are re-sent,
and after a SIGKILL those the cache's writer had not committed yet),
the cache is intact (SQLite integrity check, every entry readable), and the results equal those of an
uninterrupted run. The same under xdist (``-n 2``) with a shared cache.

The pytest runs are real subprocesses (``python -m pytest``) in a new session, so that the signal reaches them
(and their xdist workers) as it would from a terminal; the test server runs in this process and logs requests
across both runs. Each run sends a key of its own, by which the log tells its requests apart: a killed run's
request can still be in the kernel's buffers when the process dies, and the server then reads it after the next
run has begun. ``FIGURES`` holds what the tests measured (each counts, then asserts); the module prints it after
its last test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from terminal_lines import figures_reported
from toy_benchmark import TOY_CONFTEST, toy_rows

from pytest_medhelm.testing.server import running_server
from pytest_medhelm.testing.server.protocol import key_fingerprint

FIGURES: Counter = Counter()
N = 40  # instances of the answers-ahead scenarios
N_ITEMS = 16  # instances of the item-run scenarios (each item asks a follow-up question of its own, slowly)
CONCURRENCY = 4
#: xdist workers of the xdist scenarios: two share the cache as any number do (each more costs an interpreter's
#: start-up on CI's two cores, twice per scenario)
WORKERS = 2
LATENCY = 0.25  # every answer; the answers-ahead phase of N takes N / CONCURRENCY * LATENCY = 2.5 s
FOLLOW_UP_LATENCY = 0.2


_report_figures = figures_reported(FIGURES, lambda figures: "\ninterruptions (measured): "
                                   + ", ".join(f"{k}: {v}" for k, v in sorted(figures.items())))


TEST_MODULE = textwrap.dedent('''
    import os

    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        answer = medhelm_model.answer(medhelm_instance)
        if os.environ.get("FOLLOW_UP"):
            # a question of the test's own: not sent ahead, asked while the item runs
            medhelm_model.complete(f"follow-up {medhelm_instance.id}: why?", max_tokens=3)
        assert_metric(answer, medhelm_instance)
''')


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("interrupt")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(TOY_CONFTEST)
    (root / "test_toy.py").write_text(TEST_MODULE)
    for name, n in (("data", N), ("data_items", N_ITEMS)):
        (root / name / "toy").mkdir(parents=True)
        (root / name / "toy" / "toy.json").write_text(json.dumps(toy_rows(n)))
    return root


@pytest.fixture(scope="module")
def server():
    async def script(body):  # follow-up questions are slow, so that an interrupt can land while items run
        if "follow-up" in body["messages"][-1]["content"]:
            await asyncio.sleep(SLOW["follow_up"])
        return None

    with running_server(answer="A", latency=0.0) as srv:
        srv.set_answer(script)
        yield srv


#: the follow-up latency now: FOLLOW_UP_LATENCY only while a run is to be interrupted (the runs that finish need no
#: slow answer: a resumed run of the items scenario would otherwise wait for each follow-up it still asks)
SLOW = {"follow_up": 0.0}


#: the variable holding a run's key (``--medhelm-api-key-env``): the key names the run in the server's log
RUN_KEY_ENV = "MEDHELM_INTERRUPT_RUN_KEY"


def _env(follow_up: bool, run_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    env.pop("PYTEST_ADDOPTS", None)
    env[RUN_KEY_ENV] = run_key
    if follow_up:
        env["FOLLOW_UP"] = "1"
    return env


def prompts_of(server, run_key: str) -> list[str]:
    """The prompts of the requests that came with ``run_key``, in arrival order."""
    mark = key_fingerprint(run_key)
    return [r["json"]["messages"][0]["content"] for r in server.requests if r["auth_fingerprint"] == mark]


def command(server, project: Path, cache: str, out: str, data: str = "data", xdist: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
           "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
           "--medhelm-data-dir", str(project / data), "--medhelm-cache-dir", str(project / cache),
           "--medhelm-concurrency", str(CONCURRENCY), "--medhelm-json", str(project / out),
           "--medhelm-api-key-env", RUN_KEY_ENV]
    return cmd + (["-n", str(WORKERS)] if xdist else ["-p", "no:xdist"])


class Run:
    def __init__(self, cmd: list[str], cwd: Path, follow_up: bool, run_key: str) -> None:
        self.log = open(cwd / f"run-{time.monotonic_ns()}.log", "w+")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=_env(follow_up, run_key), stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)  # its own process group: the signal reaches only it

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)  # the group we created: pytest and its xdist workers

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"the run did not finish within {timeout}s:\n{self.output()}") from None

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()


def run_to_end(cmd, cwd, follow_up: bool, run_key: str) -> tuple[int, str]:
    run = Run(cmd, cwd, follow_up, run_key)
    code = run.wait()
    FIGURES["runs completed"] += 1
    return code, run.output()


def cache_answers(directory: Path) -> dict[str, str]:
    """Open the cache the way a new run does; check SQLite's integrity and read every entry back.
    Returns the prompt of every stored answer, by cache key."""
    import diskcache

    from pytest_medhelm.cache.disk import JSONDisk

    db = directory / "cache.db"
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    cache = diskcache.Cache(str(directory), disk=JSONDisk)  # entries are JSON text (issue 20)
    try:
        prompts = {}
        for key in list(cache):
            value = cache[key]  # every entry is readable
            if isinstance(value, dict) and "completion" in value:
                assert isinstance(value["completion"]["text"], str)
                prompts[key] = value["request"]["messages"][0][1]
        return prompts
    finally:
        cache.close()


def results(path: Path) -> tuple[list, dict]:
    data = json.loads(path.read_text())
    instances = {(i["benchmark"], i["instance_id"]): (i["score"], i["answer"], i["error"]) for i in data["instances"]}
    return data["benchmarks"], instances


_REFERENCE: dict = {}


def reference(server, project: Path, follow_up: bool) -> tuple[list, dict]:
    """The results of an uninterrupted run of the same command (own cache; computed once per scenario kind)."""
    key = follow_up
    if key not in _REFERENCE:
        data = "data_items" if follow_up else "data"
        cmd = command(server, project, f"ref-cache-{int(follow_up)}", f"ref-{int(follow_up)}.json", data)
        code, output = run_to_end(cmd, project, follow_up, f"reference-{int(follow_up)}")
        assert code == 0, output
        _REFERENCE[key] = results(project / f"ref-{int(follow_up)}.json")
    return _REFERENCE[key]


def interrupted_then_resumed(server, project: Path, name: str, sig: int, phase: str, xdist: bool) -> None:
    follow_up = phase == "items"
    n = N_ITEMS if follow_up else N
    expected = reference(server, project, follow_up)
    server.configure(latency=0.0 if follow_up else LATENCY)
    SLOW["follow_up"] = FOLLOW_UP_LATENCY if follow_up else 0.0
    server.reset()
    cache_dir = project / f"cache-{name}"
    cmd = command(server, project, cache_dir.name, f"{name}.json", "data_items" if follow_up else "data", xdist)

    first_key, second_key, third_key = (f"{name}-{which}" for which in ("first", "second", "third"))
    run = Run(cmd, project, follow_up, first_key)
    # answers ahead: interrupt a third of the way through; items: once three follow-up questions went out
    server.wait_for_requests(n // 3 if not follow_up else n + 3, timeout=120)
    in_flight = server.stats()["in_flight"]
    run.signal(sig)
    code = run.wait()
    FIGURES["interruptions injected"] += 1
    first = server.stats()
    output = run.output()
    assert "INTERNALERROR" not in output, output
    if sig == signal.SIGINT:
        assert code == 2, output  # pytest's "interrupted"
    else:
        assert code == -signal.SIGKILL
    assert first["count"] < n + (n if follow_up else 0), "the interrupt came too late to test anything"

    stored = cache_answers(cache_dir)  # intact, readable
    server.configure(latency=0.0)
    SLOW["follow_up"] = 0.0
    # (no reset: a request the killed run had written may reach the server only now; the keys tell the runs apart)
    code, output = run_to_end(cmd, project, follow_up, second_key)
    assert code == 0, output
    first_prompts = prompts_of(server, first_key)
    second_prompts = prompts_of(server, second_key)
    assert len(first_prompts) + len(second_prompts) == server.count, "a request came with neither run's key"
    FIGURES["first runs' requests read after they ended"] += len(first_prompts) - first["count"]

    # nothing the first run stored is asked again: "answers lost" counts such requests
    lost = [p for p in second_prompts if p in set(stored.values())]
    FIGURES["answers stored before the interrupt"] += len(stored)
    FIGURES["answers lost"] += len(lost)
    assert lost == []
    total_questions = n + (N_ITEMS if follow_up else 0)
    assert len(second_prompts) == total_questions - len(stored)
    # re-sent: requests of the first run whose answer never reached the cache (they were in flight)
    resent = len(first_prompts) - len(stored)
    FIGURES["requests re-sent after interruption"] += resent
    # Ctrl-C: those in flight; a SIGKILL also loses the answers received but not yet committed by the cache's
    # writer (each sending process holds at most twice its workers between sending and storing: serving's room)
    held = 1 if sig == signal.SIGINT else 2
    assert resent <= held * CONCURRENCY * (WORKERS if xdist else 1) + 1, (resent, in_flight)
    # every question was asked, none more than twice (once more only when it was in flight at the interrupt)
    asked = Counter(first_prompts + second_prompts)
    assert len(asked) == total_questions and max(asked.values()) <= 2

    # the results equal those of the uninterrupted run
    assert results(project / f"{name}.json") == expected
    if xdist:
        return  # (slow here: the third run is checked without xdist)
    # and a third run asks nothing at all
    code, output = run_to_end(cmd, project, follow_up, third_key)
    assert code == 0 and prompts_of(server, third_key) == [], output


@pytest.mark.parametrize("sig, phase", [
    pytest.param(signal.SIGINT, "ahead", id="ctrl-c-answers-ahead"),
    pytest.param(signal.SIGINT, "items", id="ctrl-c-items"),
    pytest.param(signal.SIGKILL, "ahead", id="sigkill-answers-ahead"),
    pytest.param(signal.SIGKILL, "items", id="sigkill-items"),
])
def test_interrupted_run_resumes_without_asking_again(server, project, sig, phase, request):
    interrupted_then_resumed(server, project, request.node.callspec.id, sig, phase, xdist=False)


@pytest.mark.parametrize("sig, phase", [
    pytest.param(signal.SIGINT, "ahead", id="xdist-ctrl-c-answers-ahead"),
    pytest.param(signal.SIGINT, "items", id="xdist-ctrl-c-items"),
    pytest.param(signal.SIGKILL, "ahead", id="xdist-sigkill-answers-ahead"),
])
def test_interrupted_xdist_run_resumes_with_a_shared_cache(server, project, sig, phase, request):
    interrupted_then_resumed(server, project, request.node.callspec.id, sig, phase, xdist=True)
