"""The run's results as one dict in the JSON contract's shape (docs/contract.md), and the gates evaluated on it.

Terminal tables, the Markdown summary and the JSON file are all rendered from this one dict, so they cannot
disagree, and a results file read back (a baseline, a shard) is the same kind of object.

**Not a number.** JSON has no NaN, and a NaN must not pass for a score. A record whose ``score`` is NaN (or an
infinity) is counted as an error of its instance: ``score`` null, ``score_nan: true`` and an ``error`` saying so
(:func:`without_nan_scores`, applied before anything is aggregated). Any other value that is not a finite number
(a NaN ``raw_score``, a NaN in a metric's ``metrics`` extras) is written as null, and the instance lists where in
``nan_fields`` (``["raw_score", "metrics.bleu"]``) (:func:`json_safe`, applied by :func:`write_json`).
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_medhelm import __version__
from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
from pytest_medhelm.report.aggregate import benchmark_results, category_scores, instance_records, model_summaries
from pytest_medhelm.report.record_base import not_finite, scrubbed
from pytest_medhelm.report.records import SCHEMA_VERSION, BenchmarkRow, Gate, InstanceRecord, Results, RunHeader, dump

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.cost import Prices

__all__ = ["SCHEMA_VERSION", "MIXED", "build_report", "build_results", "evaluate_gates", "write_json"]

MIXED = "mixed: "


def jury_prompts_of(names: Iterable[Any], fallback: str | None) -> str | None:
    """The instrument the judges were asked from, from the names the judged records (or merged runs) give: under
    xdist every process loads the instrument, and merged shards come from separate runs. One name, or
    ``mixed: A + B`` when they differ (never comparable with anything); ``fallback`` when none is given."""
    used = sorted({one for name in names for one in _instrument_names(name)})
    if not used:
        return fallback
    return used[0] if len(used) == 1 else MIXED + " + ".join(used)


def _instrument_names(name: Any) -> list[str]:
    if not isinstance(name, str) or not name:
        return []
    return name[len(MIXED):].split(" + ") if name.startswith(MIXED) else [name]


def build_report(records: Sequence[InstanceRecord | Mapping[str, Any]], catalogue: Mapping[str, Any], *,
                 models: Sequence[str], judges: Sequence[str] = (), options: Mapping[str, Any] | None = None,
                 started: str = "", finished: str = "", compat: str = "default", commit: str | None = None,
                 planned: Mapping[str, int] | None = None, interrupted: bool = False,
                 jury_prompts: str | None = None, prices: Prices | None = None,
                 litellm_models: Mapping[str, str] | None = None) -> Results:
    """The results (the JSON contract), typed. ``planned``: per benchmark, the instances its sample holds (per
    model): a benchmark scored on fewer (after -k, --lf, a shard, errors or an interruption) is marked ``partial``,
    with ``n_planned``; ``interrupted``: the run was stopped (Ctrl-C) before its end. ``jury_prompts``: the name of
    the jury's instrument (:attr:`pytest_medhelm.jury.instrument.JuryInstrument.name`, ``helm@ef439fc`` or
    ``pytest-medhelm@<version>``) when the run has a jury, else None; the judged records' own ``jury_instrument``
    win over it (:func:`jury_prompts_of`). ``prices`` (with ``litellm_models``, the string each model is sent as):
    the models' totals are priced as they are built (:func:`pytest_medhelm.report.aggregate.model_summaries`);
    without them, a total is the sum of its answers' costs."""
    from pytest_medhelm.report.agreement import jury_agreement_records
    from pytest_medhelm.report.grader_agreement import add_grader_agreement
    from pytest_medhelm.report.length_adjustment import add_length_adjusted
    from pytest_medhelm.report.rubric_breakdown import add_rubric_sections

    typed = without_nan_scores(instance_records(records))
    jury_prompts = jury_prompts_of((rec.jury_instrument for rec in typed), jury_prompts)
    rows = benchmark_results(typed, catalogue)
    # healthbench_meta measures the rubric grader: its figure is no model's score, in no category or average
    graders = frozenset(slug for slug, bench in catalogue.items()
                        if getattr(getattr(bench, "metric", None), "measures_grader", False))
    categories = category_scores([row for row in rows if row.slug not in graders])  # (by the categories' slugs)
    for row in rows:
        _place(row, (planned or {}).get(row.slug))
    for cat_row in categories:
        cat = CATEGORY_BY_SLUG.get(cat_row.category)
        cat_row.category_slug, cat_row.category = cat_row.category, cat.name if cat else cat_row.category
    run = RunHeader(plugin_version=__version__, started=started, finished=finished, models=list(models),
                    judges=list(judges), options=dict(options or {}), git_commit=commit, compat=compat,
                    jury_prompts=jury_prompts, python=platform.python_version(), machine=platform.machine(),
                    interrupted=interrupted)
    results = Results(schema_version=SCHEMA_VERSION, run=run, benchmarks=rows, categories=categories,
                      models=model_summaries(rows, typed, prices, litellm_models, not_averaged=graders), gates=[],
                      jury_agreement=jury_agreement_records(typed, judges),
                      instances=sorted(typed, key=InstanceRecord.sort_key))
    add_rubric_sections(results, typed)  # HealthBench's theme and axis breakdowns, when it ran
    add_length_adjusted(results, typed)  # and its length-adjusted scores beside the raw ones
    add_grader_agreement(results, typed)  # healthbench_meta: the grader against physicians
    return results


def build_results(records: Sequence[InstanceRecord | Mapping[str, Any]], catalogue: Mapping[str, Any],
                  **run: Any) -> dict[str, Any]:
    """:func:`build_report` as the JSON contract's plain data."""
    return dump(build_report(records, catalogue, **run))


def _place(row: BenchmarkRow, n_planned: int | None) -> None:
    """A benchmark row's category by name and slug, and whether it was scored on its whole sample."""
    row.n_planned = n_planned
    # fewer instances measured than the sample holds (deliberately unscored ones, as EHRSQL's, are measured)
    row.partial = n_planned is not None and row.n + row.n_not_scored < n_planned
    cat = CATEGORY_BY_SLUG.get(row.category)
    row.category_slug, row.category = row.category, cat.name if cat else row.category


def evaluate_gates(results: Results, thresholds: Iterable[Any], *, selected: set[str] | None = None,
                   benchmarks_of: Mapping[str, set[str]] | None = None, strict: bool = False) -> list[Gate]:
    """Each threshold applies to every model under test. Every gate has a ``status``:

    * ``"passed"`` / ``"failed"``: its score was measured and is (not) at least the threshold; a gate whose score
      does not exist (a benchmark that produced no score, every item skipped) fails, value null: nothing measured
      never passes;
    * ``"not evaluated"``: none of its benchmarks was selected in this run (``selected``: the benchmarks with
      collected items; ``benchmarks_of``: category slug -> its benchmarks), so it says nothing; ``passed`` is
      null, unless ``strict`` (``--medhelm-strict-gates``), which fails it.

    Thresholds with no model under test fail (model null, reason "no model under test")."""
    gates = []
    models = results.run.models
    for threshold in thresholds:
        if not models:
            gates.append(Gate(spec=threshold.spec, name=threshold.name, model=None, value=None,
                              threshold=threshold.value, passed=False, status="failed",
                              reason="no model under test (--medhelm-model)"))
            continue
        covered = _covered(threshold.name, selected, benchmarks_of)
        for model in models:
            gate = Gate(spec=threshold.spec, name=threshold.name, model=model, value=None, threshold=threshold.value)
            if not covered:
                gate.passed, gate.status = (False if strict else None), "not evaluated"
                gate.reason = "deselected in this run (-k, -m or --medhelm-benchmark)"
            else:
                value = gate_value(results, threshold.name, model)
                passed = value is not None and value >= threshold.value
                gate.value, gate.passed, gate.status = value, passed, "passed" if passed else "failed"
                if value is None:
                    gate.reason = "no score: nothing of it was measured"
                # read from a subset of some benchmark's sample (-k, --lf, errors): said with the verdict
                gate.partial = any(row.partial for row in results.benchmarks if row.model == model
                                   and gate_reads(threshold.name, row.slug, row.category_slug, benchmarks_of))
            gates.append(gate)
    results.gates = gates
    return gates


def _covered(name: str, selected: set[str] | None, benchmarks_of: Mapping[str, set[str]] | None) -> bool:
    """Whether any benchmark the gate ``name`` reads was selected (unknown selection: yes)."""
    if selected is None:
        return True
    if name == "overall":
        return bool(selected)  # no medhelm item collected at all (a run of other tests): says nothing
    if benchmarks_of is not None and name in benchmarks_of:
        return bool(benchmarks_of[name] & selected)
    return name in selected


def gate_reads(name: object, slug: object, category_slug: object,
               benchmarks_of: Mapping[str, set[str]] | None = None) -> bool:
    """Whether the gate ``name`` reads the benchmark row of ``slug`` in the category ``category_slug`` (plain
    values: the results' JSON is read with it too, where a plugin's hook may have written anything)."""
    if name == "overall":
        return True
    if benchmarks_of is not None and isinstance(name, str) and name in benchmarks_of:
        return slug in benchmarks_of[name]
    return category_slug == name or slug == name


def gate_failed(gate: Gate | Mapping[str, Any]) -> bool:
    """A gate that fails the run: evaluated and not met (a gate not evaluated has ``passed`` null)."""
    return (gate.passed if isinstance(gate, Gate) else gate.get("passed")) is False


def gate_value(results: Results, name: str, model: str) -> float | None:
    """The score a gate ``name`` reads for ``model``: the macro-average (overall), a benchmark's mean or a
    category's score."""
    if name == "overall":
        return next((row.macro_avg for row in results.models if row.model == model), None)
    for row in results.benchmarks:
        if row.slug == name and row.model == model:
            return row.mean
    for cat in results.categories:
        if cat.category_slug == name and cat.model == model:
            return cat.score
    return None


NAN_SCORE_ERROR = "the metric returned {value!r} for this instance: not a score"


Rec = TypeVar("Rec", InstanceRecord, Mapping[str, Any])


def without_nan_scores(records: Sequence[Rec]) -> list[Rec]:
    """``records`` with each NaN (or infinite) ``score`` made an error of its instance: score null,
    ``score_nan: true``, ``error`` kept or set, ``missed`` dropped (a NaN is neither a hit nor a miss). The records
    given are not changed (a fixed one is a copy)."""
    out: list[Rec] = []
    for rec in records:
        score = rec.score if isinstance(rec, InstanceRecord) else rec.get("score")
        if not not_finite(score):
            out.append(rec)
            continue
        error, raw = (rec.error, rec.raw_score) if isinstance(rec, InstanceRecord) else (rec.get("error"),
                                                                                         rec.get("raw_score"))
        fixes: dict[str, Any] = {"score": None, "score_nan": True, "missed": False,
                                 "error": error or NAN_SCORE_ERROR.format(value=score)}
        if not_finite(raw):
            fixes["raw_score"] = None
        out.append(rec.model_copy(update=fixes) if isinstance(rec, InstanceRecord) else {**rec, **fixes})
    return out


def json_safe(results: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``results`` with every float that is not finite (and every integer beyond a float's range) replaced
    by None; each instance holding one gets
    ``nan_fields`` (where they were) and, when its score was one, ``score_nan: true``."""

    out: dict[str, Any] = {}
    for key, value in results.items():
        if key == "instances" and isinstance(value, list):
            instances = []
            for inst in value:
                found: list[str] = []
                fixed = scrubbed(inst, not_finite, "", found)
                if found and isinstance(fixed, dict):
                    fixed["nan_fields"] = sorted(set(fixed.get("nan_fields") or []) | set(found))
                    if "score" in found:
                        fixed["score_nan"] = True
                instances.append(fixed)
            out[key] = instances
        else:
            out[key] = scrubbed(value, not_finite, key, [])
    return out


def write_json(results: Results | Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """The results file, written from the models (a :class:`Results`), or plain data as given; never half-written,
    and a value that is not a finite number written as null (:func:`json_safe`)."""
    data = dump(results) if isinstance(results, Results) else results
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:  # the common case, at full speed: nothing to scrub
        text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False, default=_json_default)
    except (ValueError, TypeError):  # a NaN or an odd number somewhere: null, and the instance says where
        text = json.dumps(json_safe(data), indent=1, ensure_ascii=False, allow_nan=False, default=_json_default)
    from pytest_medhelm.report.texts import open_report

    with open_report(tmp, data) as fh:  # (0600 when it holds instance texts: possibly patient data)
        fh.write(text + "\n")
    os.replace(tmp, path)  # never a half-written results file


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
