"""One :meth:`Scheduler.serve <pytest_medhelm.sending.scheduler.Scheduler.serve>`: the loop that takes jobs from a
queue and sends them through the scheduler's rules (:mod:`.scheduler`: one job's tries, windows, slots, budget).

Its workers take the jobs ready in the order of (priority, arrival): what an item waits for now, then the jury's
requests, then the answers. Each result goes to ``on_outcome`` as it arrives (a judge of that answer is queued then,
and the same worker takes it next), to the cache through one writer thread, then to ``on_done``; the worker does not
wait for the cache before its next request.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_medhelm.cache.answer_writer import AnswerWriter
from pytest_medhelm.sending.concurrency import Slots, Windows
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.transport import OpenAIWire

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Completion, ModelError

#: a job's result, once stored (what its item gets)
OnDone = Callable[[Job, "Completion | ModelError"], None]
#: a job's outcome as it arrives, before it is stored (what follows from it may be queued then)
OnOutcome = Callable[[Job, "Completion | ModelError"], None]
#: the scheduler's rules for one job: its tries until an answer or an error (never an exception) ...
SendJob = Callable[["Sending", Job], Awaitable["Completion | ModelError"]]
#: ... and the storing of that outcome, which gives what the job's item gets
StoreOutcome = Callable[["Sending", Job, "Completion | ModelError"], Awaitable["Completion | ModelError"]]


def priority(job: Job) -> int:
    """Where requests wait: what an item waits for now (-1), then jury requests (0), then answers (1): the judge of
    an answer that came follows it."""
    return -1 if job.urgent else 1 if job.request.purpose == "answer" else 0


END = 2  # the end of a serve's work: after every job


@dataclass
class Sending:
    """One :meth:`Scheduler.serve` on its own loop: what it sends through (``writer`` stores the answers, in
    order), and its jobs ready to send, in the order of (priority, arrival); a ``None`` job is the end."""
    wire: OpenAIWire
    windows: Windows
    slots: Slots
    writer: AnswerWriter
    loop: asyncio.AbstractEventLoop
    ready: asyncio.PriorityQueue[tuple[int, int, Job | None]] = field(default_factory=asyncio.PriorityQueue)
    arrivals: Iterator[int] = field(default_factory=itertools.count)
    draining: bool = False  # drain(): nothing more is sent

    def put(self, job: Job | None) -> None:
        self.ready.put_nowait((END if job is None else priority(job), next(self.arrivals), job))


async def serve(sending: Sending, queue: asyncio.Queue[Job | None], on_done: OnDone, workers: int,
                on_outcome: OnOutcome | None, send: SendJob, store: StoreOutcome) -> None:
    """:meth:`Scheduler.serve <pytest_medhelm.sending.scheduler.Scheduler.serve>`'s loop, with ``workers`` workers,
    through ``sending`` (which the scheduler opened and closes)."""
    # every job put in ``queue`` moves at once into ``sending.ready``, where a jury request goes before the
    # answers still waiting (then arrival order): the judge of an answer that just came is sent next, not after
    # every answer queued before it, so the items of open-ended benchmarks finish as the run goes. What an item
    # waits for now (``Job.urgent``) does not wait for a free worker at all: it starts at once, and only an
    # endpoint's slot, which it gets before anything else waiting for one, can hold it back.
    urgent: set[asyncio.Task[None]] = set()
    # A worker hands each result to the writer and takes its next job at once: its next request does not wait
    # for the cache's commit (under a busy GIL, two thread hand-offs per request). The result reaches on_done
    # once stored, on a task of its own. Requests in flight and results not yet stored are at most twice the
    # workers (``room``): a stalled cache holds the sending back, as it did. A bug in such a task, or in an urgent
    # one, ends the serve as a bug in a worker does.
    storing: set[asyncio.Task[None]] = set()
    room = asyncio.Semaphore(2 * workers)
    failed: asyncio.Future[None] = sending.loop.create_future()

    def watch(task: asyncio.Task[None], tasks: set[asyncio.Task[None]]) -> None:
        tasks.add(task)

        def ended(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            if not task.cancelled() and task.exception() is not None and not failed.done():
                failed.set_exception(task.exception())  # type: ignore[arg-type]  # (not None: checked)

        task.add_done_callback(ended)

    async def report(job: Job, outcome: Completion | ModelError) -> None:
        on_done(job, await store(sending, job, outcome))

    async def outcome_of(job: Job) -> Completion | ModelError:
        outcome = await send(sending, job)
        if on_outcome is not None:
            on_outcome(job, outcome)
        return outcome

    async def send_now(job: Job) -> None:
        await report(job, await outcome_of(job))

    def move(job: Job | None) -> None:
        if job is not None and job.urgent:
            watch(asyncio.ensure_future(send_now(job)), urgent)
            return
        sending.put(job)

    async def pump() -> None:  # what arrives while every worker waits
        while True:
            job = await queue.get()
            move(job)
            if job is None:
                return

    async def worker() -> None:
        while True:
            while not queue.empty():  # what on_outcome just queued (a judge) before this worker's next job
                job = queue.get_nowait()
                if job is None:  # the end: left for the pump, which ends with it
                    queue.put_nowait(None)
                    break
                move(job)
            await room.acquire()
            _rank, _arrival, job = await sending.ready.get()
            if job is None or sending.draining:
                room.release()
                sending.put(None)  # the end, for the other workers too
                return
            task = asyncio.ensure_future(report(job, await outcome_of(job)))
            task.add_done_callback(lambda _task: room.release())
            watch(task, storing)

    tasks = [asyncio.ensure_future(pump()),
             *(asyncio.ensure_future(worker()) for _ in range(workers))]
    workers_ended = asyncio.gather(*tasks)
    try:
        watched: set[asyncio.Future[Any]] = {workers_ended, failed}
        ended, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        for future in ended:
            future.result()  # (raises a worker's bug, or one in an urgent job or in reporting a stored result)
        # (the end comes once nothing is outstanding, so only a drained run leaves these unfinished)
        await asyncio.gather(*urgent, *storing)
    finally:
        # no worker outlives the serve: one still sending when the scheduler closes the wire (another one's error
        # ended the loop) would report the cut request as its job's failure
        workers_ended.cancel()  # (and with it, its workers: an outcome nobody reads is not reported)
        for task in (*urgent, *storing):
            task.cancel()
        await asyncio.gather(workers_ended, *tasks, *urgent, *storing, return_exceptions=True)
        if failed.done() and not failed.cancelled():
            failed.exception()  # (already raised by the gather above, or by the wait: read, so never reported unread)
