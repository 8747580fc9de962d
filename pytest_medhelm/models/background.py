"""Answers while the items run: requests sent in the background, each item waiting only for its own answer.

Without xdist, waiting for every answer before the first item runs would add the item run to the generation time.
Instead the requests go out in item order in the background and each item waits only for its own answer: the
items run while the model is still answering the later ones. Jury requests follow as soon as the answer they judge
arrives (``follow_up``). Every answer is written to the cache the moment it arrives; the items of this process read
the results from memory (xdist workers, from the shared cache). ``stop()`` on Ctrl-C cancels what is in flight, so
an interrupted run loses at most those requests; ``stop(drain=...)`` (a run that stopped by itself: its last item,
``-x``, ``--maxfail``) sends nothing more but lets the requests in flight finish, since they are paid for.

Two ways to send, the same contract: ``start(jobs)``; ``wait(key)`` for a planned job's result; ``ask(job)`` for a
request an item needs now (sent ahead of what waits, or None once the sender takes no more); ``stop()``:

* :class:`ThreadSender`: the scheduler's event loop on a thread of this process. Starts at once; but the items and
  the HTTP client then share one interpreter lock, so with a fast model the run is bound by one core.
* :class:`ProcessSender`: the scheduler in a child process (``python -m pytest_medhelm.models.sender_process``),
  jobs and results as JSON lines over its stdin/stdout (a writer thread feeds the one, a reader thread takes the
  other, so neither pipe can hold the other up). Costs a Python start (~0.3 s) but the requests and the items then
  run on two cores. Used for large runs (``choose_sender``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from pytest_medhelm.values import ChatRequest, Completion, ModelError, ModelSpec
from pytest_medhelm.models.scheduler import Job, Scheduler, Settings, progress_text

Result = Completion | ModelError
#: called with each finished job; returns the jobs that follow from it (the jury's)
FollowUp = Callable[[Job, Result], Iterable[Job]]

#: below this many jobs a run sends from a thread: a child process's start-up would cost more than it saves
PROCESS_MIN_JOBS = 200
SENDER_ENV = "MEDHELM_SENDER"  # "thread" or "process" forces one (tests, and users who need one); default: auto
#: the shared cache URL (--medhelm-cache-url) handed to a child sender (kept off its command line)
SHARED_CACHE_ENV = "PYTEST_MEDHELM_SHARED_CACHE_URL"


def choose_sender(n_jobs: int, in_process_only: bool) -> str:
    forced = os.environ.get(SENDER_ENV, "").strip().lower()
    if forced in ("thread", "process"):
        return "thread" if in_process_only else forced
    return "process" if n_jobs >= PROCESS_MIN_JOBS and not in_process_only else "thread"


class SenderCrashed(RuntimeError):
    """The background sender stopped on an unexpected error: the items that wait for it get this error."""


class Sender:
    """What both ways share: which answers are expected, the results as they arrive, and the waiting."""

    def __init__(self, follow_up: FollowUp | None = None, on_finished: Callable[[], None] | None = None) -> None:
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

    @property
    def crash(self) -> str | None:
        """Why the sender stopped before its work was done (its child killed, a bug); None when it did not."""
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
        called about once a second while it takes (on this thread, without the lock: it may write to the
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
                self._changed.wait(timeout=1.0)  # a timeout so that a dead sender cannot hang the run
                if key in self._results:
                    return self._results[key]
            if on_wait is not None:
                on_wait(time.monotonic() - began)

    def ask(self, job: Job) -> Result | None:  # (each way of sending has its own)
        """Send one request an item needs now (its own question, or one asked again after its error) through this
        running sender, ahead of what waits, and wait for its result: the endpoint's slots and the run's limits
        then hold for it too. None when the sender no longer takes requests (the caller sends it itself)."""
        raise NotImplementedError

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
        lines = []
        for kind in ("answers", "jury"):
            total, done = self.queued[kind], self.done[kind]
            if not total:
                continue
            elapsed = self._last_done.get(kind, self._started) - self._started
            text = progress_text(kind, done, total, elapsed, self.failed[kind], final=True)
            if done < total:
                text += f"; {total - done} not sent or not answered (the run stopped)"
            lines.append(text)
        return lines

    # ------------------------------------------------------------------ the sending side (the thread sender's loop;
    # the process sender's reader, and an item's ask, under its lock)
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
        try:
            more = self._claim(self.follow_up(job, result)) if self.follow_up is not None and not self._draining else []
        except Exception:  # noqa: BLE001 - one answer's follow-ups failed to build: not sent ahead; the item
            more = []  # that needs them asks for them itself and gets the same error as its own
        kind = _kind(job)
        self.done[kind] += 1
        self._last_done[kind] = time.perf_counter()
        if isinstance(result, ModelError):
            self.failed[kind] += 1
        with self._changed:
            self._results[job.key] = result
            self._changed.notify_all()
        self._outstanding -= 1
        return more

    def _mark_finished(self, crash: BaseException | str | None = None) -> None:
        if crash is not None and self._crash is None:
            self._crash = crash
        first = not self._finished.is_set()
        self._finished.set()
        with self._changed:
            self._changed.notify_all()
        if first and self.on_finished is not None:
            self.on_finished()


class ThreadSender(Sender):
    def __init__(self, scheduler: Scheduler, follow_up: FollowUp | None = None,
                 on_finished: Callable[[], None] | None = None) -> None:
        super().__init__(follow_up, on_finished)
        self.scheduler = scheduler
        self._loop: Any = None
        self._queue: Any = None
        self._task: Any = None
        self._thread: threading.Thread | None = None
        self._ended = False  # (on the loop) nothing is outstanding: the sending ends and takes no more jobs

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
        taken = threading.Event()
        accepted: list[bool] = []

        def take() -> None:  # on the loop, where the end is decided: no race with it
            try:
                if not self._ended and not self._draining:
                    for new in self._take(job):
                        self._queue.put_nowait(new)
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
        queue = self._queue
        while queue is not None and not queue.empty():
            queue.get_nowait()
        self.scheduler.drain()  # what the scheduler holds ready is dropped too
        if queue is not None:
            queue.put_nowait(None)  # the workers end once their requests in flight are answered

    def _main(self, jobs: list[Job], ready: threading.Event) -> None:
        import asyncio

        crash: BaseException | None = None
        try:
            asyncio.run(self._serve(jobs, ready))
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # a bug: the waiting items report it rather than hang
            crash = exc
        finally:
            ready.set()
            self._mark_finished(repr(crash) if crash is not None else None)

    async def _serve(self, jobs: list[Job], ready: threading.Event) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._queue = asyncio.Queue()
        for job in self._claim(jobs):
            self._queue.put_nowait(job)
        ready.set()
        if self._outstanding == 0:
            self._ended = True
            return
        await self.scheduler.serve(self._queue, self._on_done)

    def _on_done(self, job: Job, result: Result) -> None:  # on the loop
        for follow in self._finish_job(job, result):
            self._queue.put_nowait(follow)
        if self._outstanding == 0:
            self._ended = True
            self._queue.put_nowait(None)


class ProcessSender(Sender):
    """The scheduler in a child process. The child writes every answer to the shared cache itself (so nothing is
    lost if this process dies) and reports each result on its stdout; a reader thread here records them and
    claims their follow-ups, a writer thread feeds the child's stdin."""

    def __init__(self, cache_dir: Path, cache_mode: str, run_id: str, settings: Settings, log_path: Path,
                 follow_up: FollowUp | None = None, on_finished: Callable[[], None] | None = None,
                 cache_url: str | None = None) -> None:
        super().__init__(follow_up, on_finished)
        # if pytest dies (even kill -9) the child must not go on spending: it asks the kernel for a SIGTERM when
        # this process ends (set by the child itself: no preexec_fn in a process with threads), and it also stops
        # by itself when its stdin closes
        self._config = {"parent_pid": os.getpid(), "cache_dir": str(cache_dir), "cache_mode": cache_mode,
                        "run_id": run_id, "concurrency": settings.concurrency, "timeout": settings.timeout,
                        "retries": settings.retries}
        # the shared cache's URL may hold a password: in the child's environment, never on its command line (ps)
        self._cache_url = cache_url
        self._log_path = log_path
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._writer: threading.Thread | None = None
        # what goes to the child's stdin, written by one thread of its own: the reader must never block on a write
        # while the child is itself blocked writing results that only the reader would take (a pipe holds 64 KiB;
        # one judge request of a long clinical note is more than that)
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._cancelled = False  # set by stop(): lines not yet written are dropped, the child's input is closed
        # the reader (results, follow-ups, the end) and an item asking its own question both claim jobs: the end is
        # said once nothing is outstanding, under this lock, and after it no job is taken
        self._ending = threading.Lock()
        self._ended = False
        self._jobs: dict[str, Job] = {}
        self.broken: dict[str, str] = {}
        self.summary = ""

    def start(self, jobs: list[Job]) -> None:
        from pytest_medhelm.models.cache import make_private_dir

        self._started = time.perf_counter()
        make_private_dir(self._log_path.parent)
        log = os.fdopen(os.open(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        env = {name: value for name, value in os.environ.items() if name != SHARED_CACHE_ENV}
        if self._cache_url:
            env[SHARED_CACHE_ENV] = self._cache_url
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "pytest_medhelm.models.sender_process", json.dumps(self._config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, close_fds=True,
                env=env)
        finally:
            log.close()
        self._reader = threading.Thread(target=self._read, name="medhelm-sender-reader", daemon=True)
        self._reader.start()
        self._writer = threading.Thread(target=self._pump, name="medhelm-sender-writer", daemon=True)
        self._writer.start()
        with self._ending:
            self._send(self._claim(jobs))
            self._end_if_done()

    def ask(self, job: Job) -> Result | None:
        with self._ending:
            proc = self._proc
            if self._ended or self._draining or self._cancelled or proc is None or proc.poll() is not None:
                return None
            self._send(self._take(job))
        return self.wait(job.key)

    def stop(self, timeout: float = 10.0, drain: float | None = None) -> None:
        proc = self._proc
        if proc is None:
            return
        if drain and proc.poll() is None:
            self._draining = True
            self._write('{"drain": true}\n')  # the child drops what is queued and ends after what is in flight
            try:
                proc.wait(drain)
            except subprocess.TimeoutExpired:
                pass
        # an end of input before {"end": true} (sent once nothing is outstanding) tells the child to cancel what is
        # queued or in flight and exit; lines still waiting to be written are not sent at all
        self._cancelled = True
        self._outbox.put(None)
        if proc.poll() is None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()  # (a write the child no longer reads then fails, and the writer ends)
                proc.wait()
        for thread in (self._writer, self._reader):
            if thread is not None:
                thread.join(timeout)

    # ------------------------------------------------------------------ the pipes
    def _send(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        for job in jobs:
            self._jobs[job.key] = job
        self._write("\n".join(_job_line(job) for job in jobs) + "\n")

    def _end_if_done(self) -> None:  # (holding self._ending)
        if self._outstanding == 0 and not self._ended:
            self._ended = True
            self._write('{"end": true}\n')

    def _write(self, text: str) -> None:
        self._outbox.put(text.encode("utf-8"))  # never blocks: see _pump

    def _pump(self) -> None:
        """The writer thread: the only one that writes to the child's stdin, and the one that closes it."""
        stdin = self._proc.stdin  # type: ignore[union-attr]
        assert stdin is not None
        try:
            while True:
                chunk = self._outbox.get()
                if chunk is None:
                    break
                if self._cancelled:
                    continue
                stdin.write(chunk)
                stdin.flush()
        except (OSError, ValueError):  # the child is gone (its log says why); the reader reports it
            pass
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _read(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        crash: str | None = None
        try:
            for raw in proc.stdout:
                message = json.loads(raw)
                if "summary" in message:  # the child's last line
                    self.broken, self.summary = message["broken"], message["summary"]
                    continue
                job = self._jobs[message["key"]]
                if "error" in message:
                    result: Result = ModelError.from_json(message["error"])
                else:
                    result = Completion(**message["completion"])
                with self._ending:
                    self._send(self._finish_job(job, result))
                    self._end_if_done()
        except Exception as exc:  # a bug: the waiting items report it rather than hang
            crash = repr(exc)
            self._mark_finished(crash)  # (first: the items stop waiting even if the child does not end)
            proc.kill()  # its results would no longer be read: it would block on a full pipe forever
        code = proc.wait()
        if crash is None and self._outstanding and code != 0:
            crash = f"the sender process exited with status {code}; its log: {self._log_path}"
        self._mark_finished(crash)


def _kind(job: Job) -> str:
    """What a job counts as in the progress and summary lines: an item's own request (``asked``) is not one of the
    run's planned answers or judgements, and is not shown there."""
    if job.urgent:
        return "asked"
    return "answers" if job.request.purpose == "answer" else "jury"


def _job_line(job: Job) -> str:
    """A job as the child reads it (:func:`job_from_json`): one JSON line."""
    spec = job.spec
    return json.dumps({"spec": {"name": spec.name, "litellm_model": spec.litellm_model, "api_base": spec.api_base,
                                "identity": spec.identity, "api_key_env": spec.api_key_env, "slots": spec.slots},
                       "request": job.request.to_json(), "urgent": job.urgent})


def job_from_json(message: dict[str, Any]) -> Job:
    return Job(ModelSpec(**message["spec"]), ChatRequest.from_json(message["request"]), bool(message.get("urgent")))
