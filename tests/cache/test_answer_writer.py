"""The batch writer of a sending loop (models/answer_writer.py), against the real cache: what is queued while a
batch is written goes into the next transaction; a batch that fails is written again entry by entry, so that only
the bad answer fails; closing stores what is still queued."""

from __future__ import annotations

import asyncio
import threading
import time

import diskcache
import pytest

from pytest_medhelm.cache.answer_writer import AnswerWriter
from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.values import Completion


class GatedCache(AnswerCache):
    """The real cache, whose writes wait for ``gate`` and which refuses the keys in ``bad``; it notes each write."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.bad: set[str] = set()
        self.writes: list[list[str]] = []

    def put_many(self, stored):
        self.gate.wait(10)
        self.writes.append([one.key for one in stored])
        if any(one.key in self.bad for one in stored):
            raise diskcache.Timeout("database is locked")
        super().put_many(stored)


def test_answers_queued_meanwhile_share_a_transaction_and_a_bad_one_fails_alone(tmp_path):
    cache = GatedCache(tmp_path / "cache", run_id="run")
    cache.bad = {"k2"}

    async def store_five() -> list[Exception | None]:
        writer = AnswerWriter(cache, asyncio.get_running_loop())
        try:
            futures = [writer.store("k0", Completion("a0"))]
            await asyncio.sleep(0.2)  # the writer took k0 and waits at the gate
            futures += [writer.store(f"k{i}", Completion(f"a{i}")) for i in range(1, 5)]
            cache.gate.set()
            return list(await asyncio.gather(*futures))
        finally:
            writer.close()

    outcomes = asyncio.run(store_five())
    assert cache.writes[:2] == [["k0"], ["k1", "k2", "k3", "k4"]]  # one transaction for what was queued meanwhile
    assert cache.writes[2:] == [["k1"], ["k2"], ["k3"], ["k4"]]  # it failed: again, one by one
    assert [outcome is None for outcome in outcomes] == [True, True, False, True, True]
    assert "database is locked" in str(outcomes[2])
    assert [cache.get(f"k{i}") is not None for i in range(5)] == [True, True, False, True, True]


def test_closing_stores_what_is_still_queued(tmp_path):
    cache = GatedCache(tmp_path / "cache", run_id="run")

    async def store_then_close() -> None:
        writer = AnswerWriter(cache, asyncio.get_running_loop())
        for i in range(3):
            writer.store(f"k{i}", Completion(f"a{i}"))
        threading.Timer(0.2, cache.gate.set).start()
        writer.close()  # (the run's end, or its cancellation: nothing queued is dropped)

    asyncio.run(store_then_close())
    assert [cache.get(f"k{i}").text for i in range(3)] == ["a0", "a1", "a2"]


def test_a_sending_worker_does_not_wait_for_the_cache_before_its_next_request(tmp_path):
    """One worker, four answers, a cache that does not commit until told: the second request goes out while the
    first answer still waits to be stored, the third waits (no more unstored answers than twice the workers), and
    no answer reaches its item before it is stored."""
    from pytest_medhelm.sending.background import BackgroundSender
    from pytest_medhelm.sending.jobs import Job
    from pytest_medhelm.sending.scheduler import Scheduler, Settings
    from pytest_medhelm.testing.server import running_server
    from pytest_medhelm.values import ChatRequest, ModelSpec

    cache = GatedCache(tmp_path / "cache", run_id="run")
    with running_server(answer="A") as server:
        spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=server.url)
        jobs = [Job(spec, ChatRequest.for_prompt(spec, f"question {i}", 4)) for i in range(4)]
        sender = BackgroundSender(Scheduler(cache, Settings(concurrency=1, timeout=10.0)))
        sender.start(jobs)
        deadline = time.monotonic() + 10
        while server.count < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # (a third request, if it were sent, would be by now)
        sent_before_storing, seen_before_storing = server.count, [sender.has(job.key) for job in jobs]
        cache.gate.set()
        results = [sender.wait(job.key) for job in jobs]
        sender.stop()
    assert sent_before_storing == 2
    assert seen_before_storing == [False] * 4
    assert [r.text for r in results] == ["A"] * 4


def first_two_sent(tmp_path, replicas: bool, make_sender) -> list[str]:
    """One worker, a cache that does not commit until told, three answers of which the first has a judge: what
    the server was asked first and second (``replicas``: the model is a group of two replicas of the server)."""
    from pytest_medhelm.sending.batching import batchable
    from pytest_medhelm.sending.jobs import Job
    from pytest_medhelm.sending.scheduler import Scheduler, Settings
    from pytest_medhelm.testing.server import last_user_text, running_server
    from pytest_medhelm.values import REPLICA_SEPARATOR, ChatRequest, ModelSpec

    cache = GatedCache(tmp_path / "cache", run_id="run")
    with running_server(answer="A") as server:
        url = server.url
        if replicas:
            url = REPLICA_SEPARATOR.join([url, url.replace("127.0.0.1", "localhost")])
        spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=url)
        assert not replicas or not batchable(spec)  # (so that the batch sender sends it directly)
        answers = [Job(spec, ChatRequest.for_prompt(spec, f"answer {i}", 4)) for i in range(3)]
        judge = Job(spec, ChatRequest.for_prompt(spec, "judge of answer 0", 4, purpose="judge:toy:1"))
        sender = make_sender(Scheduler(cache, Settings(concurrency=1, timeout=10.0)),
                             lambda job, result: [judge] if job is answers[0] else [])
        sender.start(answers)
        deadline = time.monotonic() + 10
        while server.count < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        sent_first = [last_user_text(r["json"]) for r in server.requests[:2]]
        cache.gate.set()
        assert sender.wait(judge.key).text == "A"
        assert all(sender.wait(job.key).text == "A" for job in answers)
        sender.stop()
    return sent_first


def test_the_judge_of_an_answer_goes_out_before_the_answer_is_stored(tmp_path):
    """The judge of answer 0 is sent right after it, before answer 1, although answer 0 is not stored yet (its
    judges do not wait for the commit)."""
    from pytest_medhelm.sending.background import BackgroundSender

    assert first_two_sent(tmp_path, False, BackgroundSender) == ["answer 0", "judge of answer 0"]


def test_through_the_batch_sender_too_the_judge_of_a_direct_answer_goes_out_before_it_is_stored(tmp_path):
    """The same order through ``--medhelm-batch``'s sender, for the requests it sends directly (a replica group has
    no Batch API)."""
    from pytest_medhelm.sending.background import BackgroundSender
    from pytest_medhelm.sending.batching import Batching

    def batch_sender(scheduler, follow_up):
        return BackgroundSender(scheduler, follow_up, way=Batching(scheduler, tmp_path / "batches"))

    assert first_two_sent(tmp_path, True, batch_sender) == ["answer 0", "judge of answer 0"]


@pytest.mark.parametrize("kind", ["background", "batch"])
def test_a_bug_in_an_urgent_request_ends_the_sending_instead_of_hanging_its_item(tmp_path, kind):
    from pytest_medhelm.sending.background import BackgroundSender, SenderCrashed
    from pytest_medhelm.sending.batching import Batching, batchable
    from pytest_medhelm.sending.jobs import Job
    from pytest_medhelm.sending.scheduler import Scheduler, Settings
    from pytest_medhelm.testing.server import running_server
    from pytest_medhelm.values import REPLICA_SEPARATOR, ChatRequest, ModelSpec

    class UrgentBug(BackgroundSender):  # (the sender under test)
        def _on_done(self, job, result):
            if job.urgent:
                raise RuntimeError("a bug in an item's own request")
            super()._on_done(job, result)

    with running_server(answer="A", latency=0.2) as server:
        url = server.url
        if kind == "batch":  # (a replica group has no Batch API: the batch sender sends everything directly)
            url = REPLICA_SEPARATOR.join([url, url.replace("127.0.0.1", "localhost")])
        spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=url)
        assert kind == "background" or not batchable(spec)
        planned = [Job(spec, ChatRequest.for_prompt(spec, f"planned {i}", 4)) for i in range(20)]
        scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), Settings(concurrency=2, timeout=10.0))
        sender = UrgentBug(scheduler) if kind == "background" else \
            UrgentBug(scheduler, way=Batching(scheduler, tmp_path / "batches"))
        sender.start(planned)
        outcome: list[object] = []

        def ask() -> None:
            try:
                outcome.append(sender.ask(Job(spec, ChatRequest.for_prompt(spec, "my own", 4), urgent=True)))
            except SenderCrashed as exc:
                outcome.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        asking.join(10)
        sender.stop()
    assert not asking.is_alive()
    assert isinstance(outcome[0], SenderCrashed) and "a bug in an item's own request" in str(outcome[0])
