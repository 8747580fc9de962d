"""One job's trouble is that job's error, whatever its type: the other jobs are all answered.

The scheduler's own failures (``ModelError``) are covered by the fault matrix (tests/sending/test_scheduler.py).
Here the exceptions are the ones nobody planned for, injected into real parts against our test server: a cache whose
write raises diskcache's lock timeout for one key, a wire that raises ``KeyError`` (a parser bug) or
``asyncio.TimeoutError`` for one request, a follow-up builder that raises for one answer. Through the scheduler
alone, through the background sender, and through whole pytest runs (serially and under xdist); in other processes
the fault is planted by a ``sitecustomize``."""

from __future__ import annotations

import os
import textwrap

import pytest
from pytester_runs import run

from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.sending import scheduler as scheduler_module
from pytest_medhelm.sending.background import BackgroundSender
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler, Settings
from pytest_medhelm.sending.transport import OpenAIWire
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import ChatRequest, Completion, ModelError, ModelSpec

SETTINGS = Settings(concurrency=4, timeout=10.0, retries=1, backoff_base=0.01, backoff_max=0.05)
N = 12
BAD = 5  # the job that meets the fault


def jobs_for(url: str, n: int = N) -> list[Job]:
    spec = ModelSpec("openai/toy", "openai/toy", url)
    return [Job(spec, ChatRequest.for_prompt(spec, f"question {i}?", 1)) for i in range(n)]


class CacheWhosePutTimesOut(AnswerCache):
    """The real cache, except that storing one key's answer raises diskcache's lock timeout."""

    bad_key = ""

    def put_many(self, stored):  # (what every write goes through: a batch, or one answer)
        if any(one.key == self.bad_key and isinstance(one.result, Completion) for one in stored):
            import diskcache

            raise diskcache.Timeout("database is locked")
        super().put_many(stored)


class WireWithABug(OpenAIWire):
    """The real wire, except that one request raises what no one planned for."""

    bad_prompt = f"question {BAD}?"
    error: BaseException = KeyError("choices")

    async def send(self, spec, request, timeout):
        if any(self.bad_prompt in text for _role, text in request.messages):
            raise self.error
        return await super().send(spec, request, timeout)


def test_a_cache_put_that_times_out_fails_that_job_only(tmp_path):
    cache = CacheWhosePutTimesOut(tmp_path / "cache", run_id="run")
    with running_server(answer="A") as srv:
        jobs = jobs_for(srv.url)
        cache.bad_key = jobs[BAD].key
        sched = Scheduler(cache, SETTINGS)
        failures = sched.send_all(jobs)
        assert srv.count == N  # every job was sent once: the bad one's answer came, it could not be kept
    assert list(failures) == [jobs[BAD].key]
    error = failures[jobs[BAD].key]
    assert isinstance(error, ModelError)
    assert "could not be stored in the cache" in str(error) and "Timeout: database is locked" in str(error)
    assert all(cache.get(j.key) is not None for i, j in enumerate(jobs) if i != BAD)
    assert str(cache.get_error(jobs[BAD].key)) == str(error)
    assert sched.stats["failed"] == 1 and sched.stats["answers"] == N


@pytest.mark.parametrize("error, shown", [
    (KeyError("choices"), "KeyError: 'choices'"),
    (TimeoutError(), "TimeoutError"),  # what aiohttp's total timeout raises (a builtin one since 3.11)
    (ValueError("odd provider body"), "ValueError: odd provider body"),
], ids=["KeyError", "asyncio.TimeoutError", "ValueError"])
def test_an_unexpected_exception_in_one_request_fails_that_job_only(tmp_path, monkeypatch, error, shown):
    monkeypatch.setattr(WireWithABug, "error", error)
    monkeypatch.setattr(scheduler_module, "OpenAIWire", WireWithABug)
    with running_server(answer="A") as srv:
        jobs = jobs_for(srv.url)
        sched = Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), SETTINGS)
        failures = sched.send_all(jobs)
        assert srv.count == N - 1  # the bad request never reached the server; the others all did
    assert list(failures) == [jobs[BAD].key]
    assert str(failures[jobs[BAD].key]) == f"openai/toy: {shown}"
    assert all(sched.cache.get(j.key).text == "A" for i, j in enumerate(jobs) if i != BAD)


def test_an_unexpected_exception_releases_the_jobs_budget(tmp_path, monkeypatch):
    """The budget reservation of a job that failed oddly is given back (it was never answered)."""
    from pytest_medhelm.budget import Budget

    monkeypatch.setattr(scheduler_module, "OpenAIWire", WireWithABug)
    budget = Budget(100.0, lambda spec: (1e-6, 1e-6), count_tokens=lambda spec, request: 10)
    with running_server(answer="A") as srv:
        jobs = jobs_for(srv.url)
        sched = Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), SETTINGS, budget=budget)
        failures = sched.send_all(jobs)
    assert list(failures) == [jobs[BAD].key]
    assert budget.in_flight == 0 and budget.spent > 0


def test_the_thread_sender_goes_on_after_an_odd_failure_and_a_broken_follow_up(tmp_path, monkeypatch):
    monkeypatch.setattr(scheduler_module, "OpenAIWire", WireWithABug)

    def follow_up(job, result):
        if "question 2?" in job.request.messages[-1][1]:
            raise RuntimeError("cannot build the judge prompt for this answer")
        return []

    with running_server(answer="A") as srv:
        jobs = jobs_for(srv.url)
        sender = BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), SETTINGS), follow_up)
        sender.start(jobs)
        results = {j.key: sender.wait(j.key) for j in jobs}
        sender.stop()
    assert isinstance(results[jobs[BAD].key], ModelError) and "KeyError" in str(results[jobs[BAD].key])
    assert all(isinstance(r, Completion) for k, r in results.items() if k != jobs[BAD].key)


PUT_FAILS = textwrap.dedent('''
    # planted by tests/sending/test_failures.py (every process of the run: pytest and its xdist workers):
    # the real cache, except that storing the answer to question 3 raises diskcache's lock timeout
    import os
    if os.environ.get("MEDHELM_TEST_PUT_FAILS"):
        import diskcache
        from pytest_medhelm.cache.store import AnswerCache

        _put_many = AnswerCache.put_many

        def put_many(self, stored):  # (what every write goes through: a batch, or one answer)
            if any(one.request_json and any(os.environ["MEDHELM_TEST_PUT_FAILS"] in text
                                            for _role, text in one.request_json["messages"]) for one in stored):
                raise diskcache.Timeout("database is locked")
            return _put_many(self, stored)

        AnswerCache.put_many = put_many
''')


@pytest.mark.e2e
@pytest.mark.parametrize("how", [
    pytest.param(["-p", "no:xdist"], id="serial"),
    pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e),
])
def test_a_whole_run_goes_on_when_one_answer_cannot_be_stored(pytester, toy, tmp_path, monkeypatch, how):
    """Through pytest, as users run it: the item whose answer could not be stored is an error saying so; every
    other item is scored (before, the sender stopped and every waiting item failed)."""
    import json

    data = toy(8)
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(PUT_FAILS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plant), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MEDHELM_TEST_PUT_FAILS", "question 3?")
    out = pytester.path / "r.json"
    with running_server(answer="A") as srv:
        result = run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", srv.url,
                     "--medhelm-data-dir", str(data), "--medhelm-json", str(out), *how, subprocess=True)
        assert srv.count == 8  # every question asked once
    text = result.stdout.str()
    assert result.ret == 1, text
    assert "INTERNALERROR" not in text and "sender stopped" not in text
    instances = {i["instance_id"]: i for i in json.loads(out.read_text())["instances"]}
    assert [k for k, i in instances.items() if i["error"]] == ["q003"], text
    assert "could not be stored in the cache: Timeout: database is locked" in instances["q003"]["error"]
    assert all(i["score"] is not None for k, i in instances.items() if k != "q003")
