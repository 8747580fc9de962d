"""Collection: each medhelm test parametrized per instance x model; deselection and shards.

A benchmark's instances are loaded once per process (its data files, its loader, HELM's sample); a benchmark
without its data becomes one skipped item that says which file is expected, a malformed file one erroring item
per model that names the file and row. ``--medhelm-benchmark`` leaves one placeholder item per other benchmark,
deselected (reported by pytest as deselected). ``--medhelm-shard I/N`` keeps the items whose test id hashes to
slice I: ``int(sha256(id without the file path), 16) % N + 1``, the same verdict on every machine and in every
xdist worker, whatever the collection order, the rootdir or ``-k``/``-m``; the N slices are disjoint and cover
every item. Tests that are not medhelm items run in every shard.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.item_api import Case, case_of

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.context import RunContext
    from pytest_medhelm.values import Instance

MARKER = "medhelm"


def shard_key(item: pytest.Item) -> str:
    nodeid = item.nodeid
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def shard_of(key: str, count: int) -> int:
    """The 1-based shard of ``key`` among ``count``: ``int(sha256(key), 16) % count + 1``."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % count + 1


def model_labels(models: tuple[str, ...]) -> dict[str, str]:
    """Short model names for test ids (the part after the provider), unless two would be the same."""
    short = {m: m.split("/", 1)[-1] for m in models}
    if len(set(short.values())) < len(models):  # two providers' "gpt-4o": keep the full names
        return {m: m for m in models}
    return short


class Collection:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._instances: dict[str, Any] = {}
        self._model_problems: dict[str, str | None] = {}
        #: benchmark -> reason -> source records a loader's filter dropped (reported with the results)
        self.removed: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------------------------------ hooks
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "medhelm_case" not in metafunc.fixturenames:
            return
        marker = metafunc.definition.get_closest_marker(MARKER)
        slug = (marker.kwargs.get("benchmark") or (marker.args[0] if marker.args else None)) if marker else None
        if slug is None:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: a test using medhelm fixtures needs "
                                    "@pytest.mark.medhelm(benchmark='<slug>')")
        rc = self.ctx.run_config
        # a benchmark not selected is deselected without its definition even imported; one measuring the rubric
        # grader (healthbench_meta) runs only when named, its items the grader's
        bench = None if rc.benchmarks and slug not in rc.benchmarks else self.ctx.registry.get(slug)
        grader_measured = bench is not None and getattr(bench.metric, "measures_grader", False)
        if bench is None or (grader_measured and slug not in rc.benchmarks):
            category = getattr(pytest.mark, self.ctx.registry.category_of(slug))
            deselected = pytest.param(Case(slug, deselected=True), marks=[pytest.mark.medhelm, category])
            return metafunc.parametrize("medhelm_case", [deselected], ids=["deselected"])
        marks = [pytest.mark.medhelm, getattr(pytest.mark, bench.category), getattr(pytest.mark, bench.access)]

        def one(case: Case, item_id: str, *extra: Any) -> None:
            metafunc.parametrize("medhelm_case", [pytest.param(case, marks=marks + list(extra))], ids=[item_id])

        models = (self.ctx.grader_name(slug),) if grader_measured else rc.models
        if not models:
            reason = "no model under test: pass --medhelm-model MODEL (e.g. --medhelm-model local/smollm2)"
            return one(Case(slug), "no-model", pytest.mark.skip(reason=reason))
        instances = self.instances(slug)
        labels = model_labels(models)
        if isinstance(instances, BaseException):
            from pytest_medhelm.data.errors import DataMissing

            if isinstance(instances, DataMissing):
                return one(Case(slug), "data-missing", pytest.mark.skip(reason=str(instances)))
            # malformed data: one erroring item per model that names the file and row
            metafunc.parametrize("medhelm_case", [pytest.param(Case(slug, model=m, problem=instances), marks=marks)
                                                  for m in models],
                                 ids=[f"{labels[m]}-data-error" for m in models])
            return
        params, ids = [], []
        for model in models:
            problem = self._model_problem(model)
            if problem is not None:
                params.append(pytest.param(Case(slug, model=model), marks=marks + [pytest.mark.skip(reason=problem)]))
                ids.append(f"{labels[model]}-unavailable")
                continue
            for inst in instances:
                params.append(pytest.param(Case(slug, inst, model), marks=marks))
                ids.append(f"{labels[model]}-{inst.id}")
        metafunc.parametrize("medhelm_case", params, ids=ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        shard = self.ctx.run_config.shard if self.ctx.configured else None
        keep, drop = [], []
        for item in items:
            case = case_of(item)
            if case is not None and (case.deselected or (shard and shard_of(shard_key(item), shard[1]) != shard[0])):
                drop.append(item)
            else:
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.ctx.configured:
            return []
        lines = []
        shard = self.ctx.run_config.shard
        if shard:
            lines.append(f"medhelm shard: {shard[0]}/{shard[1]} (sha256 of each item's test id, modulo {shard[1]})")
        from pytest_medhelm.report.generation_cap import header_line

        cap = header_line(self.ctx.run_config.max_tokens)
        if cap:
            lines.append(cap)
        from pytest_medhelm.report.reasoning import reasoning_note, reasoning_record

        rc = self.ctx.run_config
        reasoning = reasoning_note(reasoning_record(rc.reasoning_budget, rc.reasoning_effort,
                                                    [self.ctx.model_spec(name) for name in rc.models]))
        if reasoning:  # (said before anything is sent; the judges' are in the summary, once the run knows them)
            lines.append(f"medhelm: {reasoning}")
        return lines

    def selection(self, items: list[pytest.Item]) -> tuple[set[str], dict[str, int]]:
        """The benchmarks with collected items (after -k, -m, --lf, shards), and each one's planned instances per
        model (its whole sample, whatever was selected of it)."""
        selected = {case.benchmark for case in (case_of(item) for item in items)
                    if case is not None and not case.deselected}
        planned = {slug: len(found) for slug in selected
                   if not isinstance(found := self._instances.get(slug, ()), BaseException)}
        return selected, planned

    # ------------------------------------------------------------------------------------------ instances
    def _model_problem(self, model: str) -> str | None:
        from pytest_medhelm.endpoints.llama.gguf import unavailable_reason
        from pytest_medhelm.values import is_llama_cpp_model

        if not is_llama_cpp_model(model):
            return None
        if self.ctx.model_spec(model).api_base is not None:  # a plugin's model_spec hook serves it from a URL
            return None
        if model not in self._model_problems:
            self._model_problems[model] = unavailable_reason(model)
        return self._model_problems[model]

    def instances(self, slug: str):
        """The benchmark's (sampled) instances, or the exception that explains why there are none."""
        if slug not in self._instances:
            self._instances[slug] = self._load(slug)
        return self._instances[slug]

    def _load(self, slug: str):
        import dataclasses

        from pytest_medhelm.catalogue.sampling import helm_sample_by_subset
        from pytest_medhelm.data.errors import DataError, DataMissing
        from pytest_medhelm.data.sources import resolve_files

        rc = self.ctx.run_config
        bench = self.ctx.registry.get(slug).for_run(rc)  # (HealthBench: the subset's file)
        files: Any = {}
        try:
            files = resolve_files(bench, rc.data_dir,
                                  verification=self.ctx.data_verification)
            loaded = bench.instance_builder(rc.compat, rc.arguments_of(slug))(files)
            # a loader's filters never drop silently: what they removed is reported with the results
            self.removed[slug] = dict(getattr(loaded, "removed", {}) or {})
            cap = rc.max_instances if bench.max_instances is None else min(
                bench.max_instances, rc.max_instances or bench.max_instances)
            return [dataclasses.replace(i, benchmark=slug) if i.benchmark != slug else i
                    for i in helm_sample_by_subset(loaded, cap)]
        except (DataMissing, DataError) as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - e.g. RecursionError from a hostile file: this benchmark's only
            # a loader bug or a file we did not foresee: still a clear, per-benchmark error, and the other
            # benchmarks are collected
            where = ", ".join(str(p) for p in files.values()) or slug
            return DataError(where, "", f"cannot be read ({type(exc).__name__}: {exc})")


def asked_pairs(items: list[pytest.Item]) -> list[tuple[Instance, str]]:
    """(instance, model) of each collected item that asks a model, in collection order."""
    out = []
    for item in items:
        case = case_of(item)
        if case is None or case.instance is None or case.model is None or item.get_closest_marker("skip"):
            continue
        out.append((case.instance, case.model))
    return out


def has_medhelm_items(items: list[pytest.Item]) -> bool:
    return any(case_of(item) is not None for item in items)
