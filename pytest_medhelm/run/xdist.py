"""The hooks only a distributed (xdist) run needs; registered only then, one class per side.

* :class:`WorkerHooks`: when a worker has collected, it plans its medhelm items and writes the plan (each answer's
  request, and for a judged benchmark what the jury reads of the instance) to a private file named by run id;
  its items then wait on the shared cache for the answers the controller sends.
* :class:`ControllerHooks`: passes the run id (and a private cache directory) to the workers; when the first
  worker's collection arrives it reads that plan and starts the same background sender as a single-process run.
  It does not wait: xdist schedules items at once, each waiting only for its own answer. When the sender has
  finished (or stopped), a marker file tells the workers that whatever is not in the cache by now will not come
  (a worker then asks itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.collection import Collection
    from pytest_medhelm.run.context import RunContext
    from pytest_medhelm.run.delivery import Delivery
    from pytest_medhelm.run.plan import AnswerPlan, PlannedAnswer
    from pytest_medhelm.run.reporting import Reporting


def plans_dir(cache_dir: Path) -> Path:
    return cache_dir / "plans"


def sent_marker(cache_dir: Path, run_id: str) -> Path:
    return plans_dir(cache_dir) / f"{run_id}.sent"


def remove_plan_files(cache_dir: Path, run_id: str) -> None:
    for path in plans_dir(cache_dir).glob(f"{run_id}*"):
        path.unlink(missing_ok=True)


def _write_private(path: Path, text: str) -> None:
    from pytest_medhelm.models.cache import write_private_text

    write_private_text(path, text)


class PlanRefused(ValueError):
    """A plan file that this run's worker did not write (unsigned, or changed since): never believed."""


def read_plan(path: Path, key: bytes) -> str:
    """The text of a worker's plan file, read without following a link, its signature checked (the run's
    coordination key, which only this run's processes know). Raises FileNotFoundError, CacheRefused, PlanRefused."""
    from pytest_medhelm.models.cache import read_private_text, verified

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
                                 "id": p.instance.id}
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
    from pytest_medhelm.values import ChatRequest, Instance
    from pytest_medhelm.run.plan import PlannedAnswer

    data = json.loads(text)
    out = []
    for entry in data["answers"]:
        instance = Instance(id=entry["id"], input=entry.get("input", ""),
                            references=tuple(entry.get("references", ())), benchmark=entry["benchmark"],
                            extra={"grading": entry["grading"]} if "grading" in entry else {})
        out.append(PlannedAnswer(entry["model"], instance, ChatRequest.from_json(entry["request"])))
    return out, set(data["selected"]), dict(data["planned"]), dict(data.get("data_unverified") or {})


class WorkerHooks:
    def __init__(self, ctx: RunContext, plan: AnswerPlan, delivery: Delivery, collection: Collection) -> None:
        self.ctx, self.plan, self.delivery, self.collection = ctx, plan, delivery, collection

    @pytest.hookimpl(tryfirst=True)  # before xdist tells the controller that this worker has collected
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.ctx.config.option.collectonly:
            return
        from pytest_medhelm.run.collection import has_medhelm_items, medhelm_items

        planned: list[PlannedAnswer] = []
        if has_medhelm_items(session.items) and self.ctx.run_config.models:
            planned = self.plan.answers([(case.instance, case.model) for _item, case in medhelm_items(session.items)])
        judged = {p.instance.benchmark for p in planned if self.plan.is_judged(p.instance.benchmark)}
        selected, counts = self.collection.selection(session.items)
        cache_dir = self.ctx.cache_dir()
        from pytest_medhelm.models.cache import signed

        _write_private(plans_dir(cache_dir) / f"{self.ctx.run_id}-{self.ctx.config.workerinput['workerid']}.json",
                       signed(self.ctx.coordination_key,
                              plan_to_json(planned, judged, selected, counts, self.ctx.data_verification.record(),
                                           {slug: self.collection.removed[slug] for slug in selected
                                            if self.collection.removed.get(slug)})))
        marker = sent_marker(cache_dir, self.ctx.run_id)
        self.delivery.expect_from_controller(planned, marker.exists)


class ControllerHooks:
    def __init__(self, ctx: RunContext, delivery: Delivery, reporting: Reporting) -> None:
        self.ctx, self.delivery, self.reporting = ctx, delivery, reporting
        self._started = False

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["medhelm_run_id"] = self.ctx.run_id
        node.workerinput["medhelm_coordination_key"] = self.ctx.coordination_key.hex()
        if self.ctx.configured:  # the shared cache as the controller found it at start-up ("" = none, unreachable)
            node.workerinput["medhelm_shared_cache"] = self.ctx.shared_cache_url or ""
        if self.ctx.cache_dir_chosen or (self.ctx.configured and self.ctx.run_config.cache == "off"):
            node.workerinput["medhelm_cache_dir"] = str(self.ctx.cache_dir())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self._started:
            return
        self._started = True
        path = plans_dir(self.ctx.cache_dir()) / f"{self.ctx.run_id}-{node.gateway.id}.json"
        from pytest_medhelm.models.cache import CacheRefused

        try:
            text = read_plan(path, self.ctx.coordination_key)  # signed by this run's worker, or refused
            planned, self.reporting.selected, self.reporting.planned, self.reporting.data_unverified = plan_from_json(
                text)
            self.reporting.removed.update(filtered_of(text))
        except FileNotFoundError:
            planned = []  # the worker collected nothing of ours
        except (OSError, ValueError, KeyError, TypeError, AttributeError, CacheRefused) as exc:
            planned = []
            self.delivery.write_line(f"medhelm: the plan of worker {node.gateway.id} cannot be read ({exc}): the "
                                     "workers ask for their answers themselves", {"yellow": True})
        try:
            self.delivery.start(planned, keep_in_memory=False)
        except BaseException:
            self.sender_finished()  # the workers must not wait for answers that will not come
            raise

    @pytest.hookimpl(tryfirst=True)  # before the run closes its context
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not (self.ctx.configured and self.ctx.run_config.cache == "off"):
            remove_plan_files(self.ctx.cache_dir(), self.ctx.run_id)

    def sender_finished(self) -> None:
        """Called by the sender when nothing more will be sent (or at once, when there is nothing to send)."""
        _write_private(sent_marker(self.ctx.cache_dir(), self.ctx.run_id), "")
