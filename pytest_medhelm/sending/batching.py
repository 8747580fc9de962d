"""``--medhelm-batch``: the run's requests to an endpoint with a Batch API go as batches, at the batch price.

:class:`Batching` is a way of sending (:class:`~.protocol.Way`), not a sender: the run's one
:class:`~.background.BackgroundSender` takes it (chosen once, :class:`~pytest_medhelm.run.delivery.Delivery`), keeps
the rounds and sends directly what it does not take; the items wait for their answers as for a direct run's, from
memory or, under xdist, from the shared cache (only the controller submits).

* **Rounds.** The planned requests of every batchable model (:func:`batchable`: an OpenAI-compatible endpoint we
  reach by URL, or OpenAI's public API) go as one batch per endpoint and model (cut at OpenAI's 50,000 requests or
  200 MB), submitted at once and polled until they end. The judges' requests for the answers of a batch are the
  next round: a second batch once those answers are in. Requests to models without a Batch API (``local/...``,
  litellm's other providers) are sent directly and said once; so is an item's own question (it waits now), and
  every request to a server that answers ``POST /files`` with 404, 405 or 501 (no Batch API there).
* **Results.** Each answer goes to the cache under the key a direct run uses (a batch run and a direct run share
  answers). A line the provider failed, a request a failed, expired or cancelled batch never answered, and a line
  that cannot be read, answers another model or shares its custom_id with another line are errors of their own
  items, never cached (:class:`~.batch_api.ResultLines`).
* **Resuming.** A batch's id is written to the cache directory (:mod:`pytest_medhelm.cache.batch_records`) as soon
  as it exists and removed only once every answer of it is stored (and its other lines are their items' errors): a run
  stopped by Ctrl-C, a batch not ended by ``--medhelm-batch-timeout``, a results file that could not be read and an
  answer the cache refused leave it, and the same command collects that batch instead of paying twice.
* **Polling** every :data:`~.batch_api.POLL_FIRST_S` s, growing to :data:`~.batch_api.POLL_MAX_S`
  (``MEDHELM_BATCH_POLL_S`` fixes it), up to ``--medhelm-batch-timeout`` (the provider's 24 h by default); the wait
  and each change of its status or counts are shown (the waiting item's status line; a line of its own in xdist's
  controller).
* **Budget.** ``--medhelm-budget`` reserves each request's upper bound (at the batch price) before its batch goes;
  a request it refuses is not in the batch; a batch collected from an earlier run was paid then.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from pytest_medhelm.cache.batch_records import BatchRecord, BatchRecords
from pytest_medhelm.cache.identity import endpoint_of, priced_as_provider
from pytest_medhelm.cache.store import Stored
from pytest_medhelm.endpoints.wire import api_key_for, uses_openai_wire
from pytest_medhelm.sending.batch_api import (
    NO_BATCH_API,
    WINDOW_S,
    BadLine,
    BatchState,
    LineError,
    OpenAIBatches,
    ResultLines,
    batch_line,
    chunks,
    line_limit,
    poll_intervals,
    results_limit,
    store_all,
)
from pytest_medhelm.sending.failures import redact
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.protocol import WaySender
from pytest_medhelm.sending.reasoning import cut_at_stops, stops_after
from pytest_medhelm.sending.retry import T, retrying_raised
from pytest_medhelm.sending.scheduler import Scheduler
from pytest_medhelm.sending.transport import RequestFailed, chat_body
from pytest_medhelm.values import BudgetExhausted, Completion, ModelError, ModelSpec, is_llama_cpp_model

OPENAI_PUBLIC = "https://api.openai.com/v1"
#: polls in a row that may fail (a connection, a 5xx) before the batch is given up for this run (its record stays)
POLL_FAILURES_MAX = 10


def batchable(spec: ModelSpec) -> bool:
    """Whether ``spec``'s requests can go through OpenAI's Batch API protocol: an OpenAI-compatible endpoint we
    reach by URL (vLLM, a gateway; one without a Batch API is found out at the first upload) or OpenAI's own."""
    if is_llama_cpp_model(spec.name) or spec.is_replica_group:  # (a replica group's requests go to the least busy)
        return False
    return uses_openai_wire(spec) or (spec.api_base is None and spec.litellm_model.startswith("openai/"))


def batch_rates(specs: Iterable[ModelSpec], prices: Any) -> dict[str, float]:
    """Model name -> the factor of its price in a batch run (:meth:`pytest_medhelm.cost.Prices.batch_factor`), for
    the models whose requests go as batches."""
    return {spec.name: prices.batch_factor(spec.name, spec.litellm_model, public_api=priced_as_provider(spec))
            for spec in specs if batchable(spec)}


def unbatchable_line(specs: Iterable[ModelSpec]) -> str | None:
    """The one line naming the models of the run whose requests are sent directly although ``--medhelm-batch``."""
    names = list(dict.fromkeys(spec.name for spec in specs if not batchable(spec)))
    if not names:
        return None
    return (f"medhelm: --medhelm-batch: {', '.join(names)} ha{'s' if len(names) == 1 else 've'} no Batch API "
            "(local models, models served by several replicas, and litellm's other providers): "
            f"{'its' if len(names) == 1 else 'their'} requests are sent directly")


def _base(spec: ModelSpec) -> str:
    # the endpoint a direct request would reach (litellm's OPENAI_BASE_URL included): the one the cache names
    return (endpoint_of(spec.litellm_model, spec.api_base).url or OPENAI_PUBLIC).rstrip("/")


def _key(spec: ModelSpec) -> str | None:
    key = api_key_for(spec)
    if key is None and spec.api_base is None:
        key = os.environ.get("OPENAI_API_KEY") or None
    return key


class Batching:
    """``--medhelm-batch``'s way of sending (:class:`~.protocol.Way`): the planned requests of batchable models, and
    those that follow from them, go in rounds of batches; every other request goes directly through its sender."""

    def __init__(self, scheduler: Scheduler, cache_dir: Path,
                 announce: Callable[[str], None] | None = None, batch_timeout: float = WINDOW_S) -> None:
        self.scheduler = scheduler
        self.batch_timeout = batch_timeout  # --medhelm-batch-timeout: the longest this run waits for one batch
        self.cache = scheduler.cache
        self.budget = scheduler.budget
        self.records = BatchRecords(cache_dir)
        self.announce = announce  # a line now (xdist's controller runs no item: its terminal is free)
        self.notes: list[str] = []  # what the summary says about the batches
        self.batches: dict[str, str] = {}  # batch id -> its current status, for the waiting item's line
        self._no_batch_api: set[str] = set()  # endpoints that answered POST /files with 404/405/501
        self._client = OpenAIBatches(scheduler.settings.timeout)  # (its session opens on the loop, at first use)
        self._sender: WaySender | None = None

    @property
    def status(self) -> str:
        """The batches in flight, for the line of an item that waits: ``batch batch_1 in_progress 3/12``."""
        return "; ".join(f"batch {bid} {text}" for bid, text in list(self.batches.items()) if text)

    def summary_lines(self) -> list[str]:
        return self.notes + [f"medhelm: {p}" for p in self.records.problems]

    # ------------------------------------------------------------------ the way (on the sender's loop)
    def open(self, sender: WaySender) -> None:
        self._sender = sender
        self._client = OpenAIBatches(self.scheduler.settings.timeout)

    async def close(self) -> None:
        await self._client.close()

    def takes(self, job: Job) -> bool:
        """Whether ``job`` goes into the next batch (not: a model without a Batch API, an item's own question)."""
        return batchable(job.spec) and not job.urgent and _base(job.spec) not in self._no_batch_api

    @property
    def sender(self) -> WaySender:
        assert self._sender is not None, "Batching.open(sender) comes first"
        return self._sender

    # ------------------------------------------------------------------ batches
    async def send_round(self, jobs: list[Job]) -> None:
        groups: dict[tuple[str, str, str | None], list[Job]] = {}
        for job in jobs:
            groups.setdefault((_base(job.spec), job.spec.litellm_model, job.spec.api_key_env), []).append(job)
        await asyncio.gather(*(self._guarded(group) for group in groups.values()))

    async def _guarded(self, jobs: list[Job]) -> None:
        """A group's batches; an unexpected exception (a bug, an odd server) is the error of its requests that have
        no result yet, not the run's."""
        try:
            await self._group(jobs)
        except Exception as exc:  # noqa: BLE001 - a bug or an odd server: its requests' error, not the run's
            text = str(exc).strip()
            for job in jobs:
                if not self.sender.has(job.key):
                    self._store_error(job, ModelError(job.spec.name, redact(
                        f"batch: {type(exc).__name__}{': ' + text if text else ''}", job.spec)))

    async def _group(self, jobs: list[Job]) -> None:
        """One endpoint and model: collect the batches an earlier run submitted for these requests, submit the
        rest, and store every result."""
        spec = jobs[0].spec
        base, key = _base(spec), _key(spec)
        by_key = {job.key: job for job in jobs}
        collecting = []
        # (--medhelm-cache refresh asks again: an earlier run's batch is not this run's answer)
        earlier = self.records.pending(base, spec.litellm_model) if getattr(self.cache, "mode", "on") != "refresh" \
            else []
        for record in earlier:
            mine = {k: by_key.pop(k) for k in record.keys if k in by_key}
            if not mine:
                continue
            try:
                state = await self._client.get(base, key, record.batch_id)
            except RequestFailed as exc:
                if exc.status != 404:  # (a reply it cannot read now: collected as far as it goes, the record kept)
                    collecting.append(self._collect(record, mine, None, spec, base, key))
                else:  # the server does not know it (another account, a restarted test server): ask anew
                    self.records.remove(record.batch_id)
                    self.notes.append(f"medhelm batch {record.batch_id} of an earlier run is unknown to {base} "
                                      f"({redact(exc.message, spec)}): its requests are submitted anew")
                    by_key.update(mine)
                continue
            self.notes.append(f"medhelm batch {record.batch_id}: submitted by an earlier run, collected "
                              f"({len(mine)} request(s), not submitted again)")
            collecting.append(self._collect(record, mine, state, spec, base, key))
        new = [job for job in jobs if job.key in by_key]
        reservations = self._reserve(new)
        new = [job for job in new if job.key in reservations or self.budget is None]
        for chunk in chunks([(job.key, batch_line(job.key, chat_body(job.spec, job.request))) for job in new]):
            collecting.append(self._submit(chunk, {k: by_key[k] for k, _line in chunk}, spec, base, key,
                                           reservations))
        await asyncio.gather(*collecting)

    def _reserve(self, jobs: list[Job]) -> dict[str, Any]:
        """The budget's reservation of each request to submit; a request it refuses is not submitted (its item is
        skipped, as in a direct run)."""
        if self.budget is None:
            return {}
        held = {}
        for job in jobs:
            reservation = self.budget.reserve(job.spec, job.request)
            if reservation is None:
                self.scheduler.stats["not_sent_budget"] += 1
                self._store_error(job, self.budget.refusal(job.spec))
            else:
                held[job.key] = reservation
        return held

    async def _submit(self, chunk: list[tuple[str, bytes]], mine: dict[str, Job], spec: ModelSpec, base: str,
                      key: str | None, reservations: dict[str, Any]) -> None:
        content = b"".join(line for _key, line in chunk)
        try:
            file_id = await self._retrying(lambda: self._client.upload(base, key, content))
            state = await self._retrying(lambda: self._client.create(base, key, file_id))
        except RequestFailed as exc:
            self._release(reservations, mine)
            if exc.status in NO_BATCH_API:  # no Batch API there: these requests (and the later ones) go directly
                if base not in self._no_batch_api:
                    self._no_batch_api.add(base)
                    self.notes.append(f"medhelm: --medhelm-batch: {base} has no Batch API (POST /files: HTTP "
                                      f"{exc.status}); its requests were sent directly")
                for job in mine.values():
                    self.sender.route(job)
                return
            self._fail_all(mine, f"the batch could not be submitted: {redact(exc.message, spec)}", exc.status)
            return
        record = BatchRecord(batch_id=state.id, base=base, model=spec.litellm_model, keys=list(mine))
        self.records.save(record)  # at once: from here on, a stopped run leaves it for the next to collect
        self._say(f"medhelm batch {state.id}: submitted {len(mine)} request(s) ({_kind(mine)}) to {spec.name} "
                  f"at {base}")
        await self._collect(record, mine, state, spec, base, key, reservations)

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:  # (the run's one retry policy)
        return await retrying_raised(self.scheduler.settings.retry_policy, call)

    async def _collect(self, record: BatchRecord, mine: dict[str, Job], state: BatchState | None, spec: ModelSpec,
                       base: str, key: str | None, reservations: dict[str, Any] | None = None) -> None:
        """Wait for the batch (at most ``batch_timeout`` s), then store its results. Its record is removed only once
        every answer of it is stored and every other line is its item's error: a results file that could not be
        read, an answer the cache refused, a batch not ended by the deadline, a run stopped meanwhile all leave the
        record, and the same command collects the batch (it is not submitted again)."""
        started = time.monotonic()
        deadline = started + self.batch_timeout
        intervals = poll_intervals()
        failures = 0
        shown = None
        if state is None or not state.done:  # (what this run now waits for, said as it starts)
            self.batches[record.batch_id] = f"waiting, at most {self.batch_timeout:g} s (--medhelm-batch-timeout)"
            self._say(f"medhelm batch {record.batch_id}: waiting for its {len(mine)} result(s) from {spec.name}, at "
                      f"most {self.batch_timeout:g} s (--medhelm-batch-timeout)")
        while state is None or not state.done:
            if state is not None:
                if time.monotonic() >= deadline:
                    self._timed_out(record, mine, state, spec, reservations)
                    return
                await asyncio.sleep(max(0.0, min(next(intervals), deadline - time.monotonic())))
            try:
                state = await self._client.get(base, key, record.batch_id)
                failures = 0
            except RequestFailed as exc:
                failures += 1
                if failures >= POLL_FAILURES_MAX or not exc.retryable or time.monotonic() >= deadline:
                    self.batches.pop(record.batch_id, None)
                    self._release(reservations or {}, mine)
                    self._fail_all(mine, f"batch {record.batch_id}: its status could not be read "
                                         f"({redact(exc.message, spec)}); its id is kept in the cache directory: "
                                         "the same command collects it later", exc.status)
                    return
                await asyncio.sleep(max(0.0, min(next(intervals), deadline - time.monotonic())))
                continue
            seen = (state.status, state.completed, state.failed)
            if seen != shown:
                shown = seen
                counts = f"{state.completed}/{state.total or len(record.keys)}" + (
                    f", {state.failed} failed" if state.failed else "")
                self.batches[record.batch_id] = (f"{state.status} {counts} (--medhelm-batch-timeout "
                                                 f"{self.batch_timeout:g} s)")
                self._say(f"medhelm batch {record.batch_id}: {state.status} {counts}")
        self.batches.pop(record.batch_id, None)
        # from the submission (or from when this run began to collect it) to its end, or the server's count if longer
        took = max(state.took_s or 0.0, time.monotonic() - started)
        limits = {k: line_limit(job.request.max_output_tokens) for k, job in mine.items()}
        lines, unread = await self._read_results(state, set(record.keys), limits, spec, base, key)
        results = lines.results
        unasked = [Stored(k, result) for k, result in results.items()  # lines of an earlier run's batch that no
                   if k not in mine and isinstance(result, Completion)]  # item of this run asks for
        stored = list(unasked)
        answered = sum(isinstance(results.get(k), Completion) for k in mine)
        self.notes.append(f"medhelm batch {state.id} ({_kind(mine)}, {spec.name} at {base}): {state.status}; "
                          f"{answered}/{len(mine)} answered" + (f", {len(mine) - answered} failed"
                                                                if answered < len(mine) else ""))
        self.notes.extend(lines.notes)
        finished: list[tuple[Job, Completion | ModelError]] = []
        for k, job in mine.items():
            outcome = results.get(k)
            # (a reservation was made only with a budget)
            held = (reservations or {}).get(k) if self.budget is not None else None
            if isinstance(outcome, Completion):
                outcome.text = cut_at_stops(outcome.text, stops_after(job.spec, job.request))  # (as a direct reply)
                outcome.latency_s = took
                outcome.extra = {**outcome.extra, "batch_id": state.id}
                if held is not None and self.budget is not None:
                    self.budget.settle(held, outcome.tokens_in, outcome.tokens_out, None,
                                       usage_known=outcome.usage_known)
                stored.append(Stored(k, outcome, job.request.to_json()))
                finished.append((job, outcome))
                continue
            if held is not None and self.budget is not None:  # a malformed line may have been charged: its upper
                if isinstance(outcome, BadLine):                # bound (as a direct reply)
                    self.budget.settle(held, 0, 0, None, usage_known=False)
                else:
                    self.budget.release(held)
            if isinstance(outcome, LineError):
                error = ModelError(spec.name, redact(outcome.message, spec), outcome.status)
            elif isinstance(outcome, BadLine):
                error = ModelError(spec.name, f"batch {state.id}: {outcome}")
            elif unread:  # (its line may be in the file that could not be read: the record stays for the next run)
                error = ModelError(spec.name, redact(f"batch {state.id} {state.status}: {'; '.join(unread)}; its id "
                                                     "is kept in the cache directory: the same command collects it "
                                                     "(not submitted again)", spec))
            else:
                why = "; ".join(state.errors) or "no result line for this request"
                error = ModelError(spec.name, redact(f"batch {state.id} {state.status}: {why}", spec))
            stored.append(Stored(job.key, error))  # (this run's only: an error is never served to a later run)
            finished.append((job, error))
        # stored before any is reported (as AnswerWriter does): an item sees only an answer that is in the cache
        refused = await asyncio.to_thread(store_all, self.cache, stored)
        self.scheduler.stats["answers"] += sum(one.key not in refused for one in unasked)
        for job, result in finished:
            if isinstance(result, ModelError):
                self._failed(job, result)
            elif job.key in refused:
                cause = refused[job.key]
                self._store_error(job, ModelError(job.spec.name, "the answer came but could not be stored in the "
                                                                 f"cache: {type(cause).__name__}: {cause}; the batch's "
                                                                 "id is kept: the same command collects it again"))
            else:
                self.scheduler.stats["answers"] += 1
                self.sender.finish(job, result)
        if unread or refused:  # an answer of it is not stored yet: the next run collects it (not paid twice)
            self.notes.append(f"medhelm batch {state.id}: kept in the cache directory ("
                              + ("its results could not all be read" if unread else
                                 f"{len(refused)} answer(s) could not be stored")
                              + f"): the same command collects it, not submitted again (its record: "
                              f"{self.records.path(record.batch_id)}; delete it to submit its requests anew)")
            return
        self.records.remove(record.batch_id)

    def _timed_out(self, record: BatchRecord, mine: dict[str, Job], state: BatchState, spec: ModelSpec,
                   reservations: dict[str, Any] | None) -> None:
        """The deadline passed with the batch not ended: its requests are errors that say so; its record stays."""
        self.batches.pop(record.batch_id, None)
        self._release(reservations or {}, mine)
        message = (f"batch {record.batch_id} is still {state.status} after {self.batch_timeout:g} s, the "
                   f"--medhelm-batch-timeout: no longer waited for; its id is kept in the cache directory: the same "
                   "command collects it (not submitted again)")
        self.notes.append(f"medhelm {message}")
        self._say(f"medhelm {message}")
        self._fail_all(mine, redact(message, spec), None)

    async def _read_results(self, state: BatchState, expected: set[str], limits: dict[str, int], spec: ModelSpec,
                            base: str, key: str | None) -> tuple[ResultLines, list[str]]:
        """Every result line of the batch's output and error files, by request key (:class:`ResultLines`: a line
        longer than its request's ``max_tokens`` allows is not an answer, as a direct reply; a custom_id twice is
        refused; a file longer than all of them is not read), and what could not be read (a file that failed
        through the retries or was over its bound: the batch is then collected again by the next run). (A request
        of an earlier run's batch that this run does not ask for is allowed the largest bound.)"""
        largest = max(limits.values(), default=line_limit(0))
        whole = results_limit([]) + sum(limits.get(k, largest) for k in expected)
        lines = ResultLines(state.id, expected, limits, largest, model=spec.litellm_model.split("/", 1)[-1])
        unread: list[str] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id is None:
                continue
            try:
                content = await self._retrying(partial(self._client.content, base, key, file_id, whole))
            except RequestFailed as exc:
                unread.append(f"its results file {file_id} could not be read ({redact(exc.message, spec)})")
                continue
            lines.add(content)
        return lines, unread

    # ------------------------------------------------------------------ results
    def _store_error(self, job: Job, error: ModelError) -> None:
        try:
            self.cache.put_error(job.key, error)  # (this run's only: an error is never served to a later run)
        except Exception:  # noqa: BLE001 - the error still reaches the item through the sender
            pass
        self._failed(job, error)

    def _failed(self, job: Job, error: ModelError) -> None:
        """``error`` (already stored, or not storable) to its item."""
        if not isinstance(error, BudgetExhausted):
            self.scheduler.stats["failed"] += 1
        self.sender.finish(job, error)

    def _fail_all(self, mine: dict[str, Job], message: str, status: int | None) -> None:
        for job in mine.values():
            self._store_error(job, ModelError(job.spec.name, message, status))

    def _release(self, reservations: dict[str, Any], mine: dict[str, Job]) -> None:
        for k in mine:
            held = reservations.pop(k, None)
            if held is not None and self.budget is not None:
                self.budget.release(held)

    def _say(self, line: str) -> None:  # (on the loop)
        if self.announce is not None:
            try:
                self.announce(line)
            except Exception:  # noqa: BLE001 - a terminal that cannot be written to does not stop the batches
                pass


def _kind(jobs: dict[str, Job]) -> str:
    return "answers" if all(job.request.purpose == "answer" for job in jobs.values()) else "jury"
