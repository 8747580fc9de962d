"""Answers sent in the background while the items run (models/background.py: the scheduler's loop on a thread of
this process). Against our real OpenAI-compatible test server; the cache is a real diskcache directory."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pytester_runs import run
from toy_benchmark import TIMED_TEST

from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.sending.background import BackgroundSender, SenderCrashed, ask_alone
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler, Settings
from pytest_medhelm.testing.server import last_user_text, running_server
from pytest_medhelm.values import ChatRequest, Completion, ModelError, ModelSpec

SETTINGS = Settings(concurrency=8, timeout=10.0, retries=1, backoff_base=0.01)


def echo(body: dict) -> str:
    return f"echo {last_user_text(body)}"


def jobs_for(url: str, n: int, prefix: str = "question", purpose: str = "answer", max_tokens: int = 4) -> list[Job]:
    spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=url)
    return [Job(spec, ChatRequest.for_prompt(spec, f"{prefix} {i}", max_tokens, purpose=purpose)) for i in range(n)]


def make_sender(tmp_path: Path, follow_up=None) -> BackgroundSender:
    return BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), SETTINGS), follow_up)


def test_every_answer_arrives_in_memory_and_in_the_cache(tmp_path):
    with running_server(script=echo) as server:
        jobs = jobs_for(server.url, 60)
        sender = make_sender(tmp_path)
        sender.start(jobs)
        results = {job.key: sender.wait(job.key) for job in reversed(jobs)}  # waiting in any order works
        sender.stop()
        assert server.count == 60
    assert all(isinstance(r, Completion) for r in results.values())
    assert results[jobs[7].key].text == "echo question 7"
    assert results[jobs[7].key].tokens_in > 0 and results[jobs[7].key].cached is False
    cache = AnswerCache(tmp_path / "cache", run_id="run")
    assert all(cache.get(job.key).text == results[job.key].text for job in jobs)
    assert sender.summary_lines()[0].startswith("medhelm answers: 60/60 (")
    assert sender.expects(jobs[0].key) and not sender.expects("0" * 64)


def test_follow_ups_are_sent_as_their_answer_arrives(tmp_path):
    """The jury's way: each answer brings requests of its own; the stream ends only after those are answered."""
    with running_server(script=echo) as server:
        jobs = jobs_for(server.url, 30)
        spec = jobs[0].spec

        def follow_up(job: Job, result):
            if job.request.purpose != "answer" or isinstance(result, ModelError):
                return []
            return [Job(spec, ChatRequest.for_prompt(spec, f"judge {result.text}", 4, purpose="judge:1")),
                    Job(spec, ChatRequest.for_prompt(spec, f"judge again {result.text}", 4, purpose="judge:1"))]

        sender = make_sender(tmp_path, follow_up)
        sender.start(jobs)
        judged = [ChatRequest.for_prompt(spec, f"judge{again} echo question {i}", 4, purpose="judge:1")
                  for i in range(30) for again in ("", " again")]
        assert sender.wait(judged[-1].cache_key()).text == "echo judge again echo question 29"
        assert all(isinstance(sender.wait(j.cache_key()), Completion) for j in judged)
        sender.stop()
        assert server.count == 90
    lines = sender.summary_lines()
    assert lines[0].startswith("medhelm answers: 30/30") and lines[1].startswith("medhelm jury: 60/60"), lines


@pytest.mark.timeout(120, method="thread")  # a lock-up cannot be undone from here: the worker ends, naming this test
def test_long_answers_with_long_follow_ups_all_arrive(tmp_path):
    """A judge request repeats a whole clinical note (150 KB): answers and follow-ups that long all arrive, and the
    sending never locks up (a full CI run once hung here)."""
    note = "x" * 150_000
    # a reply may be as long as its max_tokens allows (models/replies.py): room for a 150 KB note
    max_tokens = 8192

    with running_server(script=lambda body: note + last_user_text(body)[-20:]) as server:
        jobs = jobs_for(server.url, 24, max_tokens=max_tokens)
        spec = jobs[0].spec

        def follow_up(job: Job, result):
            if job.request.purpose != "answer" or isinstance(result, ModelError):
                return []
            return [Job(spec, ChatRequest.for_prompt(spec, f"judge {i} {result.text}", max_tokens, purpose="judge:1"))
                    for i in range(3)]

        sender = make_sender(tmp_path, follow_up)
        outcome: list = []
        waiting = threading.Thread(target=lambda: outcome.extend(sender.wait(job.key) for job in jobs), daemon=True)
        try:
            sender.start(jobs)
            waiting.start()
            waiting.join(60)
            assert not waiting.is_alive(), "the sender locked up: answers stopped arriving"
            judged = [ChatRequest.for_prompt(spec, f"judge {i} {note}question {q}", max_tokens,
                                           purpose="judge:1")
                      for q in range(24) for i in range(3)]
            assert all(isinstance(sender.wait(j.cache_key()), Completion) for j in judged)
            assert sender.wait(judged[-1].cache_key()).text.endswith("question 23")
        finally:
            sender.stop(timeout=5)
        assert server.count == 24 * 4
    assert all(isinstance(r, Completion) for r in outcome)


def test_a_failed_request_is_an_error_result_with_the_providers_message(tmp_path):
    with running_server(answer="A", api_key="sk-right") as server:
        jobs = jobs_for(server.url, 5)
        sender = make_sender(tmp_path)
        sender.start(jobs)
        result = sender.wait(jobs[3].key)
        sender.stop()
    assert isinstance(result, ModelError)
    assert result.status == 401 and "openai/toy (HTTP 401)" in str(result)
    assert "openai/toy" in sender.broken
    stored = AnswerCache(tmp_path / "cache", run_id="run").get_error(jobs[3].key)
    assert type(stored) is type(result) and stored.to_json() == result.to_json()


def test_stop_cancels_what_is_in_flight_and_keeps_what_was_stored(tmp_path):
    with running_server(answer="A", latency=0.3) as server:
        jobs = jobs_for(server.url, 200)
        sender = make_sender(tmp_path)
        sender.start(jobs)
        sender.wait(jobs[0].key)
        sender.stop()
        time.sleep(0.5)
        sent = server.count
        assert sent < 200
        time.sleep(0.5)
        assert server.count == sent  # nothing goes out after stop()
    stored = [job for job in jobs if AnswerCache(tmp_path / "cache", run_id="run").get(job.key) is not None]
    assert 1 <= len(stored) <= sent
    assert "not sent or not answered (the run stopped)" in sender.summary_lines()[0]
    with pytest.raises(SenderCrashed):
        sender.wait(jobs[-1].key)  # never hangs: the sender is gone


async def first_fast_then_slow(body: dict) -> str:
    if last_user_text(body) != "question 0":
        await asyncio.sleep(1.0)  # still in flight when the first answer's bookkeeping fails
    return "A"


class CrashingSender(BackgroundSender):
    crashed = False

    def _on_done(self, job: Job, result) -> None:  # a bug in the bookkeeping of the first answer only
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("a bug in the sender")
        super()._on_done(job, result)


def test_a_sender_that_crashes_charges_no_cut_request_to_its_job(tmp_path):
    """The requests in flight when the sending ends on a bug are cut, not failed: no item gets a "disconnected"
    error for them (it asks for its own answer instead), and no error is stored as their answer."""
    with running_server(script=first_fast_then_slow) as server:
        jobs = jobs_for(server.url, 6)
        no_retries = Settings(concurrency=8, timeout=10.0, retries=0)  # (a cut request would fail on its only try)
        sender = CrashingSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), no_retries))
        sender.start(jobs)
        with pytest.raises(SenderCrashed, match="a bug in the sender"):
            sender.wait(jobs[3].key)
        time.sleep(0.2)  # (what a worker left running would record, it records by now)
        assert not any(sender.has(job.key) for job in jobs)
        cache = AnswerCache(tmp_path / "cache", run_id="run")
        assert [job.key for job in jobs if cache.get_error(job.key) is not None] == []
        sender.stop()


def test_a_drained_sender_leaves_the_scheduler_able_to_send(tmp_path):
    """Draining is the drained run's: a request asked after it (an item's own, on a loop of its own) is sent."""
    with running_server(answer="A", latency=0.2) as server:
        jobs = jobs_for(server.url, 40)
        sender = make_sender(tmp_path)
        sender.start(jobs)
        sender.wait(jobs[0].key)
        sender.stop(drain=5.0)
        later = jobs_for(server.url, 1, prefix="asked later")[0]
        answer = ask_alone(sender.scheduler, later)
        assert isinstance(answer, Completion) and answer.text == "A"


def test_a_serve_cancelled_twice_still_closes_everything(tmp_path):
    """Cancelled again while it waits for its workers to end (asyncio.run cancelling what a batch run left), a
    serve still closes its session and its writer, and is no longer counted as serving."""
    with running_server(answer="A", latency=0.5) as server:
        scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), SETTINGS)

        async def cancel_twice() -> None:
            queue: asyncio.Queue = asyncio.Queue()
            for job in jobs_for(server.url, 4):
                queue.put_nowait(job)
            serve = asyncio.ensure_future(scheduler.serve(queue, lambda job, result: None))
            await asyncio.sleep(0.2)  # its requests are in flight
            serve.cancel()
            for _ in range(3):  # into its cleanup, which waits for the workers
                await asyncio.sleep(0)
            serve.cancel()
            with pytest.raises(asyncio.CancelledError):
                await serve

        asyncio.run(cancel_twice())
    assert scheduler._serving == []
    assert not [t for t in threading.enumerate() if t.name == "medhelm-cache-writer"]


@pytest.mark.e2e
def test_a_killed_pytest_stops_sending(tmp_path):
    """kill -9 of pytest must not leave anything spending money: the sender is a thread of the process, so the
    requests stop with it."""
    with running_server(answer="A", latency=0.2) as server:
        script = tmp_path / "parent.py"
        script.write_text(textwrap.dedent(f'''
            import sys, time
            from pathlib import Path
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            sys.path.insert(0, {str(Path(__file__).parents[1])!r})  # (its helper modules)
            from test_background import jobs_for, make_sender
            sender = make_sender(Path({str(tmp_path)!r}))
            sender.start(jobs_for({server.url!r}, 400))
            print("sending", flush=True)
            time.sleep(300)
        '''))
        parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        assert parent.stdout is not None and parent.stdout.readline().strip() == "sending"
        server.wait_for_requests(10, timeout=60)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert not _alive(parent.pid)
        time.sleep(0.5)  # (requests already on the wire may still be counted meanwhile)
        sent = server.count
        time.sleep(1.0)
        assert server.count == sent < 400


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.e2e
def test_items_run_while_the_later_answers_are_still_coming(pytester, toy):
    """Without xdist the first item does not wait for the last answer: the run takes about as long as the answers."""
    data = toy(12)
    pytester.makepyfile(test_toy=TIMED_TEST)
    with running_server(answer="A", latency=0.25) as server:
        result = run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                     "--medhelm-data-dir", str(data), "--medhelm-concurrency", "2", subprocess=True)
        arrivals = sorted(r["received_at"] for r in server.requests)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*medhelm answers: 12/12*"])
    starts = dict(json.loads(line) for line in (pytester.path / "item_times.jsonl").read_text().splitlines())
    assert len(starts) == 12
    # the first item started before the last request even reached the server (about 1.25 s later)
    assert min(starts.values()) < arrivals[-1] - 0.5, (min(starts.values()), arrivals)
