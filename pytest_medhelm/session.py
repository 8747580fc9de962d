"""The run: one MedhelmSession per pytest process, registered as the plugin "medhelm-session".

Roles (as pytest-cov's Central / DistMaster / DistWorker):

* **central** (no xdist): collects, sends the answers ahead of time at the start of the test loop, runs the items,
  aggregates, gates and reports.
* **controller** (xdist's controlling process): collects nothing itself. When the first worker has collected, it
  reads that worker's plan of uncached requests and sends them (with the progress line on the real terminal)
  before xdist schedules any item; it then aggregates the workers' reports, gates and reports.
* **worker**: collects, writes its plan, runs items that find their answers in the shared cache.

This module imports nothing heavy at load. A session that uses no medhelm option and collects no medhelm test
never imports it (plugin.py starts the session when the first medhelm test is collected).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.recording import CURRENT_ITEM, RECORD, Missed

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.config import RunConfig
    from pytest_medhelm.models.cache import AnswerCache
    from pytest_medhelm.models.request import ChatRequest, Completion, ModelSpec

MARKER = "medhelm"
#: from this many collected items on, the collected objects are frozen out of the garbage collector's scans
FREEZE_MIN_ITEMS = 1000
_ACTIVE: list["MedhelmSession"] = []


def build_registry(hook: Any = None) -> "Registry":
    """The built-in benchmarks, plus those other plugins register through ``hook`` (a pytest hook relay)."""
    from pytest_medhelm.catalogue import Registry, builtin_benchmarks

    registry = Registry()
    for bench in builtin_benchmarks():
        registry.register(bench)
    if hook is not None:
        hook.pytest_medhelm_register_benchmarks(registry=registry)
    return registry


def registry_for_current_run() -> "Registry":
    return _ACTIVE[-1].registry if _ACTIVE else build_registry()


def judge_completions(instance: Any, answer_text: str) -> dict[str, Any]:
    """The running session's jury verdicts on an answer (used by the jury metric)."""
    if not _ACTIVE:
        raise RuntimeError("pytest-medhelm: the jury needs a running pytest session")
    return _ACTIVE[-1].judge_completions(instance, answer_text)


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class MedhelmSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._run_config: RunConfig | None = None
        self._registry: Registry | None = None
        self._cache: AnswerCache | None = None
        self._scheduler = None
        self._specs: dict[str, ModelSpec] = {}
        self._specs_problems: dict[str, str | None] = {}
        self._judge_specs: dict[str, ModelSpec] = {}
        self._jury: tuple[Any, str | None] | None = None  # (the run's JuryInstrument, its warning), built once
        self._index: dict[str, dict[str, Any]] = {}
        self._instances: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []
        self.removed: dict[str, dict[str, int]] = {}  # benchmark -> reason -> source records a filter dropped
        self.misses: list[tuple[str, str]] = []
        self.results: dict[str, Any] | None = None
        self.gate_failed = False
        self.started = _now()
        workerinput = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        if workerinput is not None:
            self.run_id = workerinput["medhelm_run_id"]
            self._run_cache_dir = workerinput.get("medhelm_cache_dir")
        else:
            self.run_id = os.urandom(16).hex()
            self._run_cache_dir = None
        self._ahead_done = False
        #: the benchmark requests built for the answers-ahead phase: (benchmark, instance id, model) -> (instance,
        #: request), so an item reuses its request (and its computed cache key) instead of building it again
        self._planned: dict[tuple[str, str, str], tuple[Any, ChatRequest]] = {}
        self._answers: dict[str, Completion] = {}  # answers of this run, in memory (central role)
        self._sender = None  # models.background.Sender: answers sent while the items run (central role)
        self._broken_models: set[str] = set()  # models under test whose requests fail systematically
        self._sender_lines: list[tuple[str, dict[str, bool]]] = []  # its summary, for the terminal summary
        self._prices = None
        self._budget = None
        self._local = None  # LocalEndpoints: llama.cpp servers this process started (never in a worker)
        self._frozen = False
        # registered now, before pytest's own plugins register theirs, so that it runs after them: the session's
        # last full garbage collections (pytest's unraisable-exception check) still skip the frozen items
        config.add_cleanup(self._unfreeze)
        _ACTIVE.append(self)

    # ---------------------------------------------------------------- configuration, lazily
    @property
    def registry(self) -> "Registry":
        if self._registry is None:
            self._registry = build_registry(self.config.hook)
        return self._registry

    @property
    def run_config(self) -> "RunConfig":
        if self._run_config is None:
            from pytest_medhelm.config import from_pytest

            self._run_config = from_pytest(self.config, set(self.registry.slugs()))
        return self._run_config

    @property
    def is_controller(self) -> bool:
        return self.config.pluginmanager.has_plugin("dsession")

    def cache_dir(self) -> Path:
        if self._run_cache_dir is None:
            if self.run_config.cache == "off":
                # nothing persists: a private directory for this run only, removed at the end
                import tempfile

                self._run_cache_dir = tempfile.mkdtemp(prefix="medhelm-run-")
            else:
                self._run_cache_dir = str(self.run_config.cache_dir)
        return Path(self._run_cache_dir)

    @property
    def cache(self) -> "AnswerCache":
        if self._cache is None:
            from pytest_medhelm.models.cache import AnswerCache

            mode = "refresh" if self.run_config.cache == "refresh" else "on"
            self._cache = AnswerCache(self.cache_dir(), mode=mode, run_id=self.run_id)
        return self._cache

    @property
    def scheduler(self):
        if self._scheduler is None:
            from pytest_medhelm.models.scheduler import Scheduler, Settings

            rc = self.run_config
            self._scheduler = Scheduler(self.cache, Settings(concurrency=rc.concurrency, timeout=rc.timeout,
                                                             retries=rc.retries), budget=self.budget)
        return self._scheduler

    @property
    def budget(self):
        """The --medhelm-budget spending cap (budget.Budget), kept by the process that sends; None without one."""
        if self._budget is None and self.run_config.budget is not None and not self.is_worker:
            from pytest_medhelm.budget import Budget

            self._budget = Budget(self.run_config.budget, self._price_of)
        return self._budget

    def _price_of(self, spec: "ModelSpec"):
        return self.prices.price_for(spec.name, spec.litellm_model)

    def _check_budget(self, specs: list["ModelSpec"], first: "ChatRequest | None") -> None:
        """A budget needs a price for every model it may pay for: refuse the run up front rather than skip all."""
        if self.budget is None:
            return
        from pytest_medhelm.budget import unpriced

        missing = unpriced(specs, self._price_of)
        if missing:
            raise pytest.UsageError(f"--medhelm-budget needs a price for {', '.join(missing)}: give it in "
                                    "--medhelm-prices FILE (input_per_million, output_per_million)")
        if first is not None and specs:
            self.budget.prompt_tokens(specs[0], first)  # the token counter loads here, not on the sending loop

    @property
    def prices(self):
        """Prices per token: the --medhelm-prices file first, then litellm's bundled table (unknown: None)."""
        if self._prices is None:
            from pytest_medhelm.cost import Prices

            self._prices = Prices.load(self.run_config.prices)
        return self._prices

    def model_spec(self, name: str) -> "ModelSpec":
        spec = self._specs.get(name)
        if spec is None:
            spec = self.config.hook.pytest_medhelm_model_spec(name=name, api_base=self.run_config.api_base,
                                                              config=self.config)
            self._specs[name] = spec
        return spec

    @pytest.hookimpl(trylast=True)
    def pytest_medhelm_model_spec(self, name: str, api_base: str | None, config: pytest.Config) -> "ModelSpec":
        from pytest_medhelm.models import local_endpoints
        from pytest_medhelm.models.request import ModelSpec

        if local_endpoints.is_local(name):
            from pytest_medhelm.models.local import served_model_name

            # the URL is known once the server runs (endpoint()); the identity never depends on it
            return ModelSpec(name=name, litellm_model=f"openai/{served_model_name(name)}", api_base=None,
                             identity=local_endpoints.identity(name))
        return ModelSpec(name=name, litellm_model=name, api_base=api_base)

    # ---------------------------------------------------------------- local/... llama.cpp servers
    def _local_publish_path(self) -> Path:
        return self.cache_dir() / "local" / f"{self.run_id}.json"

    def _local_endpoints(self):
        if self._local is None:
            from pytest_medhelm.models.local_endpoints import LocalEndpoints

            rc = self.run_config
            self._local = LocalEndpoints(self._local_publish_path(), self.cache_dir() / "logs", n_ctx=rc.local_ctx,
                                         n_threads=rc.local_threads)
        return self._local

    def endpoint(self, spec: "ModelSpec") -> "ModelSpec":
        """``spec`` with a URL to send to: a local/... model's server is started here (or, in a worker, looked up)."""
        from pytest_medhelm.models import local_endpoints

        if spec.api_base is not None or not local_endpoints.is_local(spec.name):
            return spec
        import dataclasses

        from pytest_medhelm.models.request import ModelError

        if self.is_worker:
            entry = local_endpoints.read_published(self._local_publish_path(), spec.name)
            if entry is None:
                raise ModelError(spec.name, "the controlling process started no llama.cpp server for this model "
                                            "(every answer of the run was cached); run without -n to ask it anew")
        else:
            entry = self._local_endpoints().start(spec.name)
        if "error" in entry:
            raise ModelError(spec.name, entry["error"])
        return dataclasses.replace(spec, api_base=entry["url"])

    # ---------------------------------------------------------------- xdist plumbing
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """--medhelm-local-only: refuse, before any request, to send gated or private data off the network."""
        if self.is_worker or self._run_config is None or not self.run_config.local_only:
            return
        from pytest_medhelm.data.errors import DataMissing
        from pytest_medhelm.data.sources import resolve_files
        from pytest_medhelm.governance import local_only_message, local_only_violations
        from pytest_medhelm.jury import DEFAULT_JUDGES

        rc = self.run_config
        benchmarks = []
        for bench in self.registry:
            if bench.access not in ("gated", "private") or (rc.benchmarks and bench.slug not in rc.benchmarks):
                continue
            try:
                resolve_files(bench, rc.data_dir, download=False)
            except DataMissing:
                continue  # skipped for want of data: nothing of it can be sent
            benchmarks.append((bench.slug, bench.access, bench.kind))
        judges = [(name, rc.jury_api_base) for name in (rc.judges or DEFAULT_JUDGES)]
        violations = local_only_violations([self.model_spec(m) for m in rc.models], judges, benchmarks)
        if violations:
            raise pytest.UsageError(local_only_message(violations))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["medhelm_run_id"] = self.run_id
        if self._run_cache_dir is not None or self.run_config.cache == "off":
            node.workerinput["medhelm_cache_dir"] = str(self.cache_dir())

    # ---------------------------------------------------------------- collection
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "medhelm_case" not in metafunc.fixturenames:
            return
        marker = metafunc.definition.get_closest_marker(MARKER)
        slug = (marker.kwargs.get("benchmark") or (marker.args[0] if marker.args else None)) if marker else None
        if slug is None:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: a test using medhelm fixtures needs "
                                    "@pytest.mark.medhelm(benchmark='<slug>')")
        from pytest_medhelm.fixtures import Case

        bench = self.registry.get(slug)
        rc = self.run_config
        marks = [pytest.mark.medhelm, getattr(pytest.mark, bench.category), getattr(pytest.mark, bench.access)]
        if rc.benchmarks and slug not in rc.benchmarks:
            metafunc.parametrize("medhelm_case", [pytest.param(Case(slug, deselected=True), marks=marks)],
                                 ids=["deselected"])
            return
        if not rc.models:
            reason = "no model under test: pass --medhelm-model MODEL (e.g. --medhelm-model local/smollm2)"
            metafunc.parametrize("medhelm_case", [pytest.param(Case(slug), marks=marks + [pytest.mark.skip(reason=reason)])],
                                 ids=["no-model"])
            return
        instances = self.instances(slug)
        if isinstance(instances, BaseException):
            from pytest_medhelm.data.errors import DataMissing

            if isinstance(instances, DataMissing):
                param = pytest.param(Case(slug), marks=marks + [pytest.mark.skip(reason=str(instances))])
                metafunc.parametrize("medhelm_case", [param], ids=["data-missing"])
            else:  # malformed data: one erroring item per model that names the file and row
                labels = self._model_labels(rc.models)
                metafunc.parametrize("medhelm_case", [pytest.param(Case(slug, model=m, problem=instances), marks=marks)
                                                      for m in rc.models],
                                     ids=[f"{labels[m]}-data-error" for m in rc.models])
            return
        labels = self._model_labels(rc.models)
        params, ids = [], []
        for model in rc.models:
            problem = self._model_problem(model)
            if problem is not None:
                params.append(pytest.param(Case(slug, model=model), marks=marks + [pytest.mark.skip(reason=problem)]))
                ids.append(f"{labels[model]}-unavailable")
                continue
            for inst in instances:
                params.append(pytest.param(Case(slug, inst, model), marks=marks))
                ids.append(f"{labels[model]}-{inst.id}")
        metafunc.parametrize("medhelm_case", params, ids=ids)

    def _model_problem(self, model: str) -> str | None:
        from pytest_medhelm.models import local_endpoints

        if not local_endpoints.is_local(model):
            return None
        if model not in self._specs_problems:
            self._specs_problems[model] = local_endpoints.problem(model)
        return self._specs_problems[model]

    @staticmethod
    def _model_labels(models: tuple[str, ...]) -> dict[str, str]:
        short = {m: m.split("/", 1)[-1] for m in models}
        if len(set(short.values())) < len(models):  # two providers' "gpt-4o": keep the full names
            return {m: m for m in models}
        return short

    def instances(self, slug: str):
        """The benchmark's (sampled) instances, or the exception that explains why there are none."""
        if slug not in self._instances:
            from pytest_medhelm.catalogue.sampling import helm_sample_by_subset
            from pytest_medhelm.data.errors import DataError, DataMissing
            from pytest_medhelm.data.sources import resolve_files

            bench = self.registry.get(slug)
            rc = self.run_config
            files: Any = {}
            try:
                files = resolve_files(bench, rc.data_dir)
                loaded = bench.instance_builder(rc.compat)(files)
                # a loader's filters never drop silently: what they removed is reported with the results
                self.removed[slug] = dict(getattr(loaded, "removed", {}) or {})
                cap = rc.max_instances if bench.max_instances is None else min(
                    bench.max_instances, rc.max_instances or bench.max_instances)
                import dataclasses

                self._instances[slug] = [dataclasses.replace(i, benchmark=slug) if i.benchmark != slug else i
                                         for i in helm_sample_by_subset(loaded, cap)]
            except (DataMissing, DataError) as exc:
                self._instances[slug] = exc
            except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                # a loader bug or a file we did not foresee: still a clear, per-benchmark error
                where = ", ".join(str(p) for p in files.values()) or slug
                self._instances[slug] = DataError(where, "", f"cannot be read ({type(exc).__name__}: {exc})")
        return self._instances[slug]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        keep, drop = [], []
        for item in items:
            case = _case_of(item)
            (drop if case is not None and case.deselected else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    # ---------------------------------------------------------------- answers ahead of time
    def _triples(self, items: list[pytest.Item]) -> list[tuple[str, str, str]]:
        """(benchmark, instance id, model) of every collected medhelm item that will ask a model."""
        triples = []
        for item in items:
            case = _case_of(item)
            if case is None or case.instance is None or case.model is None or item.get_closest_marker("skip"):
                continue
            triples.append((case.benchmark, case.instance.id, case.model))
        return triples

    def _instance_index(self, slug: str) -> dict[str, Any]:
        cached = self._index.get(slug)
        if cached is None:
            loaded = self.instances(slug)
            cached = self._index[slug] = {} if isinstance(loaded, BaseException) else {i.id: i for i in loaded}
        return cached

    def _answer_requests(self, triples: list[tuple[str, str, str]]) -> list[tuple[str, Any, "ChatRequest"]]:
        from pytest_medhelm.models.request import ChatRequest

        out = []
        for slug, instance_id, model in triples:
            inst = self._instance_index(slug).get(instance_id)
            if inst is None:
                continue
            bench = self.registry.get(slug)
            request = ChatRequest.for_prompt(self.model_spec(model), bench.render_prompt(inst), bench.max_tokens,
                                             bench.stop)
            self._planned[(slug, instance_id, model)] = (inst, request)
            out.append((model, inst, request))
        return out

    def planned_request(self, instance: Any, model: str) -> "ChatRequest | None":
        """The request the answers-ahead phase built for ``instance`` (that very object) and ``model``, if any."""
        planned = self._planned.get((instance.benchmark, instance.id, model))
        return planned[1] if planned is not None and planned[0] is instance else None

    def _needs_judges(self, slug: str) -> bool:
        return getattr(self.registry.get(slug).metric, "needs_judges", False)

    def _ahead(self, triples: list[tuple[str, str, str]]) -> None:
        """The controller's blocking phase (xdist): every answer, then the jury's judgements, into the shared cache
        before any worker runs an item."""
        if not triples:
            return
        requests = self._answer_requests(triples)
        self._check_budget_for(requests)
        unique = {r.cache_key(): (self.model_spec(m), r) for m, _i, r in requests}
        missing = self.cache.missing(unique)
        self._send_ahead([unique[k] for k in missing], "answers")

        judged = [(i, r) for _m, i, r in requests if self._needs_judges(i.benchmark)]
        if not judged:
            return
        judges = self.judge_specs()
        instrument = self.jury_instrument()
        plan: dict[str, tuple[Any, ChatRequest]] = {}
        for inst, request in judged:
            answer = self.cache.get(request.cache_key())
            if answer is None:
                continue  # failed: the item reports the error
            for judge_name, judge_request in instrument.judge_requests(inst.benchmark, inst, answer.text, judges):
                plan.setdefault(judge_request.cache_key(), (self.judge_spec(judge_name), judge_request))
        missing = self.cache.missing(plan)
        self._send_ahead([plan[k] for k in missing], "jury")

    def _check_budget_for(self, requests: list[tuple[str, Any, "ChatRequest"]]) -> None:
        if self.budget is None or not requests:
            return
        specs = list({m: self.model_spec(m) for m, _i, _r in requests}.values())
        if any(self._needs_judges(i.benchmark) for _m, i, _r in requests):
            specs += self.judge_specs()
        self._check_budget(specs, requests[0][2])

    def _start_background(self, triples: list[tuple[str, str, str]]) -> None:
        """The central role's answers: what the cache holds is read into memory; the rest is sent in item order on
        a background thread while the items run, each item waiting only for its own answer. An open-ended answer's
        judge requests follow it as soon as it arrives."""
        if not triples:
            return
        from pytest_medhelm.models.request import ModelError
        from pytest_medhelm.models.scheduler import Job

        requests = self._answer_requests(triples)
        self._check_budget_for(requests)
        jury = any(self._needs_judges(i.benchmark) for _m, i, _r in requests)
        targets: dict[str, Any] = {}

        def target(spec: "ModelSpec") -> Any:  # resolved here (a llama.cpp server may start), not on the loop
            return self._reachable(spec, targets)

        judge_specs = self.judge_specs() if jury else []
        instrument = self.jury_instrument() if jury else None
        for spec in judge_specs:
            target(spec)
        judged_by_key: dict[str, list[Any]] = {}  # answer key -> the open-ended instances it answers

        def judge_jobs(inst: Any, answer_text: str, check_cache: bool) -> list[Job]:
            jobs = []
            for judge_name, judge_request in instrument.judge_requests(inst.benchmark, inst, answer_text,
                                                                       judge_specs):
                spec = target(self.judge_spec(judge_name))
                key = judge_request.cache_key()
                if isinstance(spec, ModelError):
                    self.cache.put_error(key, str(spec))
                elif not (check_cache and key in self.cache):
                    jobs.append(Job(spec, judge_request))
            return jobs

        jobs: list[Job] = []
        seen: set[str] = set()
        for model, inst, request in requests:  # item order: the first items' answers come first
            key = request.cache_key()
            if key not in seen:
                seen.add(key)
                completion = self.cache.get(key)
                if completion is not None:
                    self._answers[key] = completion
                else:
                    spec = target(self.model_spec(model))
                    if isinstance(spec, ModelError):
                        self.cache.put_error(key, str(spec))
                    else:
                        jobs.append(Job(spec, request))
            if self._needs_judges(inst.benchmark):
                answer = self._answers.get(key)
                if answer is not None:
                    jobs.extend(judge_jobs(inst, answer.text, check_cache=True))
                else:
                    judged_by_key.setdefault(key, []).append(inst)

        def follow_up(job: Job, result: Any) -> list[Job]:
            # on the sender's loop: the jury's requests for an answer that just arrived
            if isinstance(result, ModelError) or job.key not in judged_by_key:
                return []
            return [j for inst in judged_by_key[job.key] for j in judge_jobs(inst, result.text, check_cache=True)]

        if not jobs:
            return
        from pytest_medhelm.models import background

        rc = self.run_config
        # a budget is kept by this process (the items' own requests spend from it too): then a thread
        if background.choose_sender(len(jobs), in_process_only=self.budget is not None) == "process":
            from pytest_medhelm.models.scheduler import Settings

            mode = "refresh" if rc.cache == "refresh" else "on"
            self._sender = background.ProcessSender(
                self.cache_dir(), mode, self.run_id, Settings(concurrency=rc.concurrency, timeout=rc.timeout,
                                                              retries=rc.retries),
                self.cache_dir() / "logs" / f"sender-{self.run_id}.log", follow_up)
        else:
            self._sender = background.ThreadSender(self.scheduler, follow_up)
        self._sender.start(jobs)

    def _finish_background(self) -> None:
        """After the item loop (also when interrupted): stop what is still in flight, and keep one line per kind
        of request and what went wrong for the terminal summary (the item progress owns the terminal until then)."""
        sender, self._sender = self._sender, None
        if sender is None:
            return
        sender.stop()
        self._sender_lines = [(line, {}) for line in sender.summary_lines()]
        if sender.summary:
            self._sender_lines.append((f"medhelm: {sender.summary}", {}))
        for model, message in sender.broken.items():
            self._sender_lines.append((f"medhelm: every request to {model} fails: {message}",
                                       {"red": True, "bold": True}))

    def _reachable(self, spec: "ModelSpec", seen: dict[str, Any]) -> Any:
        """``spec`` with a URL to send to, or the ModelError that says it cannot be reached (then its items error,
        and one line says why); once per model in ``seen``."""
        from pytest_medhelm.models.request import ModelError

        if spec.name not in seen:
            try:
                seen[spec.name] = self.endpoint(spec)
            except ModelError as exc:
                seen[spec.name] = exc
                reporter = self.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    reporter.write_line(f"medhelm: {exc}", red=True, bold=True)
        return seen[spec.name]

    def _send_ahead(self, plan: list[tuple["ModelSpec", "ChatRequest"]], label: str) -> None:
        if not plan:
            return
        from pytest_medhelm.models.request import ModelError
        from pytest_medhelm.models.scheduler import Job, Progress

        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        endpoints: dict[str, Any] = {}
        jobs = []
        for spec, request in plan:
            target = self._reachable(spec, endpoints)
            if isinstance(target, ModelError):
                self.cache.put_error(request.cache_key(), str(target))
            else:
                jobs.append(Job(target, request))
        progress = None
        if reporter is not None:
            reporter.ensure_newline()
            progress = Progress(lambda text: (reporter.write(text), reporter.flush()),
                                bool(getattr(reporter, "isatty", False)), label=label)
        failures = self.scheduler.run_sync(jobs, progress)
        summary = self.scheduler.summary() if hasattr(self.scheduler, "summary") else ""
        if summary and reporter is not None:
            reporter.write_line(f"medhelm: {summary}")
        if failures and reporter is not None:
            broken = self.scheduler.broken
            for model, message in broken.items():
                reporter.write_line(f"medhelm: every request to {model} fails: {message}", red=True, bold=True)
            if not broken:
                reporter.write_line(f"medhelm: {len(failures)} request(s) failed after retries; "
                                    "their items are reported as errors", yellow=True)

    def _plan_path(self, worker_id: str) -> Path:
        return self.cache_dir() / "plans" / f"{self.run_id}-{worker_id}.json"

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.is_worker or self.config.option.collectonly:
            return
        # the controller sends for these items before xdist schedules any (pytest_xdist_node_collection_finished)
        triples = self._triples(session.items) if self._has_medhelm_items(session.items) else []
        from pytest_medhelm.models.cache import make_private_dir

        path = self._plan_path(self.config.workerinput["workerid"])
        make_private_dir(path.parent)
        tmp = path.with_suffix(".tmp")
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
            fh.write(json.dumps(triples))
        os.replace(tmp, path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self._ahead_done:
            return
        self._ahead_done = True
        path = self._plan_path(node.gateway.id)
        try:
            triples = [tuple(t) for t in json.loads(path.read_text(encoding="utf-8"))]
        except (OSError, ValueError):
            return  # the worker collected nothing of ours
        self._ahead(triples)  # type: ignore[arg-type]

    # ---------------------------------------------------------------- judges
    def judge_specs(self) -> list["ModelSpec"]:
        from pytest_medhelm.jury import DEFAULT_JUDGES

        return [self.judge_spec(name) for name in (self.run_config.judges or DEFAULT_JUDGES)]

    def judge_spec(self, name: str) -> "ModelSpec":
        spec = self._judge_specs.get(name)
        if spec is None:
            spec = self._judge_specs[name] = self.config.hook.pytest_medhelm_model_spec(
                name=name, api_base=self.run_config.jury_api_base, config=self.config)
        return spec

    def jury_instrument(self) -> Any:
        """The run's judge prompts (HELM's, else our rubric with a warning line in the summary), built once."""
        if self._jury is None:
            from pytest_medhelm.jury.instrument import load_jury_instrument

            self._jury = load_jury_instrument(self.run_config.data_dir)
        return self._jury[0]

    def judge_completions(self, instance: Any, answer_text: str) -> Any:
        """Each judge's verdict on ``answer_text`` (a Completion, or the ModelError that stopped it), with the
        prompt hashes and criteria of the run's instrument (a JuryVerdicts)."""
        from pytest_medhelm.jury import ask_jury
        from pytest_medhelm.models.request import ModelError

        return ask_jury(self.jury_instrument(), instance.benchmark, instance, answer_text, self.judge_specs(),
                        lambda judge_name, request: self.complete(self.judge_spec(judge_name), request),
                        errors=(ModelError,))

    @staticmethod
    def _has_medhelm_items(items: list[pytest.Item]) -> bool:
        return any(_case_of(item) is not None for item in items)

    def _freeze(self) -> None:
        """Move everything collected into the garbage collector's permanent generation until the session ends.

        Thousands of items live until the end of the session anyway, and every full collection during the run
        (and pytest's five at the end) would walk all of them again: for 10,000 items that was 2 s of a 20 s
        re-run. Frozen objects are simply not scanned; they are handed back at the session's cleanup. Only for
        large runs: ``gc.get_referrers`` does not see frozen referrers, which a library checking for leaks (as
        Hypothesis's ``register_random`` does) could notice in a small run for no gain."""
        import gc

        if not self._frozen:
            gc.freeze()
            self._frozen = True

    def _unfreeze(self) -> None:
        if self._frozen:
            import gc

            gc.unfreeze()
            self._frozen = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        if (not self.is_controller and not self.config.option.collectonly and len(session.items) >= FREEZE_MIN_ITEMS
                and self._run_config is not None and self.run_config.models
                and self._has_medhelm_items(session.items)):
            self._freeze()
        if not self.is_worker and not self.is_controller and not self.config.option.collectonly:
            if self._run_config is not None and self.run_config.dry_run:
                self._dry_run(session)  # exits
            if self._has_medhelm_items(session.items):
                self._start_background(self._triples(session.items))
        try:
            result = yield
        finally:
            self._finish_background()
        if not self.is_worker:
            self._finish_results()
            if self.gate_failed:  # (errored items already count as failed tests)
                # as pytest-cov's --cov-fail-under: the loop is over, so this still decides the exit status
                if session.testsfailed == 0:
                    session.testsfailed = 1
        return result

    def _dry_run(self, session: pytest.Session) -> None:
        """--medhelm-dry-run: count the prompt tokens offline, add the maximum output tokens and the jury's calls,
        print the estimate, and exit without sending anything."""
        from pytest_medhelm.dryrun import JUDGE_MAX_TOKENS, estimate, render
        from pytest_medhelm.jury import DEFAULT_JUDGES, JURY_BENCHMARKS

        rc = self.run_config
        requests = self._answer_requests(self._triples(session.items))
        judges = list(rc.judges or DEFAULT_JUDGES)
        items = [(i.benchmark, m, r.prompt_text, r.max_tokens) for m, i, r in requests]
        open_benchmarks = {i.benchmark for _m, i, _r in requests
                           if getattr(self.registry.get(i.benchmark).metric, "needs_judges", False)
                           or i.benchmark in JURY_BENCHMARKS}
        litellm_models = {m: self.model_spec(m).litellm_model for m in rc.models}
        litellm_models.update({j: self.judge_spec(j).litellm_model for j in judges})
        rows = estimate(items, judges, open_benchmarks=open_benchmarks, prices=self.prices,
                        litellm_models=litellm_models, judge_max_tokens=JUDGE_MAX_TOKENS)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        text = render(rows, judges)
        for line in text.splitlines():
            reporter.write_line(line)
        pytest.exit("medhelm dry run: nothing was sent", returncode=0)

    # ---------------------------------------------------------------- items
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        token = CURRENT_ITEM.set(item)
        try:
            return (yield)
        finally:
            CURRENT_ITEM.reset(token)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        token = CURRENT_ITEM.set(item)
        try:
            return (yield)
        finally:
            CURRENT_ITEM.reset(token)

    def complete(self, spec: "ModelSpec", request: "ChatRequest") -> "Completion":
        from pytest_medhelm.models.request import ModelError
        from pytest_medhelm.models.scheduler import Job

        key = request.cache_key()
        completion = self._answers.get(key)
        if completion is None and self._sender is not None and self._sender.expects(key):
            result = self._sender.wait(key)
            if isinstance(result, ModelError):
                self._stop_if_every_model_is_broken(spec, result)
                self._raise_stored_error(spec, str(result))
            completion = result
        if completion is None:
            completion = self.cache.get(key)
        if completion is None:
            error = self.cache.get_error(key)
            if error is not None:  # the answers-ahead phase already tried (with retries) and failed
                self._raise_stored_error(spec, error)
            try:
                completion = self.scheduler.complete(Job(self.endpoint(spec), request))
            except ModelError as exc:
                _skip_if_refused_by_budget(str(exc))
                raise
        # priced here, for the model under test and the judges alike: a prices file wins over litellm's table
        completion.cost_usd = self.prices.completion_cost(spec.name, spec.litellm_model, completion.tokens_in,
                                                          completion.tokens_out, completion.cost_usd)
        return completion

    def _stop_if_every_model_is_broken(self, spec: "ModelSpec", error: Any) -> None:
        """A wrong key or an unknown model (401/403/404) fails every request the same way: once every model under
        test is in that state, the run stops after this item instead of printing the same error on each."""
        from pytest_medhelm.models.scheduler import SYSTEMATIC_STATUSES

        if error.status not in SYSTEMATIC_STATUSES or spec.name not in self.run_config.models:
            return
        self._broken_models.add(spec.name)
        item = CURRENT_ITEM.get()
        if item is not None and self._broken_models >= set(self.run_config.models):
            item.session.shouldfail = ("medhelm: every model under test fails every request (the message is above); "
                                       "the remaining items were not run")

    @staticmethod
    def _raise_stored_error(spec: "ModelSpec", text: str) -> None:
        """A request that ended without an answer: a budget refusal skips the item; anything else is the item's
        error, with the provider's message."""
        from pytest_medhelm.models.request import ModelError

        _skip_if_refused_by_budget(text)
        raise ModelError(spec.name, text.split(": ", 1)[-1] if text.startswith(spec.name) else text)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A miss or a model/data error needs one line, not a traceback: build the report without pytest's
        traceback formatting (which costs tens of milliseconds per item)."""
        excinfo = call.excinfo
        if excinfo is None or _case_of(item) is None:
            return None
        from pytest_medhelm.data.errors import DataError
        from pytest_medhelm.models.request import ModelError

        if not excinfo.errisinstance((Missed, ModelError, DataError)):
            return None
        if excinfo.errisinstance(Missed):
            longrepr = f"MISSED: {excinfo.value.detail}"
        else:
            longrepr = f"{type(excinfo.value).__name__}: {excinfo.value}"
        sections = [(f"Captured {key} {call.when}", content) for rwhen, key, content in item._report_sections
                    if rwhen == call.when and content]
        return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed", longrepr,
                                 call.when, sections, call.duration, call.start, call.stop,
                                 user_properties=item.user_properties)

    # (pytest only reads hook implementations whose names start with "pytest_"; specname maps it to the hook)
    @pytest.hookimpl(wrapper=True, specname="pytest_runtest_makereport")
    def pytest_runtest_makereport_record(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        case = _case_of(item)
        if case is None or case.deselected:
            return report
        record = item.stash.get(RECORD, None)
        excinfo = call.excinfo
        if report.when == "call" or (report.failed and report.when == "setup"):
            from pytest_medhelm.data.errors import DataError
            from pytest_medhelm.models.request import ModelError

            rec = dict(record or {})
            rec.update(benchmark=case.benchmark, model=case.model,
                       instance_id=case.instance.id if case.instance else None,
                       subset=case.instance.subset if case.instance else "")
            if excinfo is not None and excinfo.errisinstance(Missed):
                rec["missed"] = True
                if self.run_config.strict:
                    report.longrepr = f"MISSED: {excinfo.value.detail}"
                else:
                    report.outcome = "passed"
                    report.longrepr = None
            elif excinfo is not None and excinfo.errisinstance((ModelError, DataError)):
                rec.update(error=str(excinfo.value), score=None)
                report.longrepr = f"{type(excinfo.value).__name__}: {excinfo.value}"
            elif excinfo is not None and not excinfo.errisinstance(pytest.skip.Exception):
                rec.setdefault("error", f"{excinfo.typename}: {excinfo.value}")
                rec["score"] = None
            for key in ("jury_tokens_in", "jury_tokens_out", "jury_cost_usd"):
                if key in (rec.get("metrics") or {}):
                    rec[key] = rec["metrics"][key]
            if "judge_prompt_sha256" in (rec.get("metrics") or {}):  # beside prompt_sha256, not among the metrics
                rec["judge_prompt_sha256"] = rec["metrics"].pop("judge_prompt_sha256")
            if report.when == "call" or "error" in rec:
                report.medhelm = rec
                if rec.get("score") is not None:
                    report.user_properties.append(("medhelm_score", rec["score"]))
        return report

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        rec = getattr(report, "medhelm", None)
        if rec is None or report.when != "call":
            return None
        if rec.get("missed"):
            if report.passed:
                return "missed", "m", ("MISSED", {"yellow": True})
            return "failed", "M", ("MISSED", {"red": True})
        if rec.get("error") and report.failed:
            return "error", "E", ("ERROR", {"red": True})
        return None

    @pytest.hookimpl(trylast=True)  # after the cache plugin's own bookkeeping, which drops passed items
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = getattr(report, "medhelm", None)
        if rec is None or self.is_worker:
            return
        self.records.append(rec)
        if rec.get("missed"):
            self.misses.append((report.nodeid, rec.get("detail") or ""))
            if report.passed:
                # a miss is selectable with --lf like a failure, without failing the run
                lf = self.config.pluginmanager.get_plugin("lfplugin")
                if lf is not None:
                    lf.lastfailed[report.nodeid] = True

    # ---------------------------------------------------------------- results, gates, reports
    def _finish_results(self) -> None:
        if self.results is not None or not self.records:
            if not self.records and self._run_config is not None and self.run_config.thresholds:
                self._build([])  # gates with nothing scored fail rather than pass silently
            return
        self._build(self.records)

    def _build(self, records: list[dict[str, Any]]) -> None:
        from pytest_medhelm.report.results import build_results, evaluate_gates, git_commit

        rc = self.run_config
        catalogue = {b.slug: b for b in self.registry}
        judges = self._judges_of_run()
        results = build_results(records, catalogue, models=rc.models, judges=judges, options=rc.public_options(),
                                started=self.started, finished=_now(), compat=rc.compat,
                                commit=git_commit(Path(str(self.config.rootpath))),
                                jury_prompts=self.jury_instrument().name if judges else None)
        if rc.prices is not None:
            from pytest_medhelm.cost import apply_file_prices

            apply_file_prices(results, self.prices, {m: self.model_spec(m).litellm_model for m in rc.models})
        results["run"]["filtered"] = {slug: reasons for slug, reasons in sorted(self.removed.items()) if reasons}
        if self._budget is not None:
            results["run"]["budget"] = self._budget.as_json()
        if rc.shard is None:
            evaluate_gates(results, rc.thresholds)
        # a shard holds part of each benchmark: thresholds are checked on the merged run (pytest-medhelm merge)
        # plugins (comparisons with a baseline, cost, reports) may add sections and gates of their own
        self.config.hook.pytest_medhelm_results(results=results, config=self.config)
        self.gate_failed = any(not g["passed"] for g in results["gates"])
        self.results = results

    def _judges_of_run(self) -> list[str]:
        """The judges, when the run has open-ended benchmarks scored by the jury (else none)."""
        slugs = {r["benchmark"] for r in self.records}
        if not any(getattr(self.registry.get(slug).metric, "needs_judges", False) for slug in slugs
                   if slug in self.registry):
            return []
        from pytest_medhelm.jury import DEFAULT_JUDGES

        return list(self.run_config.judges or DEFAULT_JUDGES)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        tr = terminalreporter
        # what the background sender did: in the run's own section (it had to wait for the item progress)
        lines = list(self._sender_lines)
        if self._jury is not None and self._jury[1] and not self.is_worker:
            lines.append((self._jury[1], {"yellow": True}))  # the open-ended scores are not MedHELM's
        if self._budget is not None and not self.is_worker:
            lines.append((self._budget.summary(), {"yellow": True} if self._budget.not_sent else {}))
        if self.is_worker or (self.results is None and not lines):
            return
        if self.results is not None and self.misses:
            tr.section("medhelm misses", sep="-", yellow=True)
            limit = None if config.option.verbose > 0 else 20
            for nodeid, detail in self.misses[:limit]:
                tr.write_line(f"MISSED {nodeid} - {detail}")
            if limit is not None and len(self.misses) > limit:
                tr.write_line(f"... and {len(self.misses) - limit} more (-v shows all; --lf runs them again)")
        tr.section("medhelm", sep="=", bold=True)
        for line, markup in lines:
            tr.write_line(line, **markup)
        if self.results is None:
            return
        if lines:
            tr.write_line("")
        from pytest_medhelm.report.tables import terminal_sections

        sections = terminal_sections(self.results)
        for extra in config.hook.pytest_medhelm_summary_rows(results=self.results, config=config):
            sections.extend(extra or [])
        for title, text in sections:
            tr.write_line(f"{title}:", bold=True)
            for line in text.splitlines():
                tr.write_line(line)
            tr.write_line("")
        if self.results["gates"]:
            failed = [g for g in self.results["gates"] if not g["passed"]]
            if failed:
                for g in failed:
                    value = "no score" if g["value"] is None else f"{g['value']:.3f}"
                    tr.write_line(f"medhelm gate FAILED: {g['spec']} for {g['model']}: {value}", red=True, bold=True)
            else:
                tr.write_line(f"medhelm gates: all {len(self.results['gates'])} passed", green=True, bold=True)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.is_worker and self._run_config is not None:
            if self.results is None and self.records:
                self._build(self.records)  # interrupted before the loop ended: still write what was measured
            rc = self.run_config
            if self.results is not None:
                from pytest_medhelm.report.results import write_json
                from pytest_medhelm.report.tables import markdown

                if rc.json_path:
                    write_json(self.results, rc.json_path)
                if rc.html_path:
                    from pytest_medhelm.report.html import write_html

                    write_html(self.results, rc.html_path)
                if rc.markdown_path:
                    Path(rc.markdown_path).parent.mkdir(parents=True, exist_ok=True)
                    Path(rc.markdown_path).write_text(markdown(self.results), encoding="utf-8")
        if self._cache is not None:
            if not self.is_worker:
                self._cache.clear_errors()
            self._cache.close()
        if not self.is_worker and self._run_cache_dir is not None:
            if self._run_config is not None and self.run_config.cache == "off":
                import shutil

                shutil.rmtree(self._run_cache_dir, ignore_errors=True)
            else:
                for plan in (Path(self._run_cache_dir) / "plans").glob(f"{self.run_id}-*.json"):
                    plan.unlink(missing_ok=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._finish_background()  # (normally done when the loop ended)
        if self._local is not None:
            self._local.stop_all()  # also after a failure or Ctrl-C: pytest unconfigures on every exit path
        if self in _ACTIVE:
            _ACTIVE.remove(self)


def _skip_if_refused_by_budget(error_text: str) -> None:
    from pytest_medhelm.budget import skip_reason

    reason = skip_reason(error_text)
    if reason is not None:
        pytest.skip(reason)


def _case_of(item: pytest.Item):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get("medhelm_case")
