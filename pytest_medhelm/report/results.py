"""The run's results as one dict in the JSON contract's shape (DESIGN.md), and the gates evaluated on it.

Terminal tables, the Markdown summary and the JSON file are all rendered from this one dict, so they cannot
disagree, and a results file read back (a baseline, a shard) is the same kind of object.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_medhelm import __version__
from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
from pytest_medhelm.report.aggregate import benchmark_results, category_scores, model_summaries

SCHEMA_VERSION = 1

#: the per-instance fields of the contract, in order; records may carry more
INSTANCE_FIELDS = ("benchmark", "instance_id", "model", "prompt_sha256", "answer", "score", "raw_score",
                   "tokens_in", "tokens_out", "cost_usd", "latency_s", "cached", "error")


def git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def build_results(records: Sequence[Mapping[str, Any]], catalogue: Mapping[str, Any], *, models: Sequence[str],
                  judges: Sequence[str] = (), options: Mapping[str, Any] | None = None, started: str = "",
                  finished: str = "", compat: str = "default", commit: str | None = None,
                  jury_prompts: str | None = None) -> dict[str, Any]:
    """The results dict. ``jury_prompts``: the name of the jury's instrument
    (:attr:`pytest_medhelm.jury.instrument.JuryInstrument.name`, ``helm@ef439fc`` or ``pytest-medhelm@<version>``)
    when the run has a jury, else None."""
    from pytest_medhelm.report.agreement import jury_agreement_records

    results = benchmark_results(records, catalogue)
    bench_rows = []
    for r in results:
        row = asdict(r)
        row["category"] = CATEGORY_BY_SLUG[r.category].name if r.category in CATEGORY_BY_SLUG else r.category
        row["category_slug"] = r.category
        if not row["subsets"]:
            row.pop("subsets")
        bench_rows.append(row)
    categories = []
    for row in category_scores(results):
        cat = CATEGORY_BY_SLUG.get(row["category"])
        categories.append({**row, "category": cat.name if cat else row["category"], "category_slug": row["category"]})
    instances = []
    for rec in sorted(records, key=lambda r: (r["benchmark"], r["model"], r.get("subset") or "",
                                              str(r["instance_id"]))):
        inst = {}
        for key in INSTANCE_FIELDS:
            inst[key] = rec.get(key)
            if key == "prompt_sha256" and "judge_prompt_sha256" in rec:  # beside it: what each judge was asked
                inst["judge_prompt_sha256"] = rec["judge_prompt_sha256"]
        inst.update({k: v for k, v in rec.items() if k not in inst})
        instances.append(inst)
    return {
        "schema_version": SCHEMA_VERSION,
        "run": {"plugin_version": __version__, "started": started, "finished": finished, "models": list(models),
                "judges": list(judges), "options": dict(options or {}), "git_commit": commit, "compat": compat,
                "jury_prompts": jury_prompts, "python": platform.python_version(), "machine": platform.machine()},
        "benchmarks": bench_rows,
        "categories": categories,
        "models": model_summaries(results, records),
        "gates": [],
        "jury_agreement": jury_agreement_records(records, judges),
        "instances": instances,
    }


def evaluate_gates(results: dict[str, Any], thresholds: Iterable[Any]) -> list[dict[str, Any]]:
    """Each threshold applies to every model under test. A gate whose score does not exist fails (value null):
    a gate on a benchmark that did not run must not pass silently in CI."""
    gates = []
    models = results["run"]["models"]
    for threshold in thresholds:
        for model in models:
            value = _gate_value(results, threshold.name, model)
            gates.append({"spec": threshold.spec, "name": threshold.name, "model": model, "value": value,
                          "threshold": threshold.value, "passed": value is not None and value >= threshold.value})
    results["gates"] = gates
    return gates


def _gate_value(results: Mapping[str, Any], name: str, model: str) -> float | None:
    if name == "overall":
        for row in results["models"]:
            if row["model"] == model:
                return row["macro_avg"]
        return None
    for row in results["benchmarks"]:
        if row["slug"] == name and row["model"] == model:
            return row["mean"]
    for row in results["categories"]:
        if row["category_slug"] == name and row["model"] == model:
            return row["score"]
    return None


def write_json(results: Mapping[str, Any], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1, ensure_ascii=False, allow_nan=False, default=_json_default)
        fh.write("\n")
    os.replace(tmp, path)  # never a half-written results file


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return None
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def load_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: not a pytest-medhelm results file (schema_version {SCHEMA_VERSION} expected)")
    return data
