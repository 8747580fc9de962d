"""Delivery: the one path by which requests are sent and answers reach the items.

**Sending** (the central process, or xdist's controller): the planned answers that the cache does not hold go out
in item order through one background sender (:mod:`pytest_medhelm.sending.background`: the scheduler's loop on a
thread), while the items run; each answer is cached the moment it arrives, and an answer of a
judged benchmark is followed at once by its judge requests. Both modes print the same summary lines.

**Receiving** (:meth:`Delivery.complete`, the central process or an xdist worker): an item waits only for its own
answer. How it waits is chosen once, by role: the central process waits on its sender; a worker polls the run's
cache directory (the controller's sender writes there; never Redis, which the controller read) until the answer or
its error is there, or the controller says it has stopped sending (then the worker asks itself). A request nobody
planned (a test body's own question) goes through the running sender, ahead of what waits there; with no sender
running it is sent at once. Errors travel as structured values (:meth:`ModelError.to_json`), never as text to parse.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.item_api import CURRENT_ITEM, TIMEOUT_SETTINGS
from pytest_medhelm.run.imports_ahead import ImportsAhead

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.context import RunContext
    from pytest_medhelm.run.plan import AnswerPlan, JudgeRequest, PlannedAnswer
    from pytest_medhelm.sending.background import FollowUp
    from pytest_medhelm.sending.jobs import Job
    from pytest_medhelm.sending.protocol import Sender
    from pytest_medhelm.values import ChatRequest, Completion, Instance, ModelError, ModelSpec

Line = tuple[str, dict[str, bool]]
#: why a run stopped early: every model under test fails every request (a wrong key, an unreachable endpoint)
EVERY_MODEL_BROKEN = ("medhelm: every model under test fails every request (the message is above); the remaining "
                      "items were not run")


class Delivery:
    def __init__(self, ctx: RunContext, plan: AnswerPlan, write_line: Callable[[str, dict], None],
                 on_sender_finished: Callable[[], None] | None = None) -> None:
        self.ctx = ctx
        self.plan = plan
        self.write_line = write_line  # the terminal, for what must be said at once
        self._on_sender_finished = on_sender_finished
        #: central: this run's answers and the judges' verdicts on them, in memory, by request key (the sender's
        #: thread adds verdicts as answers arrive: single updates and lookups, never iterated; a completion may be
        #: handed to two items, as a planned answer shared by two instances is)
        self._answers: dict[str, Completion] = {}
        self._sender: Sender | None = None  # (the one engine the run talks to: sending/protocol.py)
        #: model name -> its endpoint spec, or the ModelError that stops it
        self._targets: dict[str, ModelSpec | ModelError] = {}
        self._broken_models: set[str] = set()
        self.session: pytest.Session | None = None  # set by the loop: a run that cannot go on stops through it
        #: worker: answers the controller sends (planned answer keys; judge keys once their answer is here)
        self._from_controller: set[str] = set()
        self._controller_done: Callable[[], bool] = lambda: True
        self._delivered: dict[tuple[str, str], str] = {}  # (benchmark, instance id) -> the planned answer's text
        # what sending needs, imported ahead by a process that would otherwise wait for its plan (prefetch)
        self._imports = ImportsAhead(("asyncio", "aiohttp"), "medhelm-sending-imports")
        self._errors_served: set[str] = set()  # requests whose error an item was given once
        self.lines: list[Line] = []  # the sender's summary, for the terminal summary
        self._sender_crash: str | None = None  # the sender died during the run: what its waiting items did

    # ------------------------------------------------------------------------------------------ sending
    def target(self, spec: ModelSpec) -> ModelSpec | ModelError:
        """``spec`` with a URL to send to, or the ModelError that says it cannot be reached (then its items error,
        and one line says why, once per model)."""
        from pytest_medhelm.values import ModelError

        if spec.name not in self._targets:
            try:
                self._targets[spec.name] = self.ctx.endpoint(spec)
            except ModelError as exc:
                self._targets[spec.name] = exc
                self.write_line(f"medhelm: {exc}", {"red": True, "bold": True})
        return self._targets[spec.name]

    def _job_or_error(self, spec: ModelSpec, request: ChatRequest) -> Job | None:
        from pytest_medhelm.sending.jobs import Job
        from pytest_medhelm.values import ModelError

        target = self.target(spec)
        if isinstance(target, ModelError):
            self.ctx.cache.put_error(request.cache_key(), target)
            return None
        return Job(target, request)

    def _jobs(self, slots: list[Job | JudgeRequest], keep_in_memory: bool) -> list[Job]:
        """``slots`` as jobs, in their order: a judge's request becomes one unless the cache holds its verdict (all
        of them looked up at once: a resumed run's jury, or HealthBench's graders, ask thousands; kept in memory for
        the items that read them, with ``keep_in_memory``)."""
        from pytest_medhelm.run.plan import JudgeRequest

        judged = [slot for slot in slots if isinstance(slot, JudgeRequest)]
        held = self.ctx.cache.get_many(slot.request.cache_key() for slot in judged) if judged else {}
        if keep_in_memory:
            self._answers.update(held)
        jobs = []
        for slot in slots:
            if isinstance(slot, JudgeRequest):
                if slot.request.cache_key() in held:
                    continue
                job = self._job_or_error(slot.spec, slot.request)
                if job is None:
                    continue
                slot = job
            jobs.append(slot)
        return jobs

    def prefetch(self) -> None:
        """Import the HTTP client on a thread now, while this process waits for the plan anyway (xdist's controller
        waits for a worker's collection): sending then starts without it (0.1-0.2 s)."""
        self._imports.start()

    def start(self, planned: list[PlannedAnswer], keep_in_memory: bool = True) -> None:
        """Send what the cache does not hold, in the background; judge requests follow each judged answer."""
        self._imports.join()
        if not planned:
            self._sender_finished()
            return
        if self.ctx.budget is not None:
            self._check_budget(planned)
        judged = any(self.plan.is_judged(p.instance.benchmark) for p in planned)
        if judged:
            from pytest_medhelm.run.preflight import announce_judges

            announce_judges(self.ctx, self.write_line)  # where the judges go, said before any is asked
            for spec in self.plan.judging_specs(p.instance.benchmark for p in planned):
                self.target(spec)  # a judge's (or grader's) server starts now, not on the sending loop
        waiting_for_answer: dict[str, list[Instance]] = {}  # answer key -> the judged instances it answers
        slots: list[Job | JudgeRequest] = []
        known: dict[str, Completion | None] = {}  # answer key -> the cached answer (None: sent now)
        cached = self.ctx.cache.get_many(entry.key for entry in planned)  # (one lookup for all)
        for entry in planned:  # item order: the first items' answers come first
            key = entry.key
            if key in known:
                answer = known[key]
            else:
                answer = known[key] = cached.get(key)
                if answer is not None:
                    if keep_in_memory:
                        self._answers[key] = answer
                else:
                    job = self._job_or_error(self.ctx.model_spec(entry.model), entry.request)
                    if job is not None:
                        slots.append(job)
            if self.plan.is_judged(entry.instance.benchmark):
                if answer is not None:
                    slots.extend(self.plan.judge_requests(entry.instance, answer.text))
                else:
                    waiting_for_answer.setdefault(key, []).append(entry.instance)

        def follow_up(job: Job, result: Completion | ModelError) -> list[Job]:
            # on the sender's side: the jury's requests for an answer that just arrived
            from pytest_medhelm.values import ModelError

            if isinstance(result, ModelError):
                return []
            return self._jobs([judged for instance in waiting_for_answer.get(job.key, ())
                               for judged in self.plan.judge_requests(instance, result.text)], keep_in_memory)

        jobs = self._jobs(slots, keep_in_memory)
        if not jobs:
            self._sender_finished()
            return
        from pytest_medhelm.sending import background

        sender: Sender
        if self.ctx.run_config.batch:  # --medhelm-batch: chosen once, here (pytest_medhelm.sending.batching)
            sender = self._batch_sender(follow_up, judged)
        else:
            sender = background.BackgroundSender(self.ctx.scheduler, follow_up, self._sender_finished)
        self._sender = sender
        sender.start(jobs)

    def _batch_sender(self, follow_up: FollowUp, judged: bool) -> Sender:
        """The sender of ``--medhelm-batch`` (in this process: the controller under xdist, never a worker); the
        models and judges without a Batch API are named once."""
        from pytest_medhelm.sending.background import BackgroundSender
        from pytest_medhelm.sending.batching import Batching, unbatchable_line

        specs = [self.ctx.model_spec(m) for m in self.ctx.run_config.models]
        line = unbatchable_line(specs + (self.ctx.judge_specs() if judged else []))
        if line:
            self.write_line(line, {"yellow": True})
        # (no item waits here to show how the batches go: the sender says it)
        announce = None if self.ctx.role.runs_items else (lambda text: self.write_line(text, {}))
        batching = Batching(self.ctx.scheduler, self.ctx.cache_dir(), announce,
                            batch_timeout=self.ctx.run_config.batch_timeout)
        return BackgroundSender(self.ctx.scheduler, follow_up, self._sender_finished, way=batching)

    def _sender_finished(self) -> None:
        if self._on_sender_finished is not None:
            self._on_sender_finished()

    def _check_budget(self, planned: list[PlannedAnswer]) -> None:
        """A budget needs a price for every model it may pay for: refuse the run up front rather than skip all."""
        from pytest_medhelm.budget import unpriced

        specs = list({p.model: self.ctx.model_spec(p.model) for p in planned}.values())
        specs += self.plan.judging_specs(p.instance.benchmark for p in planned)
        missing = unpriced(specs, self.ctx.price_of)
        if missing:
            raise pytest.UsageError(f"--medhelm-budget needs a price for {', '.join(missing)}: give it in "
                                    "--medhelm-prices FILE (input_per_million, output_per_million)")
        budget = self.ctx.budget
        assert budget is not None  # (checked only with a budget)
        budget.prompt_tokens(specs[0], planned[0].request)  # the token counter loads here, not later

    def finish(self, interrupted: bool = True) -> None:
        """After the item loop: stop the sender, and keep its summary for the terminal summary (the item progress
        owns the terminal until then). A loop that ended by itself (its last item, ``-x``, ``--maxfail``) lets the
        requests in flight finish, so that the answers already paid for are cached; an interrupted one (Ctrl-C)
        cancels them."""
        self._imports.join()  # (a session that sent nothing: no thread outlives it)
        sender, self._sender = self._sender, None
        if sender is None:
            return
        sender.stop(drain=None if interrupted else self.ctx.run_config.timeout + 5.0)
        self.lines = [(line, {}) for line in sender.summary_lines()]
        if sender.summary:
            self.lines.append((f"medhelm: {sender.summary}", {}))
        for model, message in sender.broken.items():
            self.lines.append((f"medhelm: every request to {model} fails: {message}", {"red": True, "bold": True}))
        if self._sender_crash is None and sender.crash is not None:  # (xdist: the workers asked for themselves)
            self._sender_crash = (f"pytest-medhelm: the background sender stopped: {sender.crash}; the items that "
                                  "waited for it asked for their own answers")
        if self._sender_crash is not None:
            self.lines.append((self._sender_crash, {"yellow": True, "bold": True}))

    # ------------------------------------------------------------------------------------------ receiving
    def expect_from_controller(self, planned: list[PlannedAnswer], controller_done: Callable[[], bool]) -> None:
        """Worker: these answers are sent by the controller; ``controller_done()`` tells when it stopped sending."""
        self._from_controller.update(p.key for p in planned)
        self._controller_done = controller_done

    def _awaited(self, key: str) -> Completion | ModelError | None:
        """The answer (or error) of a request someone else sends for this run, once it is there; None when it is
        not (or no longer) on its way."""
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        sender = self._sender
        if sender is not None and sender.expects(key):
            if sender.has(key):
                return sender.wait(key)
            from pytest_medhelm.sending.background import SenderCrashed
            from pytest_medhelm.sending.waiting import wait_for_answer

            try:
                with self._timeout_paused():
                    return wait_for_answer(self.ctx.config, sender, key)  # with the sending's progress meanwhile
            except SenderCrashed as exc:
                # the sender died (a bug): this item asks for its own answer, as every item
                # waiting for it does, rather than all of them failing; said once
                self._say_sender_crash(exc)
                return None
        if key in self._from_controller:
            found = self._in_cache_dir(key)
            if found is not None or self._controller_done():
                return found
            with self._timeout_paused():
                return self._poll_cache_dir(key)
        return None

    def _say_sender_crash(self, exc: Exception) -> None:
        if self._sender_crash is None:  # (said in the terminal summary)
            self._sender_crash = f"{exc}; the items that waited for it asked for their own answers"

    def _in_cache_dir(self, key: str) -> Completion | ModelError | None:
        """What the controller stored for ``key`` in the run's cache directory, which every process of the run
        shares (never the Redis tier: the controller read that once for every planned answer)."""
        return self.ctx.cache.get_here(key) or self.ctx.cache.get_error(key)

    def _poll_cache_dir(self, key: str) -> Completion | ModelError | None:
        delay = 0.002
        while True:
            done = self._controller_done()  # read before the cache: an answer stored just before it is seen
            found = self._in_cache_dir(key)
            if found is not None or done:
                return found
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    @contextlib.contextmanager
    def _timeout_paused(self) -> Iterator[None]:
        """pytest-timeout's timer of the running item is off while it waits for the sender (the queue's time is not
        the item's), and starts again, whole, when its answer is here."""
        item = CURRENT_ITEM.get()
        settings = item.stash.get(TIMEOUT_SETTINGS, None) if item is not None else None
        if item is None or settings is None:
            yield
            return
        hook = item.config.hook
        hook.pytest_timeout_cancel_timer(item=item)
        try:
            yield
        finally:
            hook.pytest_timeout_set_timer(item=item, settings=settings)

    def _ask_now(self, job: Job) -> Completion | ModelError:
        """A request nobody sends for this item (its own question, or one asked again after its error): through the
        running sender when there is one, ahead of what waits there, so that the endpoint's slots and the run's
        limits hold for it too (a second loop beside the sender's would not know them); else by a sender of its
        own (:func:`~pytest_medhelm.sending.background.ask_alone`): one way to the wire either way."""
        from dataclasses import replace

        from pytest_medhelm.sending.background import SenderCrashed, ask_alone

        sender = self._sender
        if sender is not None:
            try:
                with self._timeout_paused():  # (as for a planned answer: the request's own time is bounded by
                    result = sender.ask(replace(job, urgent=True))  # --medhelm-timeout)
            except SenderCrashed:
                result = None
            if result is not None:
                return result
        return ask_alone(self.ctx.scheduler, job)

    def complete(self, spec: ModelSpec, request: ChatRequest) -> Completion:
        from pytest_medhelm.values import BudgetExhausted, ModelError

        key = request.cache_key()
        result = self._awaited(key)
        if result is None:  # (not sent for this run, or no longer coming: both tiers of the cache)
            result = self.ctx.cache.get(key) or self.ctx.cache.get_error(key)
        if isinstance(result, ModelError) and not isinstance(result, BudgetExhausted) and key in self._errors_served:
            result = None  # asked again after its error (a rerun): the stored error is not an answer; ask anew
        if result is None:
            job = self._job_or_error(spec, request)
            if job is not None:
                result = self._ask_now(job)
            else:  # the model cannot be reached: its error, stored for this key, or said by its target
                unreachable = self.target(spec)
                assert isinstance(unreachable, ModelError)  # (a reachable target makes a job)
                result = self.ctx.cache.get_error(key) or unreachable
        if isinstance(result, BudgetExhausted):
            pytest.skip(str(result))
        if isinstance(result, ModelError):
            self._errors_served.add(key)
            self._stop_if_every_model_is_broken(spec, result)
            raise result
        for instance in self.plan.instances_of(key):
            self._delivered[(instance.benchmark, instance.id)] = result.text
        # priced here, for the model under test and the judges alike: a prices file wins over litellm's table
        result.cost_usd = self.ctx.completion_cost(spec, result.tokens_in, result.tokens_out, result.cost_usd)
        return result

    def answers_at_hand(self, slug: str) -> list[tuple[str, Instance]]:
        """(answer text, instance) of every planned answer of benchmark ``slug`` already here (in memory, from the
        sender, or in the run's cache directory: the process that sent, or the controller, read Redis for every
        planned answer already), without waiting."""
        out: list[tuple[str, Instance]] = []
        for key, instances in self.plan.keys_of(slug):
            answer: Completion | ModelError | None = self._answers.get(key)
            if answer is None and self._sender is not None and self._sender.has(key):
                answer = self._sender.wait(key)
            if answer is None:
                answer = self.ctx.cache.get_here(key)
            if answer is not None and not isinstance(answer, Exception):
                out.extend((answer.text, inst) for inst in instances if inst.benchmark == slug)
        return out

    def judge_completions(self, instance: Instance, answer_text: str) -> Any:
        """The judges' verdicts on ``answer_text`` (:class:`~pytest_medhelm.jury.JuryVerdicts`: each reply, or the
        ModelError that stopped it, with the sha256 of each judge prompt and the instrument's criteria)."""
        from pytest_medhelm.jury.instrument import prompt_sha256
        from pytest_medhelm.jury.scoring import JuryVerdicts
        from pytest_medhelm.values import ModelError

        requests = self.plan.judge_requests(instance, answer_text)
        if not self.ctx.role.sends_answers and self._delivered.get((instance.benchmark, instance.id)) == answer_text:
            # the planned answer: its judgements are on their way from the controller, which sent the answer
            self._from_controller.update(r.request.cache_key() for r in requests)
        replies: dict[str, Any] = {}
        for judged in requests:
            try:
                replies[judged.judge] = self.complete(judged.spec, judged.request)
            except ModelError as exc:
                replies[judged.judge] = exc
        instrument = self.ctx.jury_instrument
        return JuryVerdicts(replies=replies, judge_prompt_sha256=[prompt_sha256(r.request) for r in requests],
                            criteria=instrument.criteria(instance.benchmark), instrument=instrument.name)

    def grader_completions(self, instance: Instance, answer_text: str) -> Any:
        """The rubric grader's replies on ``answer_text`` (a
        :class:`~pytest_medhelm.metrics.healthbench.GraderReplies`: each planned call with its reply, or the
        ModelError that stopped it), fetched as judge replies are (sent ahead by the sender, or asked now)."""
        from pytest_medhelm.jury.rubric_grader import GraderPromptsUnavailable
        from pytest_medhelm.metrics.healthbench import GraderReplies
        from pytest_medhelm.values import ModelError

        try:
            calls, specs = self.plan.grader_calls(instance, answer_text)
        except GraderPromptsUnavailable as exc:
            return GraderReplies(unavailable=str(exc))
        if not self.ctx.role.sends_answers and self._delivered.get((instance.benchmark, instance.id)) == answer_text:
            self._from_controller.update(call.request.cache_key() for call in calls)
        replies: list[Any] = []
        for call in calls:
            try:
                replies.append(self.complete(specs[call.grader], call.request))
            except ModelError as exc:
                replies.append(exc)
        return GraderReplies(calls=calls, replies=replies)

    def _stop_if_every_model_is_broken(self, spec: ModelSpec, error: ModelError) -> None:
        """A wrong key or an unknown model (401/403/404), or an endpoint that never answered, fails every request
        the same way: once every model under test is in that state, the run stops after this item instead of
        printing the same error on each (under xdist, each worker stops after its first such item)."""
        from pytest_medhelm.sending.failures import systematic_failure

        models = self.ctx.run_config.models
        if not systematic_failure(error) or spec.name not in models:
            return
        self._broken_models.add(spec.name)
        if self.session is not None and self._broken_models >= set(models):
            self.session.shouldfail = EVERY_MODEL_BROKEN
