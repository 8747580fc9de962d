"""Merging results files (shards of one run, or runs of different models) into one run, every table recomputed.

The instances of all inputs are concatenated; the same (benchmark, subset, instance id, model) may appear more than
once only with the same measurement (score, raw score, error, answer, prompt hash), and is then kept once; different
values are a :class:`MergeError` naming both files. The benchmark, category and model tables are recomputed from the
instances with :func:`pytest_medhelm.report.results.build_results`, exactly as the run itself computes them (records
are sorted before any resampling, and the bootstrap is seeded), so shards merged give the unsharded numbers. The
thresholds the inputs ran with (``run.options.thresholds``) and any given here are evaluated on the merged run; a
comparison a shard made with a baseline is dropped (compare the merged run instead: ``pytest-medhelm compare``).
The inputs' reasoning models (``run.reasoning``) are united; a model given another reasoning budget or effort in
another input is a :class:`MergeError` (its answers were given different room to think).

Benchmark categories, subcategories and metrics come from the inputs' own benchmark rows (what the run recorded,
including benchmarks registered by plugins or conftest files), and from the built-in catalogue for a slug that has
no row.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_medhelm.report.records import InstanceRecord, MergedFrom, Results, dump

_SAME = ("score", "raw_score", "error", "answer", "prompt_sha256")
Key = tuple[str, str, str, str]


class MergeError(ValueError):
    pass


def _key(inst: InstanceRecord) -> Key:
    return (inst.benchmark, inst.subset or "", str(inst.instance_id), inst.model)


def _union(lists: Iterable[Iterable[str] | None]) -> list[str]:
    out: list[str] = []
    for values in lists:
        for v in values or ():
            if v not in out:
                out.append(v)
    return out


def catalogue_for(inputs: Sequence[tuple[str, Results]], slugs: Iterable[str]) -> dict[str, Any]:
    from pytest_medhelm.catalogue.taxonomy import category_named

    catalogue: dict[str, Any] = {}
    for _, data in inputs:
        for row in data.benchmarks:
            if not row.slug or row.slug in catalogue:
                continue
            category = row.category_slug
            if not category and row.category:
                cat = category_named(row.category)
                category = cat.slug if cat else row.category
            catalogue[row.slug] = SimpleNamespace(category=category or "", subcategory=row.subcategory or "",
                                                  metric=SimpleNamespace(name=row.metric or ""))
    missing = [s for s in slugs if s not in catalogue]
    if missing:
        from pytest_medhelm.catalogue import builtin_benchmarks

        builtin = {b.slug: b for b in builtin_benchmarks()}
        for slug in missing:
            if slug in builtin:
                catalogue[slug] = builtin[slug]
    return catalogue


def _thresholds(specs: Iterable[str], known: set[str]) -> list[SimpleNamespace]:
    from pytest_medhelm.catalogue.taxonomy import category_named
    from pytest_medhelm.options import parse_threshold

    out, seen = [], set()
    for text in specs:
        try:
            name, value = parse_threshold(text)
        except argparse.ArgumentTypeError as exc:
            raise MergeError(str(exc)) from None
        if name.lower() == "overall":
            name = "overall"
        elif name not in known:
            cat = category_named(name)
            if cat is None:
                raise MergeError(f"threshold {text!r}: {name!r} is not a benchmark of these runs, a category or "
                                 "'overall'")
            name = cat.slug
        spec = f"{name}>={value:g}"
        if spec not in seen:
            seen.add(spec)
            out.append(SimpleNamespace(name=name, value=value, spec=spec))
    return out


def _shown(value: Any) -> str:
    """A value as the files hold it (a whole score read as a float is shown as the file wrote it: 0, not 0.0)."""
    return repr(int(value)) if isinstance(value, float) and value.is_integer() else repr(value)


def _instances(inputs: Sequence[tuple[str, Results]]) -> dict[Key, InstanceRecord]:
    """The inputs' instances, each measurement once; the same instance measured differently is a MergeError."""
    records: dict[Key, InstanceRecord] = {}
    origin: dict[Key, str] = {}
    for label, data in inputs:
        for inst in data.instances:
            key = _key(inst)
            if key in records:
                before = records[key]
                diff = [f for f in _SAME if getattr(before, f) != getattr(inst, f)]
                if diff:
                    field = diff[0]
                    raise MergeError(
                        f"conflicting results for benchmark {key[0]!r}, instance {key[2]!r}"
                        + (f" (subset {key[1]!r})" if key[1] else "") + f", model {key[3]!r}: {field} "
                        f"{_shown(getattr(before, field))} in {origin[key]} but {_shown(getattr(inst, field))} "
                        f"in {label}")
                continue
            records[key] = inst
            origin[key] = label
    return records


def merge_results(inputs: Sequence[tuple[str, Results | Mapping[str, Any]]],
                  thresholds: Iterable[str] = ()) -> dict[str, Any]:
    """``inputs``: (label, results) pairs, e.g. (file name, data). Returns the merged results' data."""
    from pytest_medhelm.report.results import build_report, evaluate_gates, jury_prompts_of

    if not inputs:
        raise MergeError("nothing to merge")
    typed = [(label, Results.read(data)) for label, data in inputs]
    compats = {data.run.compat or "default" for _, data in typed}
    if len(compats) > 1:
        raise MergeError("the inputs ran with different --medhelm-compat values (" + ", ".join(sorted(compats))
                         + "): their scores are not comparable")
    records = _instances(typed)
    runs = [data.run for _, data in typed]
    models = _union([r.models for r in runs] + [[k[3] for k in records]])
    judges = _union(r.judges for r in runs)
    options = dict(runs[0].options)
    options["shard"] = None
    commits = {r.git_commit for r in runs}
    starts = [r.started for r in runs if r.started]
    ends = [r.finished for r in runs if r.finished]
    catalogue = catalogue_for(typed, {k[0] for k in records})
    # every shard planned the whole sample of each benchmark: the merged run is partial only if the union is
    planned: dict[str, int] = {}
    for _label, data in typed:
        for row in data.benchmarks:
            if row.n_planned is not None:
                planned[row.slug] = max(planned.get(row.slug, 0), row.n_planned)
    results = build_report(list(records.values()), catalogue, models=models, judges=judges, options=options,
                           started=min(starts) if starts else "", finished=max(ends) if ends else "",
                           compat=compats.pop(), commit=commits.pop() if len(commits) == 1 else None,
                           planned=planned, interrupted=any(r.interrupted for r in runs),
                           jury_prompts=jury_prompts_of((r.jury_prompts for r in runs), None))
    from pytest_medhelm.report.reasoning import merged_reasoning

    try:  # (the same model given different room to think by two inputs is refused)
        results.run.reasoning = merged_reasoning((label, r.reasoning) for (label, _data), r in zip(typed, runs))
    except ValueError as exc:
        raise MergeError(str(exc)) from None
    results.run.merged_from = [
        MergedFrom(file=label, shard=r.options.get("shard"), started=r.started, git_commit=r.git_commit,
                   instances=len(data.instances))
        for (label, data), r in zip(typed, runs)]
    specs = _union([r.options.get("thresholds") or [] for r in runs] + [list(thresholds)])
    known = {k[0] for k in records}
    gates = _thresholds(specs, known)
    options["thresholds"] = [g.spec for g in gates]
    results.run.options = options
    evaluate_gates(results, gates)
    return dump(results)


def merge_files(paths: Sequence[Path | str], thresholds: Iterable[str] = ()) -> dict[str, Any]:
    from pytest_medhelm.compare.storage import read_results

    return merge_results([(str(p), read_results(p)) for p in paths], thresholds)
