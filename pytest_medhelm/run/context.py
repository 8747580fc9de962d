"""The run's context: what every room of the run shares, built lazily, once per pytest process.

Configuration (validated :class:`~pytest_medhelm.config.RunConfig`), the benchmark registry, the role of this
process, the run id, the answer cache, prices, the budget, model specs and the endpoints they are sent to (a
``local/...`` model's llama.cpp server is started here, by the process that sends). Nothing heavy is imported
until it is asked for.

The process's role (:mod:`pytest_medhelm.run.roles`: central, xdist's controller, or a worker) is chosen once, when
the run starts; the context reads only what the role says this process does (:class:`ProcessRole`), and the run's
identity from :class:`Handover` (made here, or handed by xdist's controller to its workers).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.budget import Budget
    from pytest_medhelm.cache.store import AnswerCache
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.config import RunConfig
    from pytest_medhelm.cost import Prices
    from pytest_medhelm.sending.scheduler import Scheduler
    from pytest_medhelm.values import ModelSpec


class ProcessRole(Protocol):
    """What this process does in the run (the role object chosen once: :mod:`pytest_medhelm.run.roles`)."""

    @property
    def sends_answers(self) -> bool:
        """It sends the planned answers: it starts the local servers, owns the run's error entries and ledger."""

    @property
    def reports(self) -> bool:
        """It aggregates the items' records, evaluates the gates and writes the reports."""

    @property
    def runs_items(self) -> bool:
        """It runs items (and so shows, while an item waits, how the sending goes)."""


@dataclass(frozen=True)
class Handover:
    """The run's identity and storage, made by the process that sends and handed to xdist's workers at their start
    (through xdist's ``workerinput``)."""

    run_id: str
    #: signs the files the processes of this run leave each other in the cache directory (plans, local servers'
    #: URLs): handed to the workers by xdist, never written anywhere, so a file planted there cannot make the run
    #: send a prompt it did not plan, nor send one to another URL
    coordination_key: bytes
    cache_dir: str | None = None
    #: the shared cache as the controller found it at start-up ("": none, or unreachable); None: not handed
    shared_cache: str | None = None

    @classmethod
    def new(cls) -> Handover:
        return cls(run_id=os.urandom(16).hex(), coordination_key=os.urandom(32))

    def write(self, workerinput: dict[str, Any]) -> None:
        workerinput["medhelm_run_id"] = self.run_id
        workerinput["medhelm_coordination_key"] = self.coordination_key.hex()
        if self.shared_cache is not None:
            workerinput["medhelm_shared_cache"] = self.shared_cache
        if self.cache_dir is not None:
            workerinput["medhelm_cache_dir"] = self.cache_dir

    @classmethod
    def read(cls, workerinput: dict[str, Any]) -> Handover:
        return cls(run_id=workerinput["medhelm_run_id"],
                   coordination_key=bytes.fromhex(workerinput.get("medhelm_coordination_key", "")),
                   cache_dir=workerinput.get("medhelm_cache_dir"),
                   shared_cache=workerinput.get("medhelm_shared_cache"))


def run_every_step(steps: Sequence[Callable[[], object]]) -> None:
    """Call every step, whatever the earlier ones raise; then raise the first failure (the others added as its
    notes), so that no cleanup is skipped and no failure is hidden."""
    failures: list[BaseException] = []
    for step in steps:
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - even a KeyboardInterrupt: the next steps still run
            failures.append(exc)
    if failures:
        first = failures[0]
        for other in failures[1:]:
            first.add_note(f"also, at the end of the run: {type(other).__name__}: {other}")
        raise first


class RunContext:
    def __init__(self, config: pytest.Config, role: ProcessRole, handover: Handover) -> None:
        self.config = config
        self.role = role
        self.run_id = handover.run_id
        self.coordination_key = handover.coordination_key
        self._cache_dir: str | None = handover.cache_dir
        self._handed_shared_cache = handover.shared_cache
        self._run_config: RunConfig | None = None
        self._registry: Registry | None = None
        self._cache: AnswerCache | None = None
        self._scheduler: Scheduler | None = None
        self._prices: Prices | None = None
        self._provider_priced: dict[ModelSpec, bool] = {}  # spec -> priced at its provider's rates (per answer)
        self._budget: Budget | None = None
        self._budget_made = False
        self._specs: dict[tuple[str, str], ModelSpec] = {}
        self._local: Any = None  # LlamaEndpoints: llama.cpp servers this process started (never in a worker)
        self._data_verification: Any = None
        self._shared_unreachable = False
        #: the start-up line saying why the shared cache is not used (it could not be reached), or None
        self._shared_problem: str | None = None
        #: what each xdist worker saw of the shared cache, by worker id (the controller's view of its workers)
        self._worker_shared: dict[str, dict[str, Any]] = {}
        self._jury: Any = None  # (JuryInstrument, warning or None), loaded at first use
        self._grader_prompts: dict[bool, Any] = {}  # fork? -> GraderPrompts (HealthBench), loaded at first use

    @property
    def configured(self) -> bool:
        """Whether the run configuration was read (it is, as soon as any medhelm option or item is in play)."""
        return self._run_config is not None

    # ------------------------------------------------------------------------------------------ configuration
    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from pytest_medhelm.catalogue import build_registry

            self._registry = build_registry(self.config.hook)
        return self._registry

    @property
    def run_config(self) -> RunConfig:
        if self._run_config is None:
            from pytest_medhelm.config import from_pytest

            self._run_config = from_pytest(self.config, set(self.registry.slugs()), registry=self.registry)
            from pytest_medhelm.endpoints import hook as endpoints_hook

            # model strings resolve from below: the built-in hook reads these options, not this context
            endpoints_hook.register(self.config, self._run_config)
        return self._run_config

    @property
    def data_verification(self):
        """The check of the data files against their pinned sha256 (pytest_medhelm.data.verification), one per
        run; ``--medhelm-data-unverified SLUG`` accepts a different version of a benchmark's files."""
        if self._data_verification is None:
            from pytest_medhelm.data.verification import DataVerification

            self._data_verification = DataVerification.of(self.run_config.data_unverified)
        return self._data_verification

    def jury(self, download_allowed: bool = True):
        """The judges' instrument, loaded once: HELM's judge prompts (``DIR/helm_jury/`` or the data cache, where
        they are downloaded once unless ``download_allowed`` is false: a dry run), else our own rubric with a
        warning; returns (instrument, warning or None)."""
        if self._jury is None:
            from pytest_medhelm.jury.instrument import load_jury_instrument

            self._jury = load_jury_instrument(self.run_config.data_dir, download_allowed=download_allowed)
        return self._jury

    @property
    def jury_instrument(self):
        return self.jury()[0]

    def judge_names(self) -> list[str]:
        from pytest_medhelm.jury import DEFAULT_JUDGES

        return list(self.run_config.judges or DEFAULT_JUDGES)

    # ------------------------------------------------------------------------------------------ storage
    def cache_dir(self) -> Path:
        if self._cache_dir is None:
            if self.run_config.cache == "off":
                # nothing persists: a private directory for this run only, removed at the end
                import tempfile

                self._cache_dir = tempfile.mkdtemp(prefix="medhelm-run-")
            else:
                self._cache_dir = str(self.run_config.cache_dir)
        return Path(self._cache_dir)

    @property
    def cache_dir_chosen(self) -> bool:
        return self._cache_dir is not None

    @property
    def cache_mode(self) -> str:
        return "refresh" if self.run_config.cache == "refresh" else "on"

    @property
    def cache(self) -> AnswerCache:
        if self._cache is None:
            from pytest_medhelm.cache.store import AnswerCache

            self._cache = AnswerCache(self.cache_dir(), mode=self.cache_mode, run_id=self.run_id,
                                      shared_url=self.shared_cache_url)
        return self._cache

    @property
    def shared_cache_url(self) -> str | None:
        """The shared cache behind the local one (--medhelm-cache-url); none when the run keeps nothing, or when
        it could not be reached at start-up (said once; a worker learns it from the controller)."""
        if self._shared_unreachable or self.run_config.cache == "off":
            return None
        if self._handed_shared_cache is not None:
            return self._handed_shared_cache or None
        return self.run_config.cache_url

    def shared_cache_failure(self) -> str | None:
        """The line saying that the shared cache stopped answering during the run (in this process), or None."""
        shared = self._cache.shared if self._cache is not None else None
        if shared is None or shared.failure is None:
            return None
        from pytest_medhelm.cache.shared import redacted

        return (f"medhelm: the shared cache {redacted(shared.url)} {shared.failure}: the answers after that are in "
                "the local cache only")

    def shared_cache_state(self) -> dict[str, Any] | None:
        """What this process saw of the shared cache (:meth:`SharedCache.state`), None without one: an xdist
        worker hands it to the controller (:meth:`add_shared_cache_state`)."""
        shared = self._cache.shared if self._cache is not None else None
        return shared.state() if shared is not None else None

    def add_shared_cache_state(self, process: str, state: Any) -> None:
        """An xdist worker's :meth:`shared_cache_state`, for the summary and ``run.shared_cache``."""
        if isinstance(state, dict):
            self._worker_shared[process] = state

    def _shared_states(self) -> dict[str, dict[str, Any]]:
        states = dict(self._worker_shared)
        own = self.shared_cache_state()
        if own is not None:
            states[""] = own
        return states

    def shared_cache_lines(self) -> list[str]:
        """What the terminal summary says of the shared cache (shown under -q too): that it could not be used from
        the start, that it failed during the run (here or in an xdist worker), what it held that was not read."""
        from pytest_medhelm.cache.shared import notes, redacted

        url = self.run_config.cache_url or ""
        lines = [self._shared_problem] if self._shared_problem else []
        states = self._shared_states()
        for process, state in sorted(states.items()):
            if state.get("failure"):
                where = f" (in xdist worker {process})" if process else ""
                lines.append(f"medhelm: the shared cache {redacted(url)} {state['failure']}{where}: the answers after "
                             "that are in the local cache only")
        return lines + notes(url, sum(int(s.get("wrong_type") or 0) for s in states.values()),
                             sum(int(s.get("over_budget") or 0) for s in states.values()))

    def shared_cache_record(self) -> dict[str, Any] | None:
        """``run.shared_cache``: the shared tier's URL (redacted) and whether it answered (the start-up probe, and
        the reads and writes of this process and of its xdist workers), with the reason when it did not; None
        without one."""
        url = self.run_config.cache_url if self.configured and self.run_config.cache != "off" else None
        if not url:
            return None
        from pytest_medhelm.cache.shared import redacted

        states = self._shared_states()
        failures = [state["failure"] for _process, state in sorted(states.items()) if state.get("failure")]
        problem = self._shared_problem or (failures[0] if failures else None)
        return {"url": redacted(url), "answered": problem is None, "problem": problem,
                "hits": sum(int(s.get("hits") or 0) for s in states.values()),
                "writes": sum(int(s.get("writes") or 0) for s in states.values())}

    def check_cache(self) -> list[str]:
        """At start-up, before anything is sent: the cache opened (a directory or file that is not safely the
        user's own, or a damaged database, is a usage error naming it); returns what the run must say about it
        (an old cache converted, a shared cache that cannot be reached)."""
        from pytest_medhelm.cache.store import CacheRefused

        lines = []
        url = self.shared_cache_url
        if url:
            from pytest_medhelm.cache.shared import ClientMissing, probe, redacted

            try:
                problem = probe(url)
            except ClientMissing as exc:
                raise pytest.UsageError(f"medhelm: {exc}") from None
            self._shared_unreachable = problem is not None  # nobody in this run waits on it again
            self._shared_problem = problem
            if problem is None:  # (a problem is said in the terminal summary, shown under -q too)
                lines.append(f"medhelm shared cache: {redacted(url)} (answers and judgements read there after a "
                             "local miss, written to both)")
        try:
            cache = self.cache
        except CacheRefused as exc:
            raise pytest.UsageError(f"medhelm: {exc}") from None
        converted, dropped = cache.migrated
        if converted or dropped:
            lines.insert(0, f"medhelm: the answer cache {cache.directory} was converted from pickles to JSON once: "
                            f"{converted} entries kept" + (f", {dropped} unreadable entries dropped" if dropped
                                                           else ""))
        return lines

    def close(self) -> None:
        """End of the session: the run's error entries go (never served to a later run), the cache closes, the
        budget's ledger file goes, a ``--medhelm-cache off`` directory is removed. Every step runs even when an
        earlier one fails (a directory of prompts must not stay behind because the cache could not close); the
        first failure is raised once all have run."""
        steps = []
        cache = self._cache
        if cache is not None:
            if self.role.sends_answers:
                steps.append(cache.clear_errors)
            steps.append(cache.close)
        if self.role.sends_answers and self._cache_dir is not None:
            self._budget_made = True  # (a budget asked for after this would leave a ledger file behind)
            if self._budget is not None:
                steps.append(self._budget.close)
            if self._run_config is not None and self.run_config.cache == "off":
                steps.append(self._remove_run_cache_dir)
        run_every_step(steps)

    def _remove_run_cache_dir(self) -> None:
        import shutil

        if self._cache_dir is not None and os.path.lexists(self._cache_dir):
            shutil.rmtree(self._cache_dir)  # (a failure is raised: patient text left on disk is said out loud)

    # ------------------------------------------------------------------------------------------ sending
    def settings(self):
        from pytest_medhelm.sending.scheduler import Settings

        rc = self.run_config
        return Settings(concurrency=rc.concurrency, timeout=rc.timeout, retries=rc.retries)

    @property
    def scheduler(self) -> Scheduler:
        """For requests sent from this process itself (a test body's own question, a thread sender)."""
        if self._scheduler is None:
            from pytest_medhelm.sending.scheduler import Scheduler

            self._scheduler = Scheduler(self.cache, self.settings(), budget=self.budget)
        return self._scheduler

    @property
    def prices(self) -> Prices:
        """Prices per token: the --medhelm-prices file first, then litellm's bundled table (unknown: None)."""
        if self._prices is None:
            from pytest_medhelm.cost import Prices

            self._prices = Prices.load(self.run_config.prices)
            if self.run_config.batch:  # the models sent as batches cost their batch price, in every process
                from pytest_medhelm.sending.batching import batch_rates

                specs = [self.model_spec(m) for m in self.run_config.models] + self.judge_specs()
                self._prices.batched = batch_rates(specs, self._prices)
        return self._prices

    def price_of(self, spec: ModelSpec):
        """(USD per prompt token, per completion token) of ``spec``, or None. A model at an endpoint that is not
        its provider's public API is priced by the prices file only, never at the provider's rates."""
        if self._priced_as_provider(spec):
            return self.prices.price_for(spec.name, spec.litellm_model)
        return self.prices.file_price_for(spec.name, spec.litellm_model)

    def completion_cost(self, spec: ModelSpec, tokens_in: int, tokens_out: int, reported: float | None):
        """The cost recorded for one answer of ``spec`` (see :meth:`price_of`; litellm's reported cost is the
        provider's price, so it is believed only for the provider's own API)."""
        return self.prices.completion_cost(spec.name, spec.litellm_model, tokens_in, tokens_out, reported,
                                           as_provider=self._priced_as_provider(spec))

    def _priced_as_provider(self, spec: ModelSpec) -> bool:
        """:func:`~pytest_medhelm.cache.identity.priced_as_provider`, once per spec of the run (it is asked for
        every answer, and reads the environment's endpoint variables: 30 microseconds an item)."""
        known = self._provider_priced.get(spec)
        if known is None:
            from pytest_medhelm.cache.identity import priced_as_provider

            known = self._provider_priced[spec] = priced_as_provider(spec)
        return known

    @property
    def budget(self) -> Budget | None:
        """The --medhelm-budget spending cap, one ledger for every process of the run (a file in the cache
        directory), so that a worker's own requests spend from the same limit as the controller's."""
        if not self._budget_made:
            self._budget_made = True
            limit = self.run_config.budget
            if limit is not None:
                from pytest_medhelm.budget import Budget, SharedLedger

                ledger = SharedLedger(self.cache_dir() / "budget" / f"{self.run_id}.sqlite")
                self._budget = Budget(limit, self.price_of, ledger=ledger)
        return self._budget

    # ------------------------------------------------------------------------------------------ models
    def model_spec(self, name: str) -> ModelSpec:
        """A model under test, as the hook ``pytest_medhelm_model_spec`` resolves it; an item's model that is not
        one is the rubric grader healthbench_meta measures, reached as a judge is."""
        if name not in self.run_config.models:
            return self.judge_spec(name)
        return self._spec(name, "model", self.run_config.api_base)

    def judge_spec(self, name: str) -> ModelSpec:
        return self._spec(name, "judge", self.run_config.jury_api_base)

    def judge_specs(self) -> list[ModelSpec]:
        return [self.judge_spec(name) for name in self.judge_names()]

    # (HealthBench's rubric grader: a judge for endpoints and keys)
    def grader_spec(self, slug: str = "") -> ModelSpec:
        """The rubric grader of benchmark ``slug`` (``--medhelm-grader``; by default HealthBench's reference grader,
        HealthBench Professional's own for that benchmark), reached as a judge is (the judges' endpoint and key
        options)."""
        return self.judge_spec(self.grader_name(slug))

    def grader_name(self, slug: str = "") -> str:
        from pytest_medhelm.catalogue.clinical_decision_support.healthbench_professional import SLUG

        return self.run_config.professional_grader if slug == SLUG else self.run_config.grader

    def grader_prompts(self, fork: bool, download_allowed: bool = True):
        """The rubric grader's prompts (the reference's, or medhelm 0.8.0's when ``fork``), read once from the
        pinned files (:func:`pytest_medhelm.jury.rubric_grader.load_grader_prompts`)."""
        if fork not in self._grader_prompts:
            from pytest_medhelm.jury.rubric_grader import load_grader_prompts

            self._grader_prompts[fork] = load_grader_prompts(
                self.run_config.data_dir, download_allowed=download_allowed, need_reference=not fork,
                need_fork=fork, verification=self.data_verification)
        return self._grader_prompts[fork]

    def _spec(self, name: str, role: str, api_base: str | None) -> ModelSpec:
        spec = self._specs.get((role, name))
        if spec is None:
            spec = self.config.hook.pytest_medhelm_model_spec(name=name, api_base=api_base, config=self.config,
                                                              role=role)
            spec = self._specs[(role, name)] = self._with_reasoning(spec, judge=role != "model")
        return spec

    def _with_reasoning(self, spec: ModelSpec, judge: bool) -> ModelSpec:
        """``spec`` as the run treats it: a reasoning model gets its family and the room it may think in
        (:mod:`pytest_medhelm.sending.reasoning`); a judge is sent what its family accepts, in its own mode."""
        import dataclasses

        from pytest_medhelm.compat import reproduces_helm
        from pytest_medhelm.sending.reasoning import reasoning_for

        if spec.reasoning is not None:  # (a hook implementation that said it itself)
            return spec
        rc = self.run_config
        reasoning = reasoning_for(spec, budget=rc.reasoning_budget, effort=rc.reasoning_effort,
                                  reproduce=reproduces_helm(rc.compat), judge=judge)
        return spec if reasoning is None else dataclasses.replace(spec, reasoning=reasoning)

    def _local_publish_path(self) -> Path:
        return self.cache_dir() / "local" / f"{self.run_id}.json"

    def endpoint(self, spec: ModelSpec) -> ModelSpec:
        """``spec`` with a URL to send to: a local/... model's server is started here (or, in a worker, looked up
        in what the controller published). Raises ModelError when it cannot be reached."""
        from pytest_medhelm.values import is_llama_cpp_model

        if spec.api_base is not None or not is_llama_cpp_model(spec.name):
            return spec
        from pytest_medhelm.endpoints.llama import servers as llama_servers  # (its server's modules: 20 ms)
        from pytest_medhelm.values import ModelError

        if not self.role.sends_answers:
            entry = llama_servers.read_published(self._local_publish_path(), spec.name, self.coordination_key)
            if entry is None:
                raise ModelError(spec.name, "the controlling process started no llama.cpp server for this model "
                                            "(every answer of the run was cached); run without -n to ask it anew")
        else:
            if self._local is None:
                rc = self.run_config
                self._local = llama_servers.LlamaEndpoints(self._local_publish_path(), self.cache_dir() / "logs",
                                                             n_ctx=rc.local_ctx, n_threads=rc.local_threads,
                                                             signing_key=self.coordination_key)
            entry = self._local.start(spec.name)
        if "error" in entry:
            raise ModelError(spec.name, entry["error"])
        return llama_servers.attach(spec, entry)  # its URL, and its slots: never more in flight than it serves

    def stop_local_servers(self) -> None:
        if self._local is not None:
            self._local.stop_all()  # also after a failure or Ctrl-C: pytest unconfigures on every exit path
