"""Answers while the items run: requests sent in the background, each item waiting only for its own answer.

Without xdist, waiting for every answer before the first item runs would add the item run to the generation time.
Instead the requests go out in item order in the background and each item waits only for its own answer: the
items run while the model is still answering the later ones. Jury requests follow as soon as the answer they judge
arrives (``follow_up``). Every answer is written to the cache the moment it arrives; the items of this process read
the results from memory (xdist workers, from the shared cache). ``stop()`` on Ctrl-C cancels what is in flight, so
an interrupted run loses at most those requests; ``stop(drain=...)`` (a run that stopped by itself: its last item,
``-x``, ``--maxfail``) sends nothing more but lets the requests in flight finish, since they are paid for.

The sender's contract: ``start(jobs)``; ``wait(key)`` for a planned job's result; ``ask(job)`` for a request an
item needs now (sent ahead of what waits, or None once the sender takes no more); ``stop()``. The scheduler's event
loop runs on a thread of this process (:meth:`Scheduler.serve <pytest_medhelm.sending.scheduler.Scheduler.serve>`,
the one way requests are sent). A sender in a child process was measured against it on the acceptance workload
(2,000 answers at concurrency 64 against a 100 ms server) and bought less than the 15 % that would pay for a second
way to send (BENCHMARKS.md); a thread also dies with pytest, however pytest ends, so nothing goes on spending.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler
from pytest_medhelm.values import Completion, ModelError

if TYPE_CHECKING:
    from pytest_medhelm.sending.protocol import Way

Result = Completion | ModelError
#: how often an item waiting for its answer wakes to show the progress and to check that the sender lives (seconds)
WAIT_TICK_S = 1.0
#: called with each finished job; returns the jobs that follow from it (the jury's)
FollowUp = Callable[[Job, Result], Iterable[Job]]


class SenderCrashed(RuntimeError):
    """The background sender stopped on an unexpected error: the items that wait for it get this error."""


class BackgroundSender:
    """The scheduler's loop on a thread of this process: which answers are expected, the results as they arrive,
    and the waiting for them. With a ``way`` (:class:`~.protocol.Way`, e.g. ``--medhelm-batch``'s
    :class:`~.batching.Batching`), the jobs it takes wait for its next round instead of going directly: the planned
    ones and those that follow from a round's results at once, those that follow from a direct answer once nothing
    sent directly is in flight."""

    def __init__(self, scheduler: Scheduler, follow_up: FollowUp | None = None,
                 on_finished: Callable[[], None] | None = None, way: Way | None = None) -> None:
        self.scheduler = scheduler
        self.way = way
        self.follow_up = follow_up
        self.on_finished = on_finished  # called once, from the sending side, when nothing more will be sent
        self.done: Counter[str] = Counter()  # finished jobs (answered or failed for good), by kind
        self.failed: Counter[str] = Counter()
        self.queued: Counter[str] = Counter()
        self._started = 0.0
        self._last_done: dict[str, float] = {}
        self._results: dict[str, Result] = {}
        self._expected: set[str] = set()
        self._changed = threading.Condition()
        self._outstanding = 0  # jobs queued or in flight, follow-ups and asks included (the sending side's)
        self._crash: BaseException | str | None = None
        self._finished = threading.Event()
        self._draining = False  # set by stop(drain=True): no follow-ups, nothing new is started
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Job | None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._thread: threading.Thread | None = None
        self._ended = False  # (on the loop) nothing is outstanding: the sending ends and takes no more jobs
        # (on the loop, with a way) the jobs for its next round; whether to send it without waiting for the direct
        # ones; the keys sent directly, in flight (not the asks); set when any of these changes
        self._round: list[Job] = []
        self._round_ready = False
        self._direct: set[str] = set()
        self._wake: asyncio.Event | None = None

    @property
    def crash(self) -> str | None:
        """Why the sender stopped before its work was done (a bug); None when it did not."""
        return None if self._crash is None else str(self._crash)

    # ------------------------------------------------------------------ the caller's side
    def expects(self, key: str) -> bool:
        """Whether the answer to ``key`` is (or will be) sent here."""
        with self._changed:
            return key in self._expected

    def has(self, key: str) -> bool:
        """Whether the answer to ``key`` (or its error) is already here."""
        with self._changed:
            return key in self._results

    def wait(self, key: str, on_wait: Callable[[float], None] | None = None) -> Result:
        """The answer to ``key`` (or the error that ended its request), once it is there. ``on_wait(seconds)`` is
        called about every WAIT_TICK_S seconds while it takes (on this thread, without the lock: it may write to the
        terminal)."""
        began = time.monotonic()
        while True:
            with self._changed:
                if key in self._results:
                    return self._results[key]
                if self._crash is not None:
                    raise SenderCrashed(f"pytest-medhelm: the background sender stopped: {self._crash}")
                if self._finished.is_set():
                    raise SenderCrashed("pytest-medhelm: the background sender stopped before this answer came")
                self._changed.wait(timeout=WAIT_TICK_S)  # a timeout so that a dead sender cannot hang the run
                if key in self._results:
                    return self._results[key]
            if on_wait is not None:
                on_wait(time.monotonic() - began)

    def _take(self, job: Job) -> list[Job]:
        """``job`` claimed as outstanding (again, when what the sender has for it is an error that is being asked
        anew): the jobs to send, none when it is already on its way."""
        with self._changed:
            if isinstance(self._results.get(job.key), ModelError):
                del self._results[job.key]
                self._expected.discard(job.key)
        return self._claim([job])

    def summary_lines(self) -> list[str]:
        """``medhelm answers: 40/40 (12.5/s, done in 3.2s)`` and the same for the jury; what was not sent when the
        run stopped early."""
        lines: list[str] = []
        for kind in ("answers", "jury"):
            total, done = self.queued[kind], self.done[kind]
            if not total:
                continue
            elapsed = self._last_done.get(kind, self._started) - self._started
            text = progress_text(kind, done, total, elapsed, self.failed[kind], final=True)
            if done < total:
                text += f"; {total - done} not sent or not answered (the run stopped)"
            lines.append(text)
        return lines + (self.way.summary_lines() if self.way is not None else [])

    @property
    def status(self) -> str:
        """What the way's rounds in flight are (the waiting item's line: ``batch batch_1 in_progress 3/12``), or ""."""
        return self.way.status if self.way is not None else ""

    # ------------------------------------------------------------------ what a way of sending sees (on the loop)
    def route(self, job: Job, ready: bool = True) -> None:
        """A claimed job: into the way's next round (``ready``: send that round without waiting for the direct
        requests in flight), or sent directly."""
        if self.way is not None and self.way.takes(job):
            self._round.append(job)
            self._round_ready = self._round_ready or ready
            self._wake_up()
        else:
            self._direct.add(job.key)
            self._put(job)

    def finish(self, job: Job, result: Result) -> None:
        """A result a round brought (stored): its item gets it; the jobs that follow from it go to the next round."""
        for follow in self._finish_job(job, result):
            self.route(follow)
        self._wake_up()
        self._end_if_done()

    # ------------------------------------------------------------------ the sending side (the loop)
    def _claim(self, jobs: Iterable[Job]) -> list[Job]:
        """The jobs not expected yet, now counted as outstanding."""
        new = []
        with self._changed:
            for job in jobs:
                if job.key not in self._expected:
                    self._expected.add(job.key)
                    new.append(job)
        for job in new:
            self._outstanding += 1
            self.queued[_kind(job)] += 1
        return new

    def _finish_job(self, job: Job, result: Result) -> list[Job]:
        """Record ``result``; returns the follow-up jobs to queue (claimed before this job counts as done, so the
        stream cannot end in between)."""
        more = self._follow_ups(job, result)
        self._record(job, result)
        return more

    def _follow_ups(self, job: Job, result: Result) -> list[Job]:
        """The jobs that follow from ``result`` (the jury's), claimed as outstanding; none once draining."""
        try:
            return self._claim(self.follow_up(job, result)) if self.follow_up is not None and not self._draining else []
        except Exception:  # noqa: BLE001 - one answer's follow-ups failed to build: not sent ahead; the item
            return []  # that needs them asks for them itself and gets the same error as its own

    def _record(self, job: Job, result: Result) -> None:
        """``result`` (stored) is the job's: its waiting item gets it, and the job no longer counts as outstanding."""
        kind = _kind(job)
        self.done[kind] += 1
        self._last_done[kind] = time.perf_counter()
        if isinstance(result, ModelError):
            self.failed[kind] += 1
        with self._changed:
            self._results[job.key] = result
            self._changed.notify_all()
        self._outstanding -= 1

    def _mark_finished(self, crash: BaseException | str | None = None) -> None:
        if crash is not None and self._crash is None:
            self._crash = crash
        first = not self._finished.is_set()
        self._finished.set()
        with self._changed:
            self._changed.notify_all()
        if first and self.on_finished is not None:
            self.on_finished()

    # ------------------------------------------------------------------ the thread and its loop
    @property
    def summary(self) -> str:
        return self.scheduler.summary()

    @property
    def broken(self) -> dict[str, str]:
        return self.scheduler.broken

    def start(self, jobs: list[Job]) -> None:
        self._started = time.perf_counter()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(jobs, ready), name="medhelm-sender", daemon=True)
        self._thread.start()
        ready.wait()

    def stop(self, timeout: float = 10.0, drain: float | None = None) -> None:
        """Cancel what is queued or in flight and wait for the thread (answers already stored stay stored).

        ``drain``: first let the requests in flight finish (they are paid for: their answers are cached), for at most
        that many seconds, sending nothing new; what is only queued is dropped."""
        if drain:
            self._draining = True  # (before the loop drops the queue: no follow-up is claimed after it)
            if self._call_on_loop(self._drop_queued) and self._thread is not None:
                self._thread.join(drain)
        if self._task is not None:
            self._call_on_loop(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)

    def ask(self, job: Job) -> Result | None:
        """Send one request an item needs now (its own question, or one asked again after its error) through this
        running sender, ahead of what waits, and wait for its result: the endpoint's slots and the run's limits
        then hold for it too. None when the sender no longer takes requests (the caller sends it itself)."""
        taken = threading.Event()
        accepted: list[bool] = []

        def take() -> None:  # on the loop, where the end is decided: no race with it
            try:
                if not self._ended and not self._draining:
                    for new in self._take(job):
                        self._put(new)
                    accepted.append(True)
            finally:  # (whatever happens, the asking item does not wait for this forever)
                taken.set()

        if not self._call_on_loop(take):
            return None
        while not taken.wait(0.05):
            if self._finished.is_set():  # the loop ended before it took the job
                break
        return self.wait(job.key) if accepted else None

    def _call_on_loop(self, fn: Callable[[], Any]) -> bool:
        """Run ``fn`` on the sender's loop, unless it is not running (any more); whether it was scheduled."""
        loop = self._loop
        if loop is None or self._finished.is_set():
            return False
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop closed meanwhile
            return False
        return True

    def _drop_queued(self) -> None:  # on the loop
        self._round.clear()
        queue = self._queue
        while queue is not None and not queue.empty():
            queue.get_nowait()
        self.scheduler.drain()  # what the scheduler holds ready is dropped too
        if queue is not None:
            queue.put_nowait(None)  # the workers end once their requests in flight are answered
        self._wake_up()

    def _put(self, job: Job | None) -> None:  # on the loop
        assert self._queue is not None
        self._queue.put_nowait(job)

    def _main(self, jobs: list[Job], ready: threading.Event) -> None:
        crash: BaseException | None = None
        try:
            asyncio.run(self._serve(jobs, ready))
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - a bug: the waiting items report it rather than hang
            crash = exc
        finally:
            ready.set()
            self._mark_finished(repr(crash) if crash is not None else None)

    async def _serve(self, jobs: list[Job], ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._queue = asyncio.Queue()
        if self.way is not None:
            await self._serve_in_rounds(jobs, ready, self.way)
            return
        for job in self._claim(jobs):
            self._put(job)
        ready.set()
        if self._outstanding == 0:
            self._ended = True
            return
        await self.scheduler.serve(self._queue, self._on_done, on_outcome=self._on_outcome)

    async def _serve_in_rounds(self, jobs: list[Job], ready: threading.Event, way: Way) -> None:
        """The direct requests served as without a way, and beside them the way's rounds, one at a time: the next
        round goes once its jobs are ready (planned, or following a round's results) or nothing direct is in
        flight."""
        assert self._queue is not None
        self._wake = asyncio.Event()
        way.open(self)
        for job in self._claim(jobs):
            self.route(job)
        self._round_ready = True
        ready.set()
        direct = asyncio.ensure_future(self.scheduler.serve(self._queue, self._on_done, on_outcome=self._on_outcome))
        direct.add_done_callback(lambda _direct: self._wake_up())  # (a bug there ends this loop too, below)
        self._end_if_done()
        try:
            while not self._draining and not direct.done():
                if self._round and (self._round_ready or not self._direct):
                    round_jobs, self._round, self._round_ready = self._round, [], False
                    await way.send_round(round_jobs)
                    continue
                if self._outstanding == 0:
                    break
                self._wake.clear()
                await self._wake.wait()
            await direct
        finally:
            direct.cancel()
            try:  # (its own cleanup ends before this one: cancelled again by asyncio.run, it would be cut short)
                await direct
            except BaseException:  # noqa: BLE001 - its cancellation, or the error already raised above
                pass
            await way.close()

    def _on_outcome(self, job: Job, outcome: Result) -> None:  # on the loop, before the outcome is stored
        # the judges of an answer go out as soon as it is here: the worker that got it takes the first of them next
        # (the storing happens meanwhile; the judges do not wait for it). An answer that then cannot be stored is
        # its item's error, and its judges' verdicts go unused: that cache failure is rare, and waiting for every
        # store would hold back every judge.
        for follow in self._follow_ups(job, outcome):
            self.route(follow, ready=False)

    def _on_done(self, job: Job, result: Result) -> None:  # on the loop, once the result is stored
        self._direct.discard(job.key)
        self._record(job, result)
        self._wake_up()
        self._end_if_done()

    def _end_if_done(self) -> None:  # on the loop
        if self._outstanding == 0 and not self._ended:
            self._ended = True
            self._put(None)
            self._wake_up()

    def _wake_up(self) -> None:  # on the loop: the rounds' loop looks again (a round ready, the end)
        if self._wake is not None:
            self._wake.set()


def _kind(job: Job) -> str:
    """What a job counts as in the progress and summary lines: an item's own request (``asked``) is not one of the
    run's planned answers or judgements, and is not shown there."""
    if job.urgent:
        return "asked"
    return "answers" if job.request.purpose == "answer" else "jury"


def progress_text(label: str, done: int, total: int, elapsed: float, failed: int = 0,
                  final: bool | None = None) -> str:
    """``medhelm answers: 40/40 (12.5/s, done in 3.2s)``, with the ETA while not final, and the failures."""
    elapsed = max(elapsed, 1e-9)
    rate = done / elapsed
    if done == total if final is None else final:
        text = f"medhelm {label}: {done}/{total} ({rate:.1f}/s, done in {elapsed:.1f}s)"
    elif rate > 0:
        text = f"medhelm {label}: {done}/{total} ({rate:.1f}/s, ETA {(total - done) / rate:.1f}s)"
    else:  # nothing back yet
        text = f"medhelm {label}: {done}/{total} (waiting {elapsed:.0f}s for the first)"
    return text + (f", {failed} failed" if failed else "")


def ask_alone(scheduler: Scheduler, job: Job) -> Result:
    """``job`` sent now by a sender of its own, for an item whose request no running sender takes (an xdist
    worker's own question, or one asked after the sending ended): the same loop and rules as every request, so
    that an item's question has one way to the wire."""
    sender = BackgroundSender(scheduler)
    sender.start([job])
    try:
        return sender.wait(job.key)
    finally:
        sender.stop()
