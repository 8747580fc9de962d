"""How many requests may be in flight: the scheduler's concurrency primitives, each living on one event loop.

* :class:`Window` / :class:`Windows`: per endpoint, a semaphore whose size moves (AIMD: a 429 halves it, a window's
  worth of successes in a row adds one, up to the run's concurrency), with a pause for ``Retry-After``;
* :class:`Gate`: a semaphore whose waiters are served by priority, then in arrival order;
* :class:`SharedSlots`: an endpoint's slots across the processes of a run (one ``flock``-ed file per slot);
* :class:`Slots`: the two above per endpoint with a slot count (``ModelSpec.slots``: a llama.cpp server we started);
* :func:`run_coroutine`: a loop of its own for a caller that may already be on one.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pytest_medhelm.values import ModelSpec


def endpoint_of(spec: ModelSpec) -> str:
    """What a window and a slot count belong to: the URL, or the model when it is sent to its provider."""
    return spec.api_base or spec.name


class Window:
    """How many requests may be in flight to one endpoint: a semaphore whose size moves (AIMD), with a pause for
    Retry-After. Costs one comparison per request while nothing is rate limited."""

    def __init__(self, limit: int, stats: dict[str, Any]) -> None:
        self.limit = max(1, limit)
        self.allowed = self.limit
        self.in_flight = 0
        self.epoch = 0  # bumped at each decrease: a 429 to a request of an older epoch is the same signal
        self.successes = 0
        self.paused_until = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._stats = stats

    async def acquire(self) -> int:
        """Wait for a slot (and for any Retry-After pause); returns the epoch the request is sent in."""
        loop = asyncio.get_running_loop()
        while True:
            pause = self.paused_until - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            if self.in_flight < self.allowed and not self._waiters:
                self.in_flight += 1
                return self.epoch
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append(future)
            self._wake()  # a slot may be free behind earlier waiters that were just granted theirs
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self.release()  # granted just as we were cancelled: give the slot back
                else:
                    self._discard(future)
                raise
            # granted a slot; a pause that started meanwhile still applies
            if self.paused_until - loop.time() > 0:
                self.release()
                continue
            return self.epoch

    def _discard(self, future: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(future)
        except ValueError:
            pass

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.allowed:
            future = self._waiters.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def succeeded(self) -> None:
        if self.allowed >= self.limit:
            return
        self.successes += 1
        if self.successes >= self.allowed:  # a window's worth of successes in a row: one more in flight
            self.successes = 0
            self.allowed += 1
            self._wake()

    def rate_limited(self, epoch: int, retry_after: float | None) -> None:
        self.successes = 0
        if epoch == self.epoch:  # the first 429 of this window: halve; the others of the same burst do not
            self.epoch += 1
            self.allowed = max(1, self.allowed // 2)
            low = self._stats["concurrency_min"]
            self._stats["concurrency_min"] = self.allowed if not low else min(low, self.allowed)
        if retry_after:
            loop = asyncio.get_running_loop()
            self.paused_until = max(self.paused_until, loop.time() + retry_after)


class Windows:
    """One :class:`Window` per endpoint: a 429 from one replica or provider lowers that endpoint's window only."""

    def __init__(self, limit: int, stats: dict[str, Any]) -> None:
        self.limit = limit
        self.stats = stats
        self._windows: dict[str, Window] = {}

    def of(self, endpoint: str) -> Window:
        window = self._windows.get(endpoint)
        if window is None:
            window = self._windows[endpoint] = Window(self.limit, self.stats)
        return window


class Gate:
    """A semaphore whose waiters are served by priority, then in arrival order."""

    def __init__(self, size: int) -> None:
        self.free = max(1, size)
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted just as we were cancelled: pass the slot on
            raise

    def release(self) -> None:
        while self._waiters:
            _rank, _n, future = heapq.heappop(self._waiters)
            if not future.done():  # (a cancelled waiter is skipped)
                future.set_result(None)
                return
        self.free += 1


class SharedSlots:
    """An endpoint's slots across processes: one lock file per slot under ``directory``, taken with ``flock`` (held
    by the open file, so a process that dies frees its slot). This process's own order is kept by the Gate first;
    across processes the first to poll a free slot gets it."""

    POLL_S = 0.01

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self.directory = directory
        self._files: dict[str, list[str]] = {}  # endpoint -> its slots' lock files (the folder made once)

    def _lock_files(self, directory: str | os.PathLike[str], endpoint: str, size: int) -> list[str]:
        files = self._files.get(endpoint)
        if files is None:
            import hashlib

            folder = os.path.join(directory, "slots")
            os.makedirs(folder, mode=0o700, exist_ok=True)
            name = hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:16]
            files = self._files[endpoint] = [os.path.join(folder, f"{name}-{slot}.lock") for slot in range(size)]
        return files

    async def acquire(self, endpoint: str, size: int) -> int | None:
        """The file descriptor holding a free slot, once there is one; None where this cannot be done (no cache
        directory, no flock: a single process's gate is then the only limit)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on POSIX
            return None
        if self.directory is None:
            return None
        files = self._lock_files(self.directory, endpoint, size)
        while True:
            for path in files:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    os.close(fd)
            await asyncio.sleep(self.POLL_S)

    @staticmethod
    def release(fd: int | None) -> None:
        if fd is not None:
            os.close(fd)  # (closing the only descriptor of the open file releases its lock)


class Slots:
    """At most ``spec.slots`` requests in flight per endpoint (for endpoints that have a slot count), in this process
    (a :class:`Gate` each) and across the run's processes (:class:`SharedSlots`). Lower priorities go first."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._gates: dict[str, Gate] = {}
        self.shared = SharedSlots(directory)

    def gate(self, spec: ModelSpec) -> Gate | None:
        if not spec.slots:
            return None
        endpoint = endpoint_of(spec)
        gate = self._gates.get(endpoint)
        if gate is None:
            gate = self._gates[endpoint] = Gate(int(spec.slots))
        return gate


T = TypeVar("T")


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from inside a running event loop (a test using pytest-asyncio): then in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
