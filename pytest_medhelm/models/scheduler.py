"""Answers ahead of time: every collected item's request, sent concurrently into the cache.

Each finished answer is written to the cache the moment it arrives, so an interrupted run loses at most the
requests in flight. A request is tried ``1 + retries`` times with exponential backoff that honours the server's
``Retry-After``; a failure that retrying cannot fix (a wrong key, an unknown model) marks the model as broken, and
its remaining requests fail at once with the same message instead of hammering the provider.

Failures are kept for the rest of the run (keyed by run id, never across runs), so an item whose request already
failed here reports the provider's message instead of asking again.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable

from pytest_medhelm.models.cache import AnswerCache
from pytest_medhelm.models.request import ChatRequest, Completion, ModelError, ModelSpec
from pytest_medhelm.models.transport import OpenAIWire, RequestFailed, send_litellm, uses_openai_wire

#: statuses that mean every request to this model will fail the same way
SYSTEMATIC_STATUSES = (401, 403, 404)


@dataclass(frozen=True)
class Job:
    spec: ModelSpec
    request: ChatRequest

    @property
    def key(self) -> str:
        return self.request.cache_key()


@dataclass
class Settings:
    concurrency: int = 16
    timeout: float = 120.0
    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0


ProgressCallback = Callable[[int, int, int], None]  # (done, total, failed)


class Scheduler:
    def __init__(self, cache: AnswerCache, settings: Settings) -> None:
        self.cache = cache
        self.settings = settings
        self.broken: dict[str, str] = {}  # model name -> the systematic error
        self.retried = 0

    async def _send(self, wire: OpenAIWire, job: Job) -> Completion:
        if uses_openai_wire(job.spec):
            return await wire.send(job.spec, job.request, self.settings.timeout)
        return await send_litellm(job.spec, job.request, self.settings.timeout)

    async def _attempt(self, wire: OpenAIWire, job: Job) -> Completion:
        last: RequestFailed | None = None
        for attempt in range(self.settings.retries + 1):
            if job.spec.name in self.broken:
                raise ModelError(job.spec.name, self.broken[job.spec.name])
            try:
                return await self._send(wire, job)
            except RequestFailed as exc:
                last = exc
                if exc.status in SYSTEMATIC_STATUSES:
                    self.broken.setdefault(job.spec.name, exc.message)
                    raise ModelError(job.spec.name, exc.message, exc.status) from None
                if not exc.retryable or attempt == self.settings.retries:
                    break
                self.retried += 1
                delay = exc.retry_after
                if delay is None:
                    delay = min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt)
                    delay *= 0.5 + random.random()  # jitter: retries of a burst must not arrive together
                await asyncio.sleep(delay)
        assert last is not None
        tries = self.settings.retries + 1
        raise ModelError(job.spec.name, f"{last.message} (after {tries} attempt{'s' if tries > 1 else ''})",
                         last.status)

    async def run(self, jobs: list[Job], progress: ProgressCallback | None = None) -> dict[str, ModelError]:
        """Send every job; return the failures by cache key. Answers go to the cache as they arrive."""
        failures: dict[str, ModelError] = {}
        if not jobs:
            return failures
        total, done = len(jobs), 0
        wire = OpenAIWire(limit=self.settings.concurrency)
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in jobs:
            queue.put_nowait(job)

        async def worker() -> None:
            nonlocal done
            while True:
                try:
                    job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                try:
                    completion = await self._attempt(wire, job)
                    self.cache.put(job.key, completion, job.request.to_json())
                except ModelError as exc:
                    failures[job.key] = exc
                    self.cache.put_error(job.key, str(exc))
                done += 1
                if progress is not None:
                    progress(done, total, len(failures))

        try:
            await asyncio.gather(*(worker() for _ in range(min(self.settings.concurrency, total))))
        finally:
            await wire.close()
        return failures

    def run_sync(self, jobs: list[Job], progress: ProgressCallback | None = None) -> dict[str, ModelError]:
        return _run_coroutine(self.run(jobs, progress))

    def complete(self, job: Job) -> Completion:
        """One request now, for an item whose answer is not in the cache (a test body asking its own question)."""
        failures = self.run_sync([job])
        if job.key in failures:
            raise failures[job.key]
        completion = self.cache.get(job.key)
        if completion is None:  # cache off/refresh edge: the answer was stored under this run, read it back
            raise ModelError(job.spec.name, "answer was not stored in the cache")
        completion.cached = False
        return completion


def _run_coroutine(coro):
    """asyncio.run, also from inside a running event loop (a test using pytest-asyncio): then in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: dict = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class Progress:
    """done / total, rate and ETA on one terminal line, rewritten in place (a plain line now and then off a tty)."""

    def __init__(self, write: Callable[[str], None], is_tty: bool, label: str = "answers") -> None:
        self.write = write
        self.is_tty = is_tty
        self.label = label
        self.started = time.perf_counter()
        self._last = 0.0

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.perf_counter()
        final = done == total
        if not final and now - self._last < (0.2 if self.is_tty else 10.0):
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else float("inf")
        text = (f"medhelm {self.label}: {done}/{total} ({rate:.1f}/s, "
                f"{'done in' if final else 'ETA'} {elapsed if final else eta:.1f}s)")
        if failed:
            text += f", {failed} failed"
        if self.is_tty:
            self.write("\r" + text + ("\n" if final else ""))
        else:
            self.write(text + "\n")
