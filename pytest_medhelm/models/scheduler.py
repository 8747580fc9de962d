"""Answers ahead of time: every collected item's request, sent concurrently into the cache.

Each finished answer is written to the cache the moment it arrives, so an interrupted run loses at most the
requests in flight. Reliability rules, each bounded so that a run always finishes:

* **Retries.** A request is tried ``1 + retries`` times. Between tries it waits an exponential backoff with jitter
  (``backoff_base * 2**attempt``, capped at ``backoff_max``, times a random factor in [0.5, 1.5) so that the retries
  of a burst do not arrive together), or the server's ``Retry-After`` when it sends one (capped at
  ``retry_after_max``: a provider asking for an hour does not get to hang the run).
* **Rate limits (AIMD)**, per endpoint (a URL, or a model sent to its provider's API). A 429 halves the number
  of requests allowed in flight to that endpoint (at least 1) and pauses its new requests for its
  ``Retry-After``. The 429s of one burst are one signal: only a 429 to a request sent after the last decrease
  halves again (as TCP counts one loss per window). After a window's worth of successes in a row
  (as many as are allowed in flight), one more request is allowed, up to ``concurrency``.
* **Systematic failures.** A 401, 403 or 404 (a wrong key, an unknown model) cannot be fixed by retrying: the
  model is marked broken (``.broken``) and its remaining requests fail at once with the same message instead of
  hammering the provider.
* **Outages.** When a request has used all its tries on connection-level failures (refused, reset, timed out) and
  no request to the same endpoint has succeeded since it started, the endpoint is marked down (``.down``): its
  other requests fail at once with that message rather than each waiting through its own retries. A success
  from the endpoint clears the mark; after ``DOWN_RECHECK_S`` the next request tries again. Every request that
  fails because its endpoint is down carries the same one-line message; when the endpoint never answered in this
  run, its model is listed in ``.broken`` (until the endpoint answers), so that the session says it once and
  stops asking (:func:`systematic_failure`). An endpoint that answered, then went down, "stopped answering": the
  answers it gave count, the rest error one by one.
* **Malformed bodies** (a 200 that is not a chat completion) are retried like server errors, then fail.
* **Anything else** (a bug in a parser, a cache whose lock timed out, an exception a provider library was not
  expected to raise) is that job's error, not the run's: the job fails with the exception's type and message (not
  retried: nothing says another try would differ) and every other job goes on. An answer that came but could not
  be stored in the cache is such an error too.
* **Slots.** An endpoint that serves a fixed number of requests at once (``ModelSpec.slots``: a llama.cpp server we
  started) never has more than that in flight from us: the others wait for a slot *before* they are sent, so
  their timeout counts from when they are sent, not while they queue (a server that queued them itself would
  let them time out there and be sent again, each re-send queueing behind the last). The slots hold across the
  processes of a run too (xdist's controller sends the planned answers while a worker asks its own question):
  one lock file per slot in the cache directory, taken with ``flock``.
* **Replicas.** A model served by several endpoints (``--medhelm-endpoint MODEL=URL1,URL2``) sends each try to
  the least busy of them; one that fails at the connection or with a 5xx rests a while and the try goes at once to
  another (:mod:`pytest_medhelm.models.replicas`). Each replica has its own window and slots.

Failures are kept for the rest of the run (keyed by run id, never across runs, as structured values), so an item
whose request already failed reports the provider's message instead of asking again (a rerun of that item asks
again). ``.stats`` counts what happened (requests sent, retries, rate-limit responses, failures, the lowest
concurrency reached) for the run to print.

**Budget** (``--medhelm-budget``, optional): each job reserves its upper bound in the
:class:`~pytest_medhelm.budget.Budget` just before its first try is sent, once per job (its retries are not
counted again: only one answer comes back). A job the budget refuses is not sent: it fails with
:class:`~pytest_medhelm.values.BudgetExhausted` (counted as ``not_sent_budget``, not ``failed``; its items are
skipped). An answer settles the reservation with its actual cost; a job that fails for good (or is cancelled)
releases it. Without a budget nothing of this runs.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from pytest_medhelm.budget import Budget, Reservation
from pytest_medhelm.models.cache import AnswerCache
from pytest_medhelm.models.replicas import ReplicaTable, is_replica_failure
from pytest_medhelm.values import (BudgetExhausted, ChatRequest, Completion, ModelError, ModelSpec,
                                   redact_url)
from pytest_medhelm.models.transport import (OpenAIWire, RequestFailed, api_key_for, send_litellm,
                                             uses_openai_wire)

#: statuses that mean every request to this model will fail the same way
SYSTEMATIC_STATUSES = (401, 403, 404)
#: what the message of a request to an endpoint marked down says (also in the text of a stored error) when the
#: endpoint never answered in this run; one that answered before and then went down "stopped answering": its
#: answers so far count, and its items error one by one
UNREACHABLE = " is unreachable or not answering: "
STOPPED_ANSWERING = " stopped answering: "


def systematic_failure(error: ModelError) -> bool:
    """Whether ``error`` fails every request of its model alike: a 401, 403 or 404, or an endpoint that never
    answered in this run. The run stops asking (and repeating the message) once every model under test is so."""
    return error.status in SYSTEMATIC_STATUSES or error.systematic


RATE_LIMITED = 429
#: how long an endpoint marked down fails its requests at once before one is tried again
DOWN_RECHECK_S = 30.0


@dataclass(frozen=True)
class Job:
    spec: ModelSpec
    request: ChatRequest
    #: an item waits for it now (its own question, asked while the run's answers are still being sent): it goes
    #: before every request that only waits its turn
    urgent: bool = False

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
    #: the longest a ``Retry-After`` is honoured for; longer requests wait this long
    retry_after_max: float = 60.0


ProgressCallback = Callable[[int, int, int], None]  # (done, total, failed)


def new_stats() -> dict[str, int | float]:
    return {
        "requests": 0,  # HTTP requests (or litellm calls) sent, retries included
        "answers": 0,  # requests that came back with an answer
        "retries": 0,  # tries after the first
        "rate_limited": 0,  # 429 responses
        "server_errors": 0,  # 5xx responses
        "connection_errors": 0,  # refused, reset, dropped, timed out (no HTTP status)
        "malformed": 0,  # a 2xx whose body is not a chat completion
        "failed": 0,  # requests given up on (their items are errors)
        "concurrency_min": 0,  # the lowest number of requests allowed in flight (0: never lowered)
        "waited_s": 0.0,  # total seconds spent in backoff and Retry-After pauses
        "not_sent_budget": 0,  # jobs the budget refused (never sent; their items are skipped)
        "failovers": 0,  # tries sent again at once to another replica of the model (its replica failed)
    }


#: environment variables whose values are credentials: never repeated in an error message
_SECRET_NAME = re.compile(r"(API_KEY|_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)
_PLACEHOLDER_KEYS = frozenset({"sk-no-key"})


def redact(text: str, spec: ModelSpec | None = None) -> str:
    """``text`` with every credential we know of replaced by ``***``: the key sent to ``spec`` and the value of any
    ``*_API_KEY`` / ``*_TOKEN`` / ``*_SECRET`` environment variable. A provider may echo the key it was given in
    its error message, and that message goes to the terminal, the cache's error entries and the reports."""
    secrets = {value for name, value in os.environ.items() if _SECRET_NAME.search(name) and len(value) >= 8}
    if spec is not None:
        key = api_key_for(spec)
        if key and key not in _PLACEHOLDER_KEYS:
            secrets.add(key)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return redact_url(text) or text  # (and the credentials of any URL: http://user:pass@host)


_BARE_TIMEOUT = re.compile(r"[\w.]*Timeout\w*:?")


def _described(exc: RequestFailed, timeout: float) -> str:
    """The failure's message; an aiohttp timeout that says nothing but its class name gets a useful one (the
    transport's ``except (ClientError, OSError)`` catches ``TimeoutError``, an ``OSError``, before its own
    timeout branch can)."""
    message = (exc.message or "").strip()
    if exc.status is None and _BARE_TIMEOUT.fullmatch(message):
        return f"no answer within {timeout:g} s (--medhelm-timeout)"
    return message or (f"HTTP {exc.status}" if exc.status else "request failed without a message")


def _endpoint(spec: ModelSpec) -> str:
    return spec.api_base or spec.name


def _priority(job: Job) -> int:
    """Where requests wait: what an item waits for now (-1), then jury requests (0), then answers (1): the judge of
    an answer that came follows it."""
    if job.urgent:
        return -1
    return 1 if job.request.purpose == "answer" else 0


def _is_connection_failure(exc: RequestFailed) -> bool:
    # no HTTP status: the connection was refused, reset or dropped, or no answer came within the timeout
    return exc.status is None


class _Window:
    """How many requests may be in flight: a semaphore whose size moves (AIMD), with a pause for Retry-After.

    Lives on one event loop (a ``run``); costs one comparison per request while nothing is rate limited.
    """

    def __init__(self, limit: int, stats: dict) -> None:
        self.limit = max(1, limit)
        self.allowed = self.limit
        self.in_flight = 0
        self.epoch = 0  # bumped at each decrease: a 429 to a request of an older epoch is the same signal
        self.successes = 0
        self.paused_until = 0.0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
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
            future = loop.create_future()
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

    def _discard(self, future: asyncio.Future) -> None:
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


class _Windows:
    """One :class:`_Window` per endpoint (a URL, or a model sent to its provider): a 429 from one replica or
    provider lowers that endpoint's window only."""

    def __init__(self, limit: int, stats: dict) -> None:
        self.limit = limit
        self.stats = stats
        self._windows: dict[str, _Window] = {}

    def of(self, endpoint: str) -> _Window:
        window = self._windows.get(endpoint)
        if window is None:
            window = self._windows[endpoint] = _Window(self.limit, self.stats)
        return window


class _Gate:
    """A semaphore whose waiters are served by priority, then in arrival order (one event loop)."""

    def __init__(self, size: int) -> None:
        self.free = max(1, size)
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        future = asyncio.get_running_loop().create_future()
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


class _SharedSlots:
    """An endpoint's slots across processes: one lock file per slot under ``directory``, taken with ``flock`` (held
    by the open file, so a process that dies frees its slot). This process's own order is kept by the _Gate first;
    across processes the first to poll a free slot gets it."""

    POLL_S = 0.01

    def __init__(self, directory: os.PathLike[str] | None) -> None:
        self.directory = directory
        self._files: dict[str, list[str]] = {}  # endpoint -> its slots' lock files (the folder made once)

    def _lock_files(self, endpoint: str, size: int) -> list[str]:
        files = self._files.get(endpoint)
        if files is None:
            import hashlib

            folder = os.path.join(self.directory, "slots")  # type: ignore[arg-type]
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
        files = self._lock_files(endpoint, size)
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


class _Slots:
    """At most ``spec.slots`` requests in flight per endpoint (for endpoints that have a slot count), on one loop.

    What an item waits for now goes first, then a jury request, then the answers waiting for a slot (then arrival
    order, see :func:`_priority`). ``peak`` keeps the most requests seen in flight per endpoint (tests, summary).
    """

    def __init__(self, directory: os.PathLike[str] | None = None) -> None:
        self._gates: dict[str, _Gate] = {}
        self.shared = _SharedSlots(directory)
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    def gate(self, spec: ModelSpec) -> _Gate | None:
        if not spec.slots:
            return None
        endpoint = _endpoint(spec)
        gate = self._gates.get(endpoint)
        if gate is None:
            gate = self._gates[endpoint] = _Gate(int(spec.slots))
        return gate

    def entered(self, endpoint: str) -> None:
        now = self.in_flight[endpoint] = self.in_flight.get(endpoint, 0) + 1
        self.peak[endpoint] = max(self.peak.get(endpoint, 0), now)

    def left(self, endpoint: str) -> None:
        self.in_flight[endpoint] -= 1


class Scheduler:
    def __init__(self, cache: AnswerCache, settings: Settings, *, budget: Budget | None = None) -> None:
        self.cache = cache
        self.settings = settings
        self.budget = budget
        #: model name -> why every request to it fails (a 401/403/404, or its endpoint is down): said once
        self.broken: dict[str, str] = {}
        self._systematic: dict[str, str] = {}  # model name -> its 401/403/404: its requests fail at once
        self._down_models: dict[str, set[str]] = {}  # endpoint -> models in .broken because it is down
        self.down: dict[str, str] = {}  # endpoint (api base or model name) -> the connection error
        self.stats = new_stats()
        self._draining = False  # drain(): nothing more is sent
        self._ready: Any = None  # the serving loop's queue of jobs ready to send
        self._end_marker: Any = None
        #: the per-endpoint slots of the latest ``serve`` (``.peak``: the most requests in flight per endpoint)
        self.slots = _Slots(self._slot_directory())
        self._last_success: dict[str, float] = {}  # endpoint -> time of its latest answer
        self._down_since: dict[str, float] = {}
        self.replicas = ReplicaTable()  # the replicas of models served by several endpoints

    async def _send(self, wire: OpenAIWire, job: Job, target: ModelSpec) -> Completion:
        """``job`` sent to ``target``: its spec, or the replica of its group chosen for this try."""
        if uses_openai_wire(target):
            return await wire.send(target, job.request, self.settings.timeout)
        return await send_litellm(target, job.request, self.settings.timeout)

    def _backoff(self, attempt: int, exc: RequestFailed) -> float:
        if exc.retry_after is not None:
            return min(exc.retry_after, self.settings.retry_after_max)
        delay = min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt)
        return delay * (0.5 + random.random())  # jitter: the retries of a burst must not arrive together

    def _count(self, exc: RequestFailed) -> None:
        stats = self.stats
        if exc.status == RATE_LIMITED:
            stats["rate_limited"] += 1
        elif exc.status is not None and exc.status >= 500:
            stats["server_errors"] += 1
        elif exc.status is not None and exc.status < 300:
            stats["malformed"] += 1
        elif exc.status is None:
            stats["connection_errors"] += 1

    async def _attempt(self, wire: OpenAIWire, windows: _Windows, job: Job, slots: _Slots) -> Completion:
        if self.budget is None:
            return await self._tries(wire, windows, job, None, slots)
        held: list[Reservation] = []  # the job's one reservation, made by _tries before its first send
        try:
            completion = await self._tries(wire, windows, job, held, slots)
        except ModelError as exc:
            if held and exc.status is not None and 200 <= exc.status < 300:
                # a malformed reply came back: the provider may have charged for it, at most the upper bound
                self.budget.settle(held[0], 0, 0, usage_known=False)
            elif held:
                self.budget.release(held[0])  # failed for good: no answer, nothing counted
            raise
        except BaseException:
            if held:
                self.budget.release(held[0])  # failed for good or cancelled: no answer, nothing counted
            raise
        self.budget.settle(held[0], completion.tokens_in, completion.tokens_out, completion.cost_usd,
                           usage_known=completion.usage_known)
        return completion

    async def _try_once(self, wire: OpenAIWire, window: _Window, job: Job, held: list[Reservation] | None,
                        target: ModelSpec) -> Completion | RequestFailed:
        """One send of ``job`` to ``target`` within its endpoint's window: its answer, or the retryable failure (a
        systematic failure or a budget refusal raises). Checked here, after any wait for a slot: the model may have
        been found broken, or its endpoint down, meanwhile."""
        endpoint = _endpoint(job.spec)
        if job.spec.name in self._systematic:
            raise ModelError(job.spec.name, self._systematic[job.spec.name], systematic=True)
        if endpoint in self.down:
            if time.monotonic() - self._down_since.get(endpoint, 0.0) < DOWN_RECHECK_S:
                raise self._unreachable(job, endpoint)
            self.down.pop(endpoint, None)  # long enough ago: this request finds out whether it is back
        epoch = await window.acquire()
        if held is not None and not held:  # a budget: reserve once per job, just before its first send
            try:
                reservation = self.budget.reserve(job.spec, job.request)
            except BaseException:
                window.release()
                raise
            if reservation is None:
                window.release()
                raise self.budget.refusal(job.spec)
            held.append(reservation)
        try:
            self.stats["requests"] += 1
            completion = await self._send(wire, job, target)
        except RequestFailed as exc:
            window.release()
            exc.message = redact(_described(exc, self.settings.timeout), job.spec)
            self._count(exc)
            if exc.status in SYSTEMATIC_STATUSES:
                self._systematic.setdefault(job.spec.name, exc.message)
                self.broken.setdefault(job.spec.name, exc.message)
                raise ModelError(job.spec.name, exc.message, exc.status, systematic=True) from None
            if exc.status == RATE_LIMITED:
                window.rate_limited(epoch, None if exc.retry_after is None
                                    else min(exc.retry_after, self.settings.retry_after_max))
            return exc
        except BaseException:
            window.release()
            raise
        window.release()
        window.succeeded()
        self.stats["answers"] += 1
        return completion

    async def _through_slots(self, wire: OpenAIWire, windows: _Windows, job: Job, held: list[Reservation] | None,
                             slots: _Slots, target: ModelSpec) -> Completion | RequestFailed:
        """One try of ``job`` to ``target`` (its spec, or one replica of it), within the target's slots and window."""
        endpoint = _endpoint(target)
        gate = slots.gate(target)
        if gate is None:
            return await self._try_once(wire, windows.of(endpoint), job, held, target)
        # wait for the endpoint's slot before the window, and before the request's timeout starts: first among this
        # process's requests, then among the run's processes
        await gate.acquire(_priority(job))
        shared: int | None = None
        try:
            shared = await slots.shared.acquire(endpoint, int(target.slots))  # (a gate: it has slots)
            slots.entered(endpoint)
            try:
                return await self._try_once(wire, windows.of(endpoint), job, held, target)
            finally:
                slots.left(endpoint)
        finally:
            slots.shared.release(shared)
            gate.release()

    async def _tries(self, wire: OpenAIWire, windows: _Windows, job: Job,
                     held: list[Reservation] | None, slots: _Slots) -> Completion:
        last: RequestFailed | None = None
        endpoint = _endpoint(job.spec)  # (of a replica group: the group, down only when every replica is)
        started = time.monotonic()
        group = job.spec.is_replica_group
        attempt = failovers = 0
        while True:
            replica = self.replicas.choose(job.spec) if group else ""
            target = job.spec.at(replica) if group else job.spec
            if group:
                self.replicas.entered(replica)
            try:
                completion_or_failure = await self._through_slots(wire, windows, job, held, slots, target)
            finally:
                if group:
                    self.replicas.left(replica)
            if isinstance(completion_or_failure, Completion):
                self._last_success[endpoint] = time.monotonic()
                self.down.pop(endpoint, None)
                for model in self._down_models.pop(endpoint, ()):  # it answers again
                    if model not in self._systematic:
                        self.broken.pop(model, None)
                if group:
                    self.replicas.answered(replica)
                return completion_or_failure
            last = completion_or_failure
            if group and is_replica_failure(last.status):
                # this replica is unwell: it rests, and the request goes at once to one that is not resting (not
                # one of its retries); bounded, in case the replicas keep failing in turn as their rests end
                self.replicas.rest(replica, last.message)
                if self.replicas.can_fail_over(job.spec) and failovers < len(job.spec.urls) * (attempt + 1):
                    failovers += 1
                    self.stats["failovers"] += 1
                    continue
            if not last.retryable or attempt == self.settings.retries:
                break
            attempt += 1
            self.stats["retries"] += 1
            delay = self._backoff(attempt - 1, last)
            self.stats["waited_s"] += delay
            if delay > 0:
                await asyncio.sleep(delay)  # (outside the slot: another request may use the server meanwhile)
        assert last is not None
        tries = attempt + 1 + failovers
        message = f"{last.message} (after {tries} attempt{'s' if tries > 1 else ''})"
        if (last.retryable and _is_connection_failure(last)
                and self._last_success.get(endpoint, float("-inf")) < started):
            # every try failed to connect (or got no answer) and nothing else got through meanwhile: the endpoint
            # is down; its other requests fail at once for a while instead of each waiting through its retries
            if endpoint not in self.down:
                how = STOPPED_ANSWERING if endpoint in self._last_success else UNREACHABLE
                self.down[endpoint] = f"{job.spec.api_base or job.spec.name}{how}{message}"
                self._down_since[endpoint] = time.monotonic()
            raise self._unreachable(job, endpoint)
        raise ModelError(job.spec.name, message, last.status)

    async def _result_of(self, wire: OpenAIWire, windows: _Windows, job: Job,
                         slots: _Slots) -> Completion | ModelError:
        """The job's answer, stored in the cache, or the error that ended it: never an exception, so that one
        job's trouble (whatever its type) stays that job's and the other jobs go on."""
        try:
            completion = await self._attempt(wire, windows, job, slots)
        except ModelError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - a bug or an odd provider: this job's failure, not the run's
            error = self._unexpected(job, exc, "")
        else:
            try:
                self.cache.put(job.key, completion, job.request.to_json())
                return completion
            except Exception as exc:  # noqa: BLE001 - e.g. diskcache's lock timeout: the answer is not kept
                error = self._unexpected(job, exc, "the answer came but could not be stored in the cache: ")
        self.stats["not_sent_budget" if isinstance(error, BudgetExhausted) else "failed"] += 1
        try:
            self.cache.put_error(job.key, error)
        except Exception:  # noqa: BLE001 - the error still reaches the item (on_done); the cache is only a memo
            pass
        return error

    def _unexpected(self, job: Job, exc: Exception, context: str) -> ModelError:
        """An exception that is not a :class:`ModelError`, as this job's error: its type and message."""
        text = str(exc).strip()
        message = f"{context}{type(exc).__name__}{': ' + text if text else ''}"
        return ModelError(job.spec.name, redact(message, job.spec))

    def _unreachable(self, job: Job, endpoint: str) -> ModelError:
        """The one message of every request that fails because ``endpoint`` is down. When it never answered in
        this run, its model goes in .broken: every request to it fails."""
        message = self.down[endpoint]
        never_answered = endpoint not in self._last_success
        if never_answered:
            self.broken.setdefault(job.spec.name, message)
            self._down_models.setdefault(endpoint, set()).add(job.spec.name)
        return ModelError(job.spec.name, message, systematic=never_answered)

    async def serve(self, queue: asyncio.Queue[Job | None], on_done: Callable[[Job, Completion | ModelError], None],
                    workers: int | None = None) -> None:
        """Send the jobs of ``queue`` until it yields ``None`` (more may be put while it runs); each result goes to
        the cache as it arrives, then to ``on_done`` (called on this loop, so it may put follow-up jobs)."""
        wire = OpenAIWire(limit=self.settings.concurrency)
        windows = _Windows(self.settings.concurrency, self.stats)  # one per endpoint
        slots = self.slots = _Slots(self._slot_directory())
        # every job put in ``queue`` moves at once into ``ready``, where a jury request goes before the answers still
        # waiting (then arrival order): the judge of an answer that just came is sent next, not after every answer
        # queued before it, so the items of open-ended benchmarks finish as the run goes. What an item waits for
        # now (``Job.urgent``) does not wait for a free worker at all: it starts at once, and only an endpoint's
        # slot, which it gets before anything else waiting for one, can hold it back.
        ready: asyncio.PriorityQueue[tuple[int, int, Job | None]] = asyncio.PriorityQueue()
        self._ready = ready
        arrivals = itertools.count()
        end = 2  # after every job
        self._end_marker = lambda: (end, next(arrivals), None)
        urgent: set[asyncio.Task] = set()

        async def send_now(job: Job) -> None:
            on_done(job, await self._result_of(wire, windows, job, slots))

        def move(job: Job | None) -> None:
            if job is not None and job.urgent:
                task = asyncio.ensure_future(send_now(job))
                urgent.add(task)
                task.add_done_callback(urgent.discard)
                return
            ready.put_nowait((end, next(arrivals), None) if job is None else (_priority(job), next(arrivals), job))

        async def pump() -> None:  # what arrives while every worker waits
            while True:
                job = await queue.get()
                move(job)
                if job is None:
                    return

        async def worker() -> None:
            while True:
                while not queue.empty():  # what on_done just queued (a judge) before this worker's next job
                    job = queue.get_nowait()
                    if job is None:  # the end: left for the pump, which ends with it
                        queue.put_nowait(None)
                        break
                    move(job)
                _rank, _arrival, job = await ready.get()
                if job is None or self._draining:
                    ready.put_nowait((end, next(arrivals), None))  # the end, for the other workers too
                    return
                on_done(job, await self._result_of(wire, windows, job, slots))

        try:
            await asyncio.gather(pump(), *(worker() for _ in range(workers or self.settings.concurrency)))
            if urgent:  # (the end comes once nothing is outstanding, so only a drained run leaves one in flight)
                await asyncio.gather(*urgent)
        finally:
            for task in urgent:
                task.cancel()
            await wire.close()

    def _slot_directory(self) -> Any:
        return getattr(self.cache, "directory", None)  # (the run's cache, shared by its processes)

    def drain(self) -> None:
        """On the serving loop: send nothing more (what is queued is dropped, and counted as not sent by the sender);
        the requests in flight finish and are stored. The input queue still needs its ``None`` to end ``serve``."""
        self._draining = True
        ready = self._ready
        if ready is None:
            return
        while not ready.empty():
            ready.get_nowait()
        ready.put_nowait(self._end_marker())

    async def run(self, jobs: list[Job], progress: ProgressCallback | None = None) -> dict[str, ModelError]:
        """Send every job; return the failures by cache key. Answers go to the cache as they arrive."""
        failures: dict[str, ModelError] = {}
        if not jobs:
            return failures
        total, done = len(jobs), 0
        queue: asyncio.Queue[Job | None] = asyncio.Queue()
        for job in jobs:
            queue.put_nowait(job)
        queue.put_nowait(None)

        def on_done(job: Job, result: Completion | ModelError) -> None:
            nonlocal done
            if isinstance(result, ModelError):
                failures[job.key] = result
            done += 1
            if progress is not None:
                progress(done, total, len(failures))

        async def heartbeat() -> None:
            # a slow model (a local server on a small machine) may take minutes for its first answer: the progress
            # line is shown, and its rate and ETA kept current, while nothing completes (it throttles itself)
            while True:
                await asyncio.sleep(1.0)
                if done < total:  # (the last completion has written the final line)
                    progress(done, total, len(failures))

        beating = asyncio.ensure_future(heartbeat()) if progress is not None else None
        try:
            await self.serve(queue, on_done, workers=min(self.settings.concurrency, total))
        finally:
            if beating is not None:
                beating.cancel()
        return failures

    def run_sync(self, jobs: list[Job], progress: ProgressCallback | None = None) -> dict[str, ModelError]:
        return _run_coroutine(self.run(jobs, progress))

    def complete(self, job: Job) -> Completion:
        """One request now, on a loop of its own: for an item whose request no running sender takes (an xdist
        worker's own question, or one asked after the sending ended)."""
        failures = self.run_sync([job])
        if job.key in failures:
            raise failures[job.key]
        completion = self.cache.get(job.key)
        if completion is None:  # cache off/refresh edge: the answer was stored under this run, read it back
            raise ModelError(job.spec.name, "answer was not stored in the cache")
        completion.cached = False
        return completion

    def summary(self) -> str:
        """One line for the terminal: what retrying and rate limiting did, or "" when nothing happened."""
        s = self.stats
        parts = []
        if s["retries"]:
            parts.append(f"{s['retries']} retr{'y' if s['retries'] == 1 else 'ies'}")
        if s["rate_limited"]:
            text = f"{s['rate_limited']} rate-limit response(s)"
            if s["concurrency_min"]:
                text += f" (concurrency lowered to {s['concurrency_min']} of {self.settings.concurrency})"
            parts.append(text)
        if s["server_errors"]:
            parts.append(f"{s['server_errors']} server error(s)")
        if s["connection_errors"]:
            parts.append(f"{s['connection_errors']} connection failure(s) or timeout(s)")
        if s["malformed"]:
            parts.append(f"{s['malformed']} malformed response(s)")
        if s["failed"]:
            parts.append(f"{s['failed']} request(s) failed for good")
        if s.get("failovers"):
            rested = ", ".join(f"{url} ({why})" for url, why in self.replicas.rested.items())
            parts.append(f"{s['failovers']} request(s) sent again to another replica (rested: {rested})")
        if s.get("not_sent_budget"):
            parts.append(f"{s['not_sent_budget']} request(s) not sent (--medhelm-budget reached)")
        return ", ".join(parts)


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


def progress_text(label: str, done: int, total: int, elapsed: float, failed: int = 0,
                  final: bool | None = None) -> str:
    """``medhelm answers: 40/40 (12.5/s, done in 3.2s)``, with the ETA while not final, and the failures."""
    elapsed = max(elapsed, 1e-9)
    rate = done / elapsed
    if done == total if final is None else final:
        text = f"medhelm {label}: {done}/{total} ({rate:.1f}/s, done in {elapsed:.1f}s)"
    else:
        if rate > 0:
            text = f"medhelm {label}: {done}/{total} ({rate:.1f}/s, ETA {(total - done) / rate:.1f}s)"
        else:  # nothing back yet
            text = f"medhelm {label}: {done}/{total} (waiting {elapsed:.0f}s for the first)"
    return text + (f", {failed} failed" if failed else "")


class Progress:
    """done / total, rate and ETA on one terminal line, rewritten in place (a plain line now and then off a tty)."""

    def __init__(self, write: Callable[[str], None], is_tty: bool, label: str = "answers") -> None:
        self.write = write
        self.is_tty = is_tty
        self.label = label
        self.started = time.perf_counter()
        self._last = 0.0
        self._width = 0

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.perf_counter()
        final = done == total
        if not final and now - self._last < (0.2 if self.is_tty else 10.0):
            return
        self._last = now
        text = progress_text(self.label, done, total, now - self.started, failed)
        if self.is_tty:
            padding = " " * max(0, self._width - len(text))  # a shorter line rewritten over a longer one
            self._width = len(text)
            self.write("\r" + text + padding + ("\n" if final else ""))
        else:
            self.write(text + "\n")
