"""What the HTML report shows, as small typed records read from the run's results.

``results_mapping`` is the one place that knows the shape of the results given to the report; every other function
here turns that mapping into records with named fields: the rows of the leaderboard and the gates, the scores the
charts draw (charts.py), and the instances of the drill-down, which travel to the page's script as JSON objects.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.html.verdicts import MAX_TEXT, JudgeVerdict, clip, finite, jury_entries
from pytest_medhelm.report.model_order import ordered_models


def results_mapping(results: Any) -> Mapping[str, Any]:
    """The input boundary: the run's results as the report reads them (the results JSON's fields, a mapping).

    A typed results object (anything with pydantic's ``model_dump``) is read through its JSON form: the fields each
    record has, none it does not, as the results JSON holds them."""
    dump = getattr(results, "model_dump", None)
    data: Mapping[str, Any] = dump(mode="json", exclude_unset=True) if callable(dump) else results
    return data


# ----------------------------------------------------------------------------------------------- formatting
def fmt(value: Any, digits: int = 3) -> str:
    """A number as every table prints it (report/formatting.py), the page's dash when there is none."""
    return fixed(value, digits, missing="–")


def fmt_int(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``, no line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# ----------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class MetaItem:
    label: str
    value: str


@dataclass(frozen=True)
class RunFacts:
    """The header: facts about the run, the generation cap's sentence (None without a cap), the plugin's version."""

    items: list[MetaItem]
    cap_note: str | None
    plugin_version: str
    #: the reasoning models' sentence and, per model, the answers that ran out (pytest_medhelm.report.reasoning)
    reasoning_note: str | None = None
    ran_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkScore:
    """One benchmark × model cell of the heatmap."""

    slug: str
    category: str
    model: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: Any


@dataclass(frozen=True)
class CategoryScore:
    category: str
    model: str
    score: float | None
    n_benchmarks: Any


@dataclass(frozen=True)
class ModelSummary:
    """A model's row of the leaderboard: the numbers the cost chart plots, the texts the table prints."""

    model: str
    win_rate: float | None
    macro_avg: float | None
    total_cost: float | None
    win_rate_text: str
    macro_avg_text: str
    win_sd: str
    macro_sd: str
    tokens_in: str
    tokens_out: str
    model_cost: str
    jury_tokens_in: str
    jury_tokens_out: str
    jury_cost: str
    total_cost_text: str
    #: a reasoning model's: its reasoning tokens (of tokens out) and the answers that ran out
    thinking: bool = False
    reasoning_tokens: str = "–"
    ran_out: str = "0"


@dataclass(frozen=True)
class GateRow:
    spec: str
    model: str
    value: str
    passed: bool


@dataclass(frozen=True)
class TextTable:
    header: list[str]
    rows: list[list[str]]


@dataclass(slots=True)  # (not frozen: a frozen dataclass is built field by field, and a run may have 100,000)
class InstanceView:
    """One instance of the drill-down, as the page's script reads it (JSON object, fields by name)."""

    model: str
    instance_id: str
    prompt_sha256: str
    answer: str
    expected: str
    score: float | None
    raw_score: float | None
    missed: bool
    error: str | None = None
    judges: list[JudgeVerdict] = field(default_factory=list)
    question: str | None = None
    reference: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields the script reads, but the model (the block groups instances by model); an absent optional
        field (no error, no judge, no text) is left out: a run of 100,000 instances stays a file a browser opens."""
        out: dict[str, Any] = {"instance_id": self.instance_id, "prompt_sha256": self.prompt_sha256,
                               "answer": self.answer, "expected": self.expected, "score": self.score,
                               "raw_score": self.raw_score, "missed": self.missed}
        if self.error is not None:
            out["error"] = self.error
        if self.judges:
            out["judges"] = [{"label": j.label, "score": j.score, "explanation": j.explanation} for j in self.judges]
        if self.question is not None:
            out["question"] = self.question
        if self.reference is not None:
            out["reference"] = self.reference
        return out


@dataclass(frozen=True)
class BenchmarkInstances:
    """A benchmark's instances: one option of the drill-down's selector, one JSON block of the page."""

    index: int
    slug: str
    instances: list[InstanceView]

    @property
    def misses(self) -> int:
        return sum(1 for inst in self.instances if inst.missed)

    @property
    def payload(self) -> dict[str, Any]:
        """The page's JSON block of this benchmark: ``{"slug", "models": [{"model", "instances": [...]}]}``, the
        models in the order of their first instance."""
        by_model: dict[str, list[dict[str, Any]]] = {}
        for inst in self.instances:
            by_model.setdefault(inst.model, []).append(inst.to_json())
        return {"slug": self.slug,
                "models": [{"model": model, "instances": instances} for model, instances in by_model.items()]}


# ----------------------------------------------------------------------------------------------- readers
def model_names(results: Mapping[str, Any]) -> list[str]:
    """The run's models as every report orders them (:func:`~pytest_medhelm.report.model_order.ordered_models`): the
    run's list, then the others its rows and instances name."""
    seen = (row.get("model") for group in ("models", "benchmarks", "categories", "instances")
            for row in results.get(group) or [] if isinstance(row, Mapping))
    return ordered_models((results.get("run") or {}).get("models") or [], seen)


def category_order() -> dict[str, int]:
    """Position of each category (display name and slug) in the paper's order."""
    from pytest_medhelm.catalogue.taxonomy import CATEGORIES

    order = {}
    for i, cat in enumerate(CATEGORIES):
        order[cat.name] = i
        order[cat.slug] = i
    return order


def run_benchmarks(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(slug, category display name) of the run's benchmarks, grouped by category in the paper's order."""
    order = category_order()
    seen: dict[str, str] = {}
    for row in results.get("benchmarks") or []:
        seen.setdefault(row["slug"], row.get("category") or "")
    for inst in results.get("instances") or []:
        if inst.get("benchmark") is not None:
            seen.setdefault(inst["benchmark"], "")
    return sorted(seen.items(), key=lambda kv: (order.get(kv[1], len(order)), kv[1], kv[0]))


def benchmark_scores(results: Mapping[str, Any]) -> list[BenchmarkScore]:
    return [BenchmarkScore(str(r["slug"]), r.get("category") or "", str(r["model"]), finite(r.get("mean")),
                           finite(r.get("ci_low")), finite(r.get("ci_high")), r.get("n"))
            for r in results.get("benchmarks") or []]


def category_scores(results: Mapping[str, Any]) -> list[CategoryScore]:
    return [CategoryScore(str(r["category"]), str(r["model"]), finite(r.get("score")), r.get("n_benchmarks"))
            for r in results.get("categories") or []]


def model_summaries(results: Mapping[str, Any]) -> list[ModelSummary]:
    """The leaderboard: by win rate, then macro-average, then name."""
    from pytest_medhelm.cost import model_row_costs, model_row_total

    def rank(r: Mapping[str, Any]) -> tuple[float, float, str]:
        win = finite(r.get("win_rate"))
        return -(win if win is not None else -1.0), -(finite(r.get("macro_avg")) or 0.0), str(r.get("model"))

    out = []
    for r in sorted(results.get("models") or [], key=rank):
        model_cost, jury_cost, total_cost = ("–" if text == "-" else text for text in model_row_costs(r))
        out.append(ModelSummary(
            model=str(r.get("model")), win_rate=finite(r.get("win_rate")), macro_avg=finite(r.get("macro_avg")),
            total_cost=model_row_total(r),
            win_rate_text=fmt(r.get("win_rate"), 2), macro_avg_text=fmt(r.get("macro_avg")),
            win_sd=fmt(r.get("win_sd"), 2), macro_sd=fmt(r.get("macro_sd")), tokens_in=fmt_int(r.get("tokens_in")),
            tokens_out=fmt_int(r.get("tokens_out")), model_cost=model_cost,
            jury_tokens_in=fmt_int(r.get("jury_tokens_in")), jury_tokens_out=fmt_int(r.get("jury_tokens_out")),
            jury_cost=jury_cost, total_cost_text=total_cost,
            thinking=bool(r.get("reasoning_tokens")) or bool(r.get("n_ran_out")),  # (not a plain model's 0)
            reasoning_tokens=fmt_int(r.get("reasoning_tokens")),
            ran_out=f"{r.get('n_ran_out')}/{r.get('n_answers')}" if r.get("n_ran_out") else "0"))
    return out


def run_facts(results: Mapping[str, Any]) -> RunFacts:
    """The header's facts about the run."""
    from pytest_medhelm.report.generation_cap import cap_note

    run = results.get("run") or {}
    items = [("models", ", ".join(run.get("models") or []) or "–"),
             ("judges", ", ".join(run.get("judges") or []) or "–"),
             ("started", run.get("started") or "–"), ("finished", run.get("finished") or "–"),
             ("compat", run.get("compat") or "default"), ("judge prompts", run.get("jury_prompts") or "–"),
             ("git commit", run.get("git_commit") or "n/a"),
             ("pytest-medhelm", run.get("plugin_version") or "?"),
             ("instances", f"{len(results.get('instances') or []):,}")]
    cap = run.get("generation_cap")
    if cap:
        items.append(("answers capped at", f"{cap.get('max_tokens')} tokens (--medhelm-max-tokens)"))
    from pytest_medhelm.report.reasoning import ReasoningSettings, ran_out_lines, reasoning_note

    reasoning = ReasoningSettings.model_validate(run["reasoning"]) if run.get("reasoning") else None
    rows = [_ModelCounts(str(r.get("model")), int(r.get("n_ran_out") or 0), int(r.get("n_answers") or 0))
            for r in results.get("models") or []]
    return RunFacts([MetaItem(label, str(value)) for label, value in items], cap_note(cap),
                    str(run.get("plugin_version") or ""), reasoning_note(reasoning),
                    tuple(line.removeprefix("medhelm: ") for line in ran_out_lines(rows, reasoning)))


@dataclass(frozen=True)
class _ModelCounts:
    model: str
    n_ran_out: int
    n_answers: int


def gate_rows(results: Mapping[str, Any]) -> list[GateRow]:
    return [GateRow(str(g.get("spec")), str(g.get("model")), fmt(g.get("value")), bool(g.get("passed")))
            for g in results.get("gates") or []]


def jury_agreement(results: Mapping[str, Any]) -> TextTable | None:
    """The judges' agreement per benchmark with a jury (report/agreement.py); None when the run had no jury."""
    from pytest_medhelm.report.agreement import agreement_table

    header, rows = agreement_table(results)
    return TextTable(header, rows) if rows else None


def length_adjusted(results: Mapping[str, Any]) -> tuple[str, TextTable] | None:
    """HealthBench's length-adjusted scores beside the raw ones, with the section's title
    (report/length_adjustment.py); None when no benchmark has one."""
    from pytest_medhelm.report.length_adjustment import length_table, length_title
    from pytest_medhelm.report.records import header, section

    run = header(results)
    if run.length_adjustment is None:
        return None
    head, rows = length_table(section(results, "benchmarks"))
    return (length_title(run.length_adjustment), TextTable(head, rows)) if rows else None


def grader_agreement(results: Mapping[str, Any]) -> TextTable | None:
    """healthbench_meta: the rubric grader against physicians (report/grader_agreement.py); None without it."""
    from pytest_medhelm.report.grader_agreement import grader_table
    from pytest_medhelm.report.records import section

    head, rows = grader_table(section(results, "benchmarks"))
    return TextTable(head, rows) if rows else None


def rubric_breakdown(results: Mapping[str, Any]) -> TextTable | None:
    """HealthBench's theme and axis breakdowns (report/rubric_breakdown.py); None without them."""
    from pytest_medhelm.report.rubric_breakdown import breakdown_table

    header, rows = breakdown_table(results)
    return TextTable(header, rows) if rows else None


def is_miss(inst: Mapping[str, Any]) -> bool:
    """A scored instance the model got wrong (an error is not a miss)."""
    if inst.get("error"):
        return False
    missed = inst.get("missed")
    if missed is not None:
        return bool(missed)
    score = finite(inst.get("score"))
    return score is not None and score == 0.0


def _text_or_empty(value: Any) -> str:
    return "" if value is None else str(value)  # (an id 0 is an id: ``or ""`` would show it empty)


def instance_view(inst: Mapping[str, Any], max_text: int = MAX_TEXT) -> InstanceView:
    return InstanceView(
        model=inst.get("model") or "", instance_id=_text_or_empty(inst.get("instance_id")),
        prompt_sha256=inst.get("prompt_sha256") or "", answer=clip(inst.get("answer"), max_text),
        expected=clip(inst.get("expected"), max_text), score=finite(inst.get("score")),
        raw_score=finite(inst.get("raw_score")), missed=is_miss(inst),
        error=clip(inst.get("error"), max_text) or None, judges=jury_entries(inst, max_text),
        question=clip(inst.get("question"), max_text) or None,
        reference=clip(inst.get("reference"), max_text) or None)


def benchmark_instances(results: Mapping[str, Any], max_text: int = MAX_TEXT) -> list[BenchmarkInstances]:
    """The drill-down's benchmarks, in the report's order, each with its instances."""
    by_slug: dict[str, list[InstanceView]] = defaultdict(list)
    for inst in results.get("instances") or []:
        if inst.get("benchmark") is not None:
            by_slug[inst["benchmark"]].append(instance_view(inst, max_text))
    slugs = [slug for slug, _cat in run_benchmarks(results) if slug in by_slug]
    slugs += sorted(s for s in by_slug if s not in slugs)
    return [BenchmarkInstances(i, slug, by_slug[slug]) for i, slug in enumerate(slugs)]
