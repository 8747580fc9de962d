"""The two roles of a distributed (xdist) run, chosen only then (:mod:`~.roles`).

* :class:`Worker`: when it has collected, it plans its medhelm items and writes the plan (each answer's request,
  and for a judged benchmark what the jury reads of the instance) to a private file named by run id; its items
  then wait in the run's cache directory for the answers the controller sends. At its end it tells the controller, in
  xdist's ``workeroutput``, whether it stopped because every model under test fails every request.
* :class:`Controller`: hands the run's identity (:class:`~.context.Handover`) to the workers; when the first
  worker's collection arrives it reads that plan and starts the same background sender as a single-process run.
  It does not wait: xdist schedules items at once, each waiting only for its own answer. When the sender has
  finished (or stopped), a marker file tells the workers that whatever is not in the cache by now will not come
  (a worker then asks itself). It aggregates and reports; how the loop ended it reads from pytest's own count of
  failures and from what the workers sent back, never from xdist's message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.run.context import Handover
from pytest_medhelm.run.roles import Role, StoppedEarly

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.plan import PlannedAnswer

#: the key of a worker's ``workeroutput`` saying that it stopped because every model under test fails every request
EVERY_MODEL_BROKEN_OUTPUT = "medhelm_every_model_broken"
#: the key of a worker's ``workeroutput`` holding what it saw of the shared cache (RunContext.shared_cache_state)
SHARED_CACHE_OUTPUT = "medhelm_shared_cache"


def plans_dir(cache_dir: Path) -> Path:
    return cache_dir / "plans"


def sent_marker(cache_dir: Path, run_id: str) -> Path:
    return plans_dir(cache_dir) / f"{run_id}.sent"


def remove_plan_files(cache_dir: Path, run_id: str) -> None:
    for path in plans_dir(cache_dir).glob(f"{run_id}*"):
        path.unlink(missing_ok=True)


def _write_private(path: Path, text: str) -> None:
    from pytest_medhelm.cache.store import write_private_text

    write_private_text(path, text)


class PlanRefused(ValueError):
    """A plan file that this run's worker did not write (unsigned, or changed since): never believed."""


def read_plan(path: Path, key: bytes) -> str:
    """The text of a worker's plan file, read without following a link, its signature checked (the run's
    coordination key, which only this run's processes know). Raises FileNotFoundError, CacheRefused, PlanRefused."""
    from pytest_medhelm.cache.store import read_private_text, verified

    text = verified(key, read_private_text(path))
    if text is None:
        raise PlanRefused(f"{path} is not signed by a worker of this run (a file planted in the cache directory, "
                          "or changed since it was written): not used")
    return text


def plan_to_json(planned: list[PlannedAnswer], judged: set[str], selected: set[str],
                 counts: dict[str, int], data_unverified: dict[str, Any],
                 filtered: dict[str, dict[str, int]] | None = None) -> str:
    """The worker's plan: each answer to send, the benchmarks selected and their planned instances per model, and
    the data files it accepted although they differ from their pins (the controller reads no data itself)."""
    entries = []
    for p in planned:
        entry: dict[str, Any] = {"model": p.model, "request": p.request.to_json(), "benchmark": p.instance.benchmark,
                                 "id": str(p.instance.id)}  # (a benchmark's id may be a UUID or a float)
        if p.instance.benchmark in judged:  # what the jury's prompt reads of the instance
            entry["input"] = p.instance.input
            entry["references"] = list(p.instance.references)
            if "grading" in p.instance.extra:  # a rubric grader's: the conversation and the rubric
                entry["grading"] = p.instance.extra["grading"]
        entries.append(entry)
    # (and what the loaders' filters removed: the controller builds no instances, yet reports run.filtered)
    return json.dumps({"answers": entries, "selected": sorted(selected), "planned": counts,
                       "data_unverified": data_unverified, "filtered": filtered or {}}, ensure_ascii=False)


def filtered_of(text: str) -> dict[str, dict[str, int]]:
    """What a worker's plan says the loaders' filters removed (benchmark -> reason -> count)."""
    return {str(slug): {str(k): int(v) for k, v in reasons.items()}
            for slug, reasons in (json.loads(text).get("filtered") or {}).items()}


def plan_from_json(text: str) -> tuple[list[PlannedAnswer], set[str], dict[str, int], dict[str, Any]]:
    from pytest_medhelm.run.plan import PlannedAnswer
    from pytest_medhelm.values import ChatRequest, Instance

    data = json.loads(text)
    out = []
    for entry in data["answers"]:
        instance = Instance(id=entry["id"], input=entry.get("input", ""),
                            references=tuple(entry.get("references", ())), benchmark=entry["benchmark"],
                            extra={"grading": entry["grading"]} if "grading" in entry else {})
        out.append(PlannedAnswer(entry["model"], instance, ChatRequest.from_json(entry["request"])))
    return out, set(data["selected"]), dict(data["planned"]), dict(data.get("data_unverified") or {})


class Worker(Role):
    """An xdist worker: it collects and runs items; the controller sends their answers and reports."""

    sends_answers = False
    reports = False

    def handover(self) -> Handover:
        return Handover.read(self.config.workerinput)  # type: ignore[attr-defined]  # xdist's, on a worker only

    def register_reporting(self) -> None:
        pass  # (the controller reports)

    def check_start(self) -> None:
        pass  # (the controller checked, before it sent anything)

    def before_items(self, session: pytest.Session) -> None:
        if self.uses_models(session):
            self.collector.freeze_if_large(len(session.items))

    def after_items(self, session: pytest.Session) -> None:
        pass  # (the controller aggregates the records its workers' reports carry)

    def summarize(self, terminalreporter: Any, config: pytest.Config) -> None:
        pass

    def end_session(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_medhelm.run.delivery import EVERY_MODEL_BROKEN

        # before xdist's own pytest_sessionfinish sends the worker's output to the controller
        self.config.workeroutput[EVERY_MODEL_BROKEN_OUTPUT] = (  # type: ignore[attr-defined]  # xdist's
            session.shouldfail == EVERY_MODEL_BROKEN)
        if self.ctx.configured:
            output = self.config.workeroutput  # type: ignore[attr-defined]  # xdist's
            output[SHARED_CACHE_OUTPUT] = self.ctx.shared_cache_state()

    @pytest.hookimpl(tryfirst=True)  # before xdist tells the controller that this worker has collected
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.config.option.collectonly:
            return
        from pytest_medhelm.run.collection import asked_pairs, has_medhelm_items

        ctx, run = self.ctx, self.run
        planned: list[PlannedAnswer] = []
        if has_medhelm_items(session.items) and ctx.run_config.models:
            planned = run.plan.answers(asked_pairs(session.items))
        judged = {p.instance.benchmark for p in planned if run.plan.is_judged(p.instance.benchmark)}
        selected, counts = run.collection.selection(session.items)
        cache_dir = ctx.cache_dir()
        from pytest_medhelm.cache.store import signed

        removed = run.collection.removed
        worker_id = self.config.workerinput["workerid"]  # type: ignore[attr-defined]  # xdist's, on a worker only
        _write_private(plans_dir(cache_dir) / f"{ctx.run_id}-{worker_id}.json",
                       signed(ctx.coordination_key,
                              plan_to_json(planned, judged, selected, counts, ctx.data_verification.record(),
                                           {slug: removed[slug] for slug in selected if removed.get(slug)})))
        marker = sent_marker(cache_dir, ctx.run_id)
        run.delivery.expect_from_controller(planned, marker.exists)


class Controller(Role):
    """xdist's controlling process: it sends the answers the workers' items wait for, aggregates and reports."""

    runs_items = False

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self._started = False
        self._every_model_broken = False  # a worker said so at its end

    def stop_reason(self, session: pytest.Session) -> StoppedEarly | None:
        if self._every_model_broken:
            return StoppedEarly.EVERY_MODEL_BROKEN
        maxfail = self.config.getoption("maxfail")
        if maxfail and session.testsfailed >= maxfail:  # pytest's own count of the failures the workers reported
            return StoppedEarly.MAXFAIL
        return None  # Ctrl-C (here or in a worker), or a crash

    def while_collecting(self) -> None:
        if self.asks_models():  # (this process is idle until a worker's plan arrives: about a second)
            self.run.delivery.prefetch()

    def sender_finished(self) -> None:
        _write_private(sent_marker(self.ctx.cache_dir(), self.ctx.run_id), "")

    def pytest_configure_node(self, node: Any) -> None:
        ctx = self.ctx
        handed_dir = ctx.cache_dir_chosen or (ctx.configured and ctx.run_config.cache == "off")
        Handover(run_id=ctx.run_id, coordination_key=ctx.coordination_key,
                 cache_dir=str(ctx.cache_dir()) if handed_dir else None,
                 # the shared cache as found at start-up ("": none, or unreachable)
                 shared_cache=(ctx.shared_cache_url or "") if ctx.configured else None).write(node.workerinput)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if output.get(EVERY_MODEL_BROKEN_OUTPUT):
            self._every_model_broken = True
        if self.ctx.configured:
            self.ctx.add_shared_cache_state(str(getattr(getattr(node, "gateway", None), "id", "?")),
                                            output.get(SHARED_CACHE_OUTPUT))

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self._started:
            return
        self._started = True
        ctx, reporting, delivery = self.ctx, self.run.reporting, self.run.delivery
        path = plans_dir(ctx.cache_dir()) / f"{ctx.run_id}-{node.gateway.id}.json"
        from pytest_medhelm.cache.store import CacheRefused

        try:
            text = read_plan(path, ctx.coordination_key)  # signed by this run's worker, or refused
            planned, reporting.selected, reporting.planned, reporting.data_unverified = plan_from_json(text)
            reporting.removed.update(filtered_of(text))
        except FileNotFoundError:
            planned = []  # the worker collected nothing of ours
        except (OSError, ValueError, KeyError, TypeError, AttributeError, CacheRefused) as exc:
            planned = []
            delivery.write_line(f"medhelm: the plan of worker {node.gateway.id} cannot be read ({exc}): the "
                                "workers ask for their answers themselves", {"yellow": True})
        if planned:  # (as a central process, only in a run of ours: never in a session of other tests)
            # what the workers' reports bring of a large run lives here until its end: frozen when the loop ends
            # (freeze_again), pytest's five full collections at the end skip it (they walked it: 0.23 s of a
            # 2,000-item run, by gc.callbacks), and the process's exit is lighter
            self.collector.freeze_if_large(len(ids))
        try:
            delivery.start(planned, keep_in_memory=False)
        except BaseException:
            self.sender_finished()  # the workers must not wait for answers that will not come
            raise

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        try:
            if not (self.ctx.configured and self.ctx.run_config.cache == "off"):
                remove_plan_files(self.ctx.cache_dir(), self.ctx.run_id)
        finally:  # before the run closes its context (a --medhelm-cache off directory goes whole)
            super().pytest_sessionfinish(session, exitstatus)
