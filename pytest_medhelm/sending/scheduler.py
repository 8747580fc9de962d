"""Sending the run's requests: every job through one event loop (:meth:`Scheduler.serve`), each answer stored in the
cache the moment it arrives, so an interrupted run loses at most the requests in flight. Each rule is bounded, so
that a run always finishes:

* **Retries**, by the run's one policy (:mod:`.retry`, entered only by a job whose first try failed): ``1 +
  retries`` tries, between them the server's ``Retry-After`` (capped) or exponential backoff with jitter.
* **Rate limits (AIMD)**, per endpoint (a URL, or a model sent to its provider's API): a 429 halves the requests
  allowed in flight there and pauses them for its ``Retry-After``; the 429s of one burst are one signal; a
  window's worth of successes in a row allows one more, up to ``concurrency`` (:mod:`.concurrency`).
* **Systematic failures.** A 401, 403 or 404 (a wrong key, an unknown model) is not retried: the model is marked
  broken (``.broken``) and its remaining requests fail at once with the same message.
* **Outages.** A request whose tries all failed at the connection (refused, reset, timed out) while nothing else
  to its endpoint got through marks the endpoint down (``.down``): its other requests fail at once with that one
  message, until it answers again or ``DOWN_RECHECK_S`` has passed. One that never answered in this run puts its
  model in ``.broken`` (the session says it once and stops asking: :func:`.failures.systematic_failure`); one that
  answered and then went down "stopped answering": its answers count, the rest error one by one.
* **Malformed bodies** (a 2xx that is not a chat completion) are retried like server errors, then fail.
* **Anything else** (a bug in a parser, a cache whose lock timed out, an exception a provider library was not
  expected to raise, an answer that could not be stored) is that job's error, not the run's: it fails with the
  exception's type and message, not retried, and every other job goes on.
* **Slots.** An endpoint that serves a fixed number of requests at once (``ModelSpec.slots``: a llama.cpp server we
  started) never has more in flight from us, across the processes of a run too; a request waits for its slot
  *before* it is sent, so its timeout does not run while it queues (:class:`.concurrency.Slots`).
* **Replicas.** A model served by several endpoints sends each try to the least busy; one that fails at the
  connection or with a 5xx rests, and the try goes at once to another (:mod:`.replicas`).

Failures are kept for the rest of the run (the cache's error entries, keyed by run id), so an item whose request
failed reports the provider's message instead of asking again. ``.stats`` counts what happened (:mod:`.send_stats`).

**Budget** (``--medhelm-budget``, optional): a try reserves its upper bound in the
:class:`~pytest_medhelm.budget.Budget` just before it is sent. A try that failed without a reply (a 429, a 5xx, a
connection failure: nothing was generated) passes its reservation on to the next try; a 2xx the provider may have
charged for (a malformed body) is settled at its upper bound at once and the next try reserves anew, so every try
that may cost is counted and none goes past the limit. A job the budget refuses is not sent: it fails with
:class:`~pytest_medhelm.values.BudgetExhausted` (``not_sent_budget``; its items are skipped). An answer settles the
reservation with its actual cost; a job that fails for good (or is cancelled) releases it.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from pytest_medhelm.budget import Budget, Reservation
from pytest_medhelm.cache.answer_writer import AnswerWriter
from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.endpoints.wire import uses_openai_wire
from pytest_medhelm.sending.concurrency import Slots, Window, Windows, endpoint_of, run_coroutine
from pytest_medhelm.sending.failures import (
    RATE_LIMITED,
    STOPPED_ANSWERING,
    SYSTEMATIC_STATUSES,
    UNREACHABLE,
    described,
    is_charged,
    is_connection_failure,
    redact,
)
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.protocol import Transport
from pytest_medhelm.sending.replicas import ReplicaTable, is_replica_failure
from pytest_medhelm.sending.retry import RetryPolicy, retrying
from pytest_medhelm.sending.serving import OnDone, OnOutcome, Sending, priority
from pytest_medhelm.sending.serving import serve as serve_jobs
from pytest_medhelm.sending.stats import new_stats, stats_line
from pytest_medhelm.sending.transport import LitellmTransport, OpenAIWire, RequestFailed
from pytest_medhelm.values import BudgetExhausted, Completion, ModelError, ModelSpec

#: how long an endpoint marked down fails its requests at once before one is tried again
DOWN_RECHECK_S = 30.0
#: connections beyond the workers' (one each, ``--medhelm-concurrency`` of them) for what an item waits for now
#: (``Job.urgent``), which never waits for a worker: nor then for a connection that a worker takes again at once
#: (aiohttp wakes the waiters of several endpoints in no fixed order: with requests going to two replicas, or to
#: two models' servers, such a question waited for the whole sending). So up to concurrency + this many requests
#: are in flight; the items ask one question at a time (one item runs at a time in a process), and the rest is
#: room for a test body that asks from threads of its own. Each endpoint's window still holds for them all.
URGENT_CONNECTIONS = 4

Outcome = Completion | RequestFailed  # one try's: an answer, or a failure that may be worth another try


LITELLM = LitellmTransport()


@dataclass
class Settings:
    concurrency: int = 16
    timeout: float = 120.0
    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: the longest a ``Retry-After`` is honoured for; longer requests wait this long
    retry_after_max: float = 60.0

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.retries, self.backoff_base, self.backoff_max, self.retry_after_max)


@dataclass
class _Tries:  # one job's tries so far
    held: list[Reservation] | None  # its budget reservation while one is held (None: no budget)
    attempts: int = 0  # tries, failovers not counted
    failovers: int = 0  # tries sent again at once to another replica
    started: float = field(default_factory=time.monotonic)


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
        self._serving: list[Sending] = []  # the serve() calls running (a sender's, an item's own request)
        self._last_success: dict[str, float] = {}  # endpoint -> time of its latest answer
        self._down_since: dict[str, float] = {}
        self.replicas = ReplicaTable()  # the replicas of models served by several endpoints

    # ------------------------------------------------------------------------------------------ one try
    async def _send(self, sending: Sending, job: Job, target: ModelSpec) -> Completion:
        """``job`` sent to ``target``: its spec, or the replica of its group chosen for this try."""
        transport: Transport = sending.wire if uses_openai_wire(target) else LITELLM
        return await transport.send(target, job.request, self.settings.timeout)

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

    def _reserve(self, job: Job, held: list[Reservation]) -> None:
        """A budget: the try's upper bound reserved just before it is sent (unless a reservation is held from a
        try that cost nothing); a refusal raises (the job is not sent)."""
        budget = self.budget
        assert budget is not None
        reservation = budget.reserve(job.spec, job.request)
        if reservation is None:
            raise budget.refusal(job.spec)
        held.append(reservation)

    async def _try_once(self, sending: Sending, window: Window, job: Job, held: list[Reservation] | None,
                        target: ModelSpec) -> Outcome:
        """One send of ``job`` to ``target`` within its endpoint's window: its answer, or the retryable failure (a
        systematic failure or a budget refusal raises). Checked here, after any wait for a slot: the model may have
        been found broken, or its endpoint down, meanwhile."""
        endpoint = endpoint_of(job.spec)
        if job.spec.name in self._systematic:
            raise ModelError(job.spec.name, self._systematic[job.spec.name], systematic=True)
        if endpoint in self.down:
            if time.monotonic() - self._down_since.get(endpoint, 0.0) < DOWN_RECHECK_S:
                raise self._unreachable(job, endpoint)
            self.down.pop(endpoint, None)  # long enough ago: this request finds out whether it is back
        epoch = await window.acquire()
        try:
            if held is not None and not held:
                self._reserve(job, held)
            self.stats["requests"] += 1
            completion = await self._send(sending, job, target)
        except RequestFailed as exc:
            window.release()
            exc.message = redact(described(exc, self.settings.timeout), job.spec)
            self._count(exc)
            if held and is_charged(exc):  # a reply came, if not a usable one: it costs its upper bound
                assert self.budget is not None
                self.budget.settle(held.pop(), 0, 0, usage_known=False)
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

    async def _through_slots(self, sending: Sending, job: Job, held: list[Reservation] | None,
                             target: ModelSpec) -> Outcome:
        """One try of ``job`` to ``target`` (its spec, or one replica of it), within the target's slots and window."""
        endpoint = endpoint_of(target)
        window = sending.windows.of(endpoint)
        gate = sending.slots.gate(target)
        if gate is None:
            return await self._try_once(sending, window, job, held, target)
        # wait for the endpoint's slot before the window, and before the request's timeout starts: first among this
        # process's requests, then among the run's processes
        await gate.acquire(priority(job))
        shared: int | None = None
        try:
            shared = await sending.slots.shared.acquire(endpoint, int(target.slots or 1))
            return await self._try_once(sending, window, job, held, target)
        finally:
            sending.slots.shared.release(shared)
            gate.release()

    async def _one_try(self, sending: Sending, job: Job, tries: _Tries) -> Outcome:
        """One try of ``job``; a model served by replicas sends it to the least busy one, and again at once to
        another when that one fails (bounded, in case the replicas keep failing in turn as their rests end)."""
        tries.attempts += 1
        if not job.spec.is_replica_group:
            outcome = await self._through_slots(sending, job, tries.held, job.spec)
            if isinstance(outcome, Completion):
                self._answered(endpoint_of(job.spec))
            return outcome
        while True:
            replica = self.replicas.choose(job.spec)
            self.replicas.entered(replica)
            try:
                outcome = await self._through_slots(sending, job, tries.held, job.spec.at(replica))
            finally:
                self.replicas.left(replica)
            if isinstance(outcome, Completion):
                self._answered(endpoint_of(job.spec))
                self.replicas.answered(replica)
                return outcome
            if not is_replica_failure(outcome.status):
                return outcome
            self.replicas.rest(replica, outcome.message)  # this replica is unwell: it rests
            if not (self.replicas.can_fail_over(job.spec)
                    and tries.failovers < len(job.spec.urls) * tries.attempts):
                return outcome
            tries.failovers += 1
            self.stats["failovers"] += 1

    def _answered(self, endpoint: str) -> None:
        self._last_success[endpoint] = time.monotonic()
        self.down.pop(endpoint, None)
        for model in self._down_models.pop(endpoint, ()):  # it answers again
            if model not in self._systematic:
                self.broken.pop(model, None)

    # ------------------------------------------------------------------------------------------ a job's tries
    def _before_retry(self, wait: float) -> None:
        self.stats["retries"] += 1
        self.stats["waited_s"] += wait

    async def _tries(self, sending: Sending, job: Job, held: list[Reservation] | None) -> Completion:
        tries = _Tries(held)
        outcome = await self._one_try(sending, job, tries)
        if isinstance(outcome, RequestFailed) and outcome.retryable:  # (the rare job whose first try failed)
            outcome = await retrying(self.settings.retry_policy, lambda: self._one_try(sending, job, tries),
                                     first=outcome, on_retry=self._before_retry)
        if isinstance(outcome, Completion):
            return outcome
        raise self._failed_for_good(job, outcome, tries)

    def _failed_for_good(self, job: Job, last: RequestFailed, tries: _Tries) -> ModelError:
        count = tries.attempts + tries.failovers
        message = f"{last.message} (after {count} attempt{'s' if count > 1 else ''})"
        endpoint = endpoint_of(job.spec)  # (of a replica group: the group, down only when every replica is)
        if (last.retryable and is_connection_failure(last)
                and self._last_success.get(endpoint, float("-inf")) < tries.started):
            # every try failed to connect (or got no answer) and nothing else got through meanwhile: the endpoint
            # is down; its other requests fail at once for a while instead of each waiting through its retries
            if endpoint not in self.down:
                how = STOPPED_ANSWERING if endpoint in self._last_success else UNREACHABLE
                self.down[endpoint] = f"{job.spec.api_base or job.spec.name}{how}{message}"
                self._down_since[endpoint] = time.monotonic()
            return self._unreachable(job, endpoint)
        return ModelError(job.spec.name, message, last.status)

    async def _with_budget(self, sending: Sending, job: Job) -> Completion:
        budget = self.budget
        if budget is None:
            return await self._tries(sending, job, None)
        held: list[Reservation] = []  # the reservation of the try to come (a try that cost nothing passes it on)
        try:
            completion = await self._tries(sending, job, held)
        except BaseException:
            if held:
                budget.release(held.pop())  # failed for good or cancelled: that try brought nothing to count
            raise
        budget.settle(held.pop(), completion.tokens_in, completion.tokens_out, completion.cost_usd,
                      usage_known=completion.usage_known)
        return completion

    async def _outcome(self, sending: Sending, job: Job) -> Completion | ModelError:
        """The job's answer or the error that ended it: never an exception, so that one job's trouble (whatever its
        type) stays that job's and the other jobs go on."""
        try:
            return await self._with_budget(sending, job)
        except ModelError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a bug or an odd provider: this job's failure, not the run's
            return self._unexpected(job, exc, "")

    async def _stored(self, sending: Sending, job: Job, outcome: Completion | ModelError) -> Completion | ModelError:
        """``outcome`` in the cache, then what the job's item gets: the answer, or an error (also the answer's
        that could not be stored)."""
        if not isinstance(outcome, ModelError):
            problem = await sending.writer.store(job.key, outcome, job.request.to_json())
            if problem is None:
                return outcome
            outcome = self._unexpected(job, problem, "the answer came but could not be stored in the cache: ")
        self.stats["not_sent_budget" if isinstance(outcome, BudgetExhausted) else "failed"] += 1
        # kept for this run (an xdist worker reads its error there), before it is reported; if it cannot be, the
        # error still reaches the item (on_done): the cache is only a memo
        await sending.writer.store(job.key, outcome)
        return outcome

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

    # ------------------------------------------------------------------------------------------ the entry point
    async def serve(self, queue: asyncio.Queue[Job | None], on_done: OnDone, workers: int | None = None,
                    on_outcome: OnOutcome | None = None) -> None:
        """Send the jobs of ``queue`` until it yields ``None`` (more may be put while it runs); each result goes to
        ``on_outcome`` as it arrives (it may put follow-up jobs, which the worker that got it then takes first),
        then to the cache, then to ``on_done`` (both called on this loop). The loop itself: :mod:`.serving`."""
        # a window per endpoint; slots shared by the run's processes (in its cache); one thread that stores the
        # answers, so that a cache write (SQLite's lock, its disk) never holds the sending loop
        loop, concurrency = asyncio.get_running_loop(), self.settings.concurrency
        sending = Sending(OpenAIWire(limit=concurrency + URGENT_CONNECTIONS), Windows(concurrency, self.stats),
                          Slots(getattr(self.cache, "directory", None)), AnswerWriter(self.cache, loop), loop)
        self._serving.append(sending)
        try:
            await serve_jobs(sending, queue, on_done, workers or concurrency, on_outcome, self._outcome,
                             self._stored)
        finally:  # (after the loop's tasks have ended, even when cancelled again while they end)
            self._serving.remove(sending)
            try:
                await sending.wire.close()
            finally:
                sending.writer.close()  # (an answer being stored when the run is cancelled is kept)

    def drain(self) -> None:
        """On a serving loop: its serve() sends nothing more (what is ready is dropped, and counted as not sent by
        the sender); the requests in flight finish and are stored. Its input queue still needs its ``None``."""
        for sending in list(self._serving):  # (an item's own serve, on its thread, may come or go meanwhile)
            if sending.loop is asyncio.get_running_loop():
                sending.draining = True
                while not sending.ready.empty():
                    sending.ready.get_nowait()
                sending.put(None)

    def send_all(self, jobs: list[Job]) -> dict[str, ModelError]:
        """Send ``jobs`` through :meth:`serve` on a loop of their own and wait for them all; the failures by cache
        key (answers go to the cache as they arrive)."""
        failures: dict[str, ModelError] = {}

        def on_done(job: Job, result: Completion | ModelError) -> None:
            if isinstance(result, ModelError):
                failures[job.key] = result

        async def send() -> None:
            queue: asyncio.Queue[Job | None] = asyncio.Queue()
            for job in jobs:
                queue.put_nowait(job)
            queue.put_nowait(None)
            await self.serve(queue, on_done, workers=max(1, min(self.settings.concurrency, len(jobs))))

        run_coroutine(send())
        return failures

    def summary(self) -> str:
        """One line for the terminal: what retrying and rate limiting did, or "" when nothing happened."""
        return stats_line(self.stats, self.settings.concurrency, self.replicas.rested)
