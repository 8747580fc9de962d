"""Merging results files (shards of one run, or runs of different models) into one run, every table recomputed.

The instances of all inputs are concatenated; the same (benchmark, subset, instance id, model) may appear more than
once only with the same measurement (score, raw score, error, answer, prompt hash), and is then kept once; different
values are a :class:`MergeError` naming both files. The benchmark, category and model tables are recomputed from the
instances with :func:`pytest_medhelm.report.results.build_results`, exactly as the run itself computes them (records
are sorted before any resampling, and the bootstrap is seeded), so shards merged give the unsharded numbers. The
thresholds the inputs ran with (``run.options.thresholds``) and any given here are evaluated on the merged run; a
comparison a shard made with a baseline is dropped (compare the merged run instead: ``pytest-medhelm compare``).

Benchmark categories, subcategories and metrics come from the inputs' own benchmark rows (what the run recorded,
including benchmarks registered by plugins or conftest files), and from the built-in catalogue for a slug that has
no row.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

_SAME = ("score", "raw_score", "error", "answer", "prompt_sha256")


class MergeError(ValueError):
    pass


def _key(inst: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (inst["benchmark"], inst.get("subset") or "", str(inst["instance_id"]), inst["model"])


def _union(lists: Iterable[Iterable[str]]) -> list[str]:
    out: list[str] = []
    for values in lists:
        for v in values or ():
            if v not in out:
                out.append(v)
    return out


def catalogue_for(inputs: Sequence[tuple[str, Mapping[str, Any]]], slugs: Iterable[str]) -> dict[str, Any]:
    from pytest_medhelm.catalogue.taxonomy import category_named

    catalogue: dict[str, Any] = {}
    for _, data in inputs:
        for row in data.get("benchmarks", []):
            slug = row.get("slug")
            if not slug or slug in catalogue:
                continue
            category = row.get("category_slug")
            if not category and row.get("category"):
                cat = category_named(row["category"])
                category = cat.slug if cat else row["category"]
            catalogue[slug] = SimpleNamespace(category=category or "", subcategory=row.get("subcategory") or "",
                                              metric=SimpleNamespace(name=row.get("metric") or ""))
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


def merge_results(inputs: Sequence[tuple[str, Mapping[str, Any]]], thresholds: Iterable[str] = ()) -> dict[str, Any]:
    """``inputs``: (label, results dict) pairs, e.g. (file name, data). Returns the merged results dict."""
    from pytest_medhelm.report.results import build_results, evaluate_gates, jury_prompts_of

    if not inputs:
        raise MergeError("nothing to merge")
    compats = {data.get("run", {}).get("compat") or "default" for _, data in inputs}
    if len(compats) > 1:
        raise MergeError("the inputs ran with different --medhelm-compat values (" + ", ".join(sorted(compats))
                         + "): their scores are not comparable")
    records: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    origin: dict[tuple[str, str, str, str], str] = {}
    for label, data in inputs:
        for inst in data.get("instances", []):
            key = _key(inst)
            if key in records:
                before = records[key]
                diff = [f for f in _SAME if before.get(f) != inst.get(f)]
                if diff:
                    field = diff[0]
                    raise MergeError(
                        f"conflicting results for benchmark {key[0]!r}, instance {key[2]!r}"
                        + (f" (subset {key[1]!r})" if key[1] else "") + f", model {key[3]!r}: {field} "
                        f"{before.get(field)!r} in {origin[key]} but {inst.get(field)!r} in {label}")
                continue
            records[key] = dict(inst)
            origin[key] = label
    runs = [data.get("run", {}) for _, data in inputs]
    models = _union([r.get("models") for r in runs] + [[k[3] for k in records]])
    judges = _union(r.get("judges") for r in runs)
    options = dict(runs[0].get("options") or {})
    options["shard"] = None
    commits = {r.get("git_commit") for r in runs}
    starts = [r.get("started") for r in runs if r.get("started")]
    ends = [r.get("finished") for r in runs if r.get("finished")]
    catalogue = catalogue_for(inputs, {k[0] for k in records})
    # every shard planned the whole sample of each benchmark: the merged run is partial only if the union is
    planned: dict[str, int] = {}
    for _label, data in inputs:
        for row in data.get("benchmarks", []):
            if row.get("n_planned") is not None:
                planned[row["slug"]] = max(planned.get(row["slug"], 0), row["n_planned"])
    results = build_results(list(records.values()), catalogue, models=models, judges=judges, options=options,
                            started=min(starts) if starts else "", finished=max(ends) if ends else "",
                            compat=compats.pop(), commit=commits.pop() if len(commits) == 1 else None,
                            planned=planned, interrupted=any(r.get("interrupted") for r in runs),
                            jury_prompts=jury_prompts_of((r.get("jury_prompts") for r in runs), None))
    results["run"]["merged_from"] = [
        {"file": label, "shard": (r.get("options") or {}).get("shard"), "started": r.get("started"),
         "git_commit": r.get("git_commit"), "instances": len(data.get("instances", []))}
        for (label, data), r in zip(inputs, runs)]
    specs = _union([(r.get("options") or {}).get("thresholds") or [] for r in runs] + [list(thresholds)])
    known = {k[0] for k in records}
    gates = _thresholds(specs, known)
    options["thresholds"] = [g.spec for g in gates]
    results["run"]["options"] = options
    evaluate_gates(results, gates)
    return results


def merge_files(paths: Sequence[Path | str], thresholds: Iterable[str] = ()) -> dict[str, Any]:
    from pytest_medhelm.compare.storage import read_results

    return merge_results([(str(p), read_results(p)) for p in paths], thresholds)
