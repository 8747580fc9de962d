"""The results JSON's records as pydantic models: the one definition of the contract (docs/contract.md).

The results are built from these models, written from them (:func:`dump`) and read back through them
(:meth:`Results.read`): a baseline, a shard to merge, a saved run. Every model allows fields it does not declare
(the contract says fields may be added; a plugin's gate or an older file's extra field is kept, never refused).

A field a record does not have is left out of the file rather than written as null: the models are dumped with
``exclude_unset``, so a record read back and written again is the same JSON. The fields every record of a kind has
(the contract's) are set whenever a record is built.

The JSON Schema of the file is generated from :class:`Results` and shipped beside this module
(``results.schema.json``); ``python -m pytest_medhelm.report.records --write-schema`` regenerates it, and the
tests check that the shipped file is the generated one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationError

from pytest_medhelm.report.grader_agreement import GraderAgreement
from pytest_medhelm.report.length_adjustment import LengthAdjustment
from pytest_medhelm.report.model_order import ordered_models
from pytest_medhelm.report.power_record import GatePower
from pytest_medhelm.report.reasoning import ReasoningModel, ReasoningSettings
from pytest_medhelm.report.record_base import Amount, Count, Record, Text, about, huge_int, many, scrubbed
from pytest_medhelm.report.shared_cache import SharedCacheState

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.item_record import ItemRecord

SCHEMA_VERSION: Literal[1] = 1
SCHEMA_FILE = Path(__file__).with_name("results.schema.json")
SCHEMA_ID = "urn:pytest-medhelm:results:1"

#: the jury's (or the rubric grader's) accounting, which a metric's extras carry: also at the record's top level,
#: where the totals are summed
JURY_ACCOUNTING = ("jury_tokens_in", "jury_tokens_out", "jury_cost_usd")
#: what the judges were asked, which a metric's extras carry: at the record's top level only, beside prompt_sha256
JURY_PROMPTS = ("judge_prompt_sha256", "jury_instrument")


#: where a record's values its fields refuse are kept (in ``metrics``), with what was expected
INVALID_FIELDS = "invalid_fields"
#: the error_kind of an item whose score (or whole record) was refused: nothing measured
INVALID_RECORD = "InvalidRecordField"


class InstanceRecord(Record):
    """One item: an instance answered by a model, its accounting and its score."""

    ALWAYS = ("benchmark", "instance_id", "model", "prompt_sha256", "answer", "score", "raw_score", "tokens_in",
              "tokens_out", "cost_usd", "latency_s", "cached", "error")

    benchmark: str = Field(description="the benchmark's slug")
    instance_id: Text = about("the instance's id in its benchmark, as text (a number or UUID id too); null: the "
                              "item failed before it")
    model: str = Field(description="the model under test")
    prompt_sha256: str | None = about("sha256 of the exact prompt text sent (UTF-8; a chat benchmark's messages "
                                      "as compact JSON)")
    judge_prompt_sha256: list[str] | None = about("sha256 of each judge's (or rubric criterion's) prompt")
    answer: str | None = about("the model's answer")
    score: float | None = about("the normalized score, 0 to 1 (a HealthBench rubric score can be negative); "
                                "null: not scored")
    raw_score: float | None = about("the metric on its own scale (a jury's 1 to 5)")
    tokens_in: Count | None = about("prompt tokens, over every call of the item")
    tokens_out: Count | None = about("completion tokens, over every call of the item")
    cost_usd: Amount | None = about("the calls' cost; null: a price is unknown (never counted as 0)")
    latency_s: Amount | None = about("seconds the answer took (0 from the cache)")
    cached: bool | None = about("the answer came from the answer cache")
    error: str | None = about("a model, data or scoring error: no measurement")
    subset: str | None = about("the subset of a benchmark HELM runs as several runs ('' for none)")
    missed: bool | None = about("scored below the metric's pass mark (a measurement, not a failure)")
    expected: Any = about("the expected answer, as the metric reads it")
    metric: str | None = about("the metric's name")
    detail: Text = about("what the metric says about the score (expected vs got), as text")
    metrics: dict[str, Any] | None = about("the metric's secondary values and the jury's verdicts; "
                                            "invalid_fields: per field, a value the record refused and why")
    jury_tokens_in: Count | None = about("the judges' (or rubric grader's) prompt tokens")
    jury_tokens_out: Count | None = about("the judges' (or rubric grader's) completion tokens")
    jury_cost_usd: Amount | None = about("the judges' cost; null: a price is unknown")
    jury_instrument: str | None = about("the judge prompts asked from (helm@ef439fc, pytest-medhelm@<version>)")
    judge_failures: dict[str, str] | None = about("per judge, why it gave no valid judgement")
    error_kind: str | None = about("the error's kind (ModelError, DataError, ScoringError, ScoreNotANumber)")
    not_scored: str | None = about("why the metric cannot score the instance: counted neither for nor against")
    score_nan: bool | None = about("the metric returned NaN or an infinity: counted as an error")
    nan_fields: list[str] | None = about("where a value that is not a finite number (or an integer beyond a "
                                         "float's range) was written as null")
    reasoning_tokens: Count | None = about("of tokens_out, the tokens spent thinking (null: the server did not say)")
    thinking_chars: Count | None = about("characters of the answer's thinking, kept apart from the answer")
    thinking: str | None = about("--medhelm-report-text only: the answer's thinking")
    ran_out: dict[str, Any] | None = about("the token limit was used up before any answer (a miss): its limits")
    question: str | None = about("--medhelm-report-text only: the input with its lettered options")
    reference: str | None = about("--medhelm-report-text only: the gold answer as text")

    def sort_key(self) -> tuple[str, str, str, str]:
        return self.benchmark, self.model, self.subset or "", str(self.instance_id)

    @classmethod
    def of_item(cls, written: ItemRecord | None, keep_thinking: bool = False, **item: Any) -> InstanceRecord:
        """The record of an item: what its fixtures and assertions wrote (``written``; the answer's thinking only
        when ``keep_thinking``), the jury's accounting and prompts lifted from the metric's extras to the record's
        top level, and the item's own fields (``item``: benchmark, model, instance_id, subset, and what its outcome
        adds)."""
        fields = written.fields(keep_thinking) if written is not None else {}
        metrics = fields.get("metrics")
        if isinstance(metrics, Mapping):
            metrics = fields["metrics"] = dict(metrics)
            for key in JURY_ACCOUNTING:
                if key in metrics:
                    fields[key] = metrics[key]
            for key in JURY_PROMPTS:
                value = metrics.pop(key, None)
                if value is not None and (value or key != "jury_instrument"):
                    fields[key] = value
        fields.update(item)
        return cls._validated(fields)

    @classmethod
    def _validated(cls, fields: dict[str, Any]) -> InstanceRecord:
        """The record of ``fields``; a value its field refuses (a plugin's or custom metric's: ``raw_score="n/a"``,
        ``tokens_in=3.5``, metrics that are not a dict) is moved aside into ``metrics["invalid_fields"]`` with what
        was expected, rather than aborting the session: only this item's record says what was wrong. A refused
        score makes the item an error (nothing measured)."""
        invalid: dict[str, str] = {}
        while True:  # each pass drops what was refused; benchmark, model and a text id always validate
            try:
                record = cls.model_validate(fields)
                break
            except ValidationError as exc:
                refused = {str(err["loc"][0]) for err in exc.errors() if err["loc"]} & set(fields)
                for err in exc.errors():
                    name = str(err["loc"][0]) if err["loc"] else "record"
                    invalid.setdefault(name, f"{err['msg']}: got {_shown(fields.get(name, fields))}")
                if not refused - {"benchmark", "model"}:  # (an item always has both, as text): its identity only
                    invalid.setdefault("record", "not an item's record")
                    fields = {"benchmark": str(fields.get("benchmark")), "model": str(fields.get("model")),
                              "instance_id": fields.get("instance_id")}
                    continue
                # no score: neither a miss nor a pass; refused metrics: no jury accounting lifted from them
                refused |= {"missed"} if "score" in refused else set()
                refused |= set(JURY_ACCOUNTING) if "metrics" in refused else set()
                fields = {key: value for key, value in fields.items() if key not in refused}
        if invalid:
            kept = dict(record.metrics or {})
            kept[INVALID_FIELDS] = invalid
            record.metrics = kept
            if {"score", "record"} & set(invalid) and record.error is None:
                record.error = "; ".join(f"{name}: {why}" for name, why in invalid.items())
                record.error_kind = INVALID_RECORD
                record.score = None
        return record

    def wire(self) -> dict[str, Any]:
        """The record as plain data (what xdist carries from a worker to the controller). An integer no float can
        hold (a metric's value of thousands of digits, which execnet cannot carry and JSON cannot write) becomes
        null, and ``nan_fields`` says where, as the results file would say it."""
        found: list[str] = []
        data = scrubbed(self.model_dump(exclude_unset=True), huge_int, "", found)
        if found:
            data["nan_fields"] = sorted(set(data.get("nan_fields") or []) | set(found))
        return data


def _shown(value: Any) -> str:
    """A refused value as short text (it may be any object: the record says what it was, not the object)."""
    if isinstance(value, int) and value.bit_length() > 64:  # (repr raises past 4,300 digits)
        try:
            return f"an integer of {len(str(abs(value))):,} digits"
        except ValueError:
            return "an integer of more than 4,300 digits"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


class BenchmarkRow(Record):
    """A benchmark × model: its score over the scored instances, with a 95% bootstrap interval."""

    ALWAYS = ("slug", "model", "category", "category_slug", "subcategory", "metric", "n", "n_missing",
              "n_not_scored", "n_errors", "mean", "ci_low", "ci_high", "raw_mean", "n_planned", "partial")

    slug: str = Field(description="the benchmark's slug")
    model: str = Field(description="the model")
    category: str = about("the category's name (the paper's)", "")
    category_slug: str = about("the category's slug", "")
    subcategory: str = about("the subcategory's name", "")
    metric: str = about("the metric's name", "")
    n: int = about("instances scored", 0)
    n_missing: int = about("instances without a score, other than not_scored (errors included)", 0)
    n_not_scored: int = about("instances the metric cannot score: counted neither for nor against", 0)
    n_errors: int = about("instances that ended with a model, data or scoring error", 0)
    n_ran_out: int = about("answers the token limit cut before they began: misses, counted in n (written when any; "
                           "docs/reasoning.md)", 0)
    mean: float | None = about("the benchmark's normalized score: the mean of the scored instances (of the "
                               "subset means, for several subsets)")
    ci_low: float | None = about("95% percentile bootstrap interval of mean, low end (1,000 resamples, seed 0)")
    ci_high: float | None = about("95% percentile bootstrap interval of mean, high end")
    raw_mean: float | None = about("mean on the metric's own scale (a jury's 1 to 5)")
    subsets: dict[str, float] = many("the subset means, when HELM runs the benchmark as several subsets", dict)
    bootstrap_std: float | None = about("HealthBench: the bootstrap standard deviation of the clipped mean")
    length_adjusted: float | None = about("HealthBench: the length-adjusted score beside mean (run.length_adjustment)")
    grader_agreement: GraderAgreement | None = about("healthbench_meta: the rubric grader against physicians")
    n_planned: int | None = about("instances its sample holds per model (null: not known)")
    partial: bool = about("scored on fewer instances than its sample holds (-k, --lf, a shard, errors, an "
                          "interruption)", False)


class CategoryRow(Record):
    """A category × model: the unweighted mean of its benchmarks' scores."""

    category: str = Field(description="the category's name")
    category_slug: str = about("the category's slug", "")
    model: str = Field(description="the model")
    score: float | None = about("the unweighted mean of the category's benchmark means")
    n_benchmarks: int = about("benchmarks with a score", 0)


class ModelRow(Record):
    """A model's leaderboard row (the MedHELM paper's Table 1) and its accounting."""

    model: str = Field(description="the model")
    macro_avg: float | None = about("the unweighted mean of the model's benchmark means")
    macro_sd: float | None = about("their population standard deviation (ddof 0)")
    win_rate: float | None = about("HELM's mean win rate over the benchmark columns (null: a single model)")
    win_sd: float | None = about("the population standard deviation of the per-column win rates")
    tokens_in: int = about("prompt tokens over the model's instances", 0)
    tokens_out: int = about("completion tokens over the model's instances, reasoning tokens included", 0)
    reasoning_tokens: int | None = about("of tokens_out, the reasoning tokens servers reported (null: none did)")
    n_answers: int = about("instances with an answer (no model error)", 0)
    n_ran_out: int = about("answers the token limit cut before they began (misses; docs/reasoning.md)", 0)
    cost_usd: float | None = about("total cost; null: an answer came at an unknown price")
    jury_tokens_in: int = about("the judges' prompt tokens", 0)
    jury_tokens_out: int = about("the judges' completion tokens", 0)
    jury_cost_usd: float | None = about("the judges' cost; null: judges were called at an unknown price")


class Gate(Record):
    """A threshold (``--medhelm-threshold``), a compare-fail gate or a plugin's gate, per model."""

    ALWAYS = ("spec", "model", "value", "passed")

    spec: str = Field(description="the gate as given (pubmedqa>=0.9, compare-fail pubmedqa:0.05)")
    name: str | None = about("the benchmark slug, category slug or 'overall' it reads")
    model: str | None = about("the model it applies to (null: no model under test)")
    value: float | None = about("the score it read (a compare-fail gate: the delta); null: no score")
    threshold: float | None = about("the threshold the score must reach")
    passed: bool | None = about("the verdict; null: not evaluated (deselected, or a shard)")
    status: str | None = about("'passed', 'failed' or 'not evaluated'")
    reason: str | None = about("why it failed or was not evaluated")
    partial: bool | None = about("read from a benchmark scored on fewer instances than its sample")
    kind: str | None = about("'compare_fail' for a compare-fail gate (docs/comparing.md)")
    drop: float | None = about("compare-fail: the drop allowed")
    baseline_model: str | None = about("compare-fail: the baseline's model")
    baseline: float | None = about("compare-fail: the baseline's score on the instances both runs scored")
    current: float | None = about("compare-fail: this run's score on the same instances")
    p: float | None = about("compare-fail: one-sided p-value of 'the drop is at most DROP'")
    test: str | None = about("compare-fail: the test of that p-value")
    p_holm: float | None = about("compare-fail: p Holm-adjusted over the run's compare-fail gates")
    evaluated: bool | None = about("compare-fail: false when the runs' judge prompts differ")
    power: GatePower | None = about("--medhelm-power: what the gate can detect at the run's n (docs/comparing.md)")
    calibration: list[dict[str, Any]] | None = about("--medhelm-require-calibrated: per judged benchmark, the rater, "
                                                     "its prompt sha256, the record found and whether it calibrates")

    @property
    def failed(self) -> bool:
        """A gate that fails the run: evaluated and not met."""
        return self.passed is False


class JuryAgreementRow(Record):
    """The judges' agreement on a benchmark × model (ICC(3,k), Krippendorff's alpha)."""

    benchmark: str = Field(description="the benchmark's slug")
    model: str = Field(description="the model judged")
    judges: list[str] = many("the run's judges and any other judge of the verdicts", list)
    n_instances: int = about("instances with a jury verdict", 0)
    n_complete: int = about("instances every judge graded", 0)
    icc3k: float | None = about("ICC(3,k) over the judges' per-instance composite scores")
    icc3_1: float | None = about("ICC(3,1), the single judge's reliability")
    alpha_interval: float | None = about("Krippendorff's alpha (interval)")
    failures: dict[str, int] = many("per judge, the instances it gave no valid judgement on", dict)
    judge_means: dict[str, float | None] = many("per judge, its mean score", dict)
    flagged: Any = about("the verdicts flagged, per reason")
    per_criterion: dict[str, Any] = many("the agreement per rubric criterion", dict)
    note: str | None = about("why no agreement was computed (fewer than two judges)")


class RubricBreakdownRow(Record):
    """HealthBench's score on one theme or axis for a benchmark × model (mean clipped to [0, 1])."""

    benchmark: str = Field(description="the benchmark's slug")
    model: str = Field(description="the model")
    tag: str = Field(description="the tag (theme:..., axis:...)")
    kind: Literal["theme", "axis"] = Field(description="'theme' or 'axis'")
    n: int = Field(description="instances with the tag")
    mean: float | None = about("their mean score, clipped to [0, 1]")
    bootstrap_std: float | None = about("the bootstrap standard deviation of the clipped mean")


class RubricGraders(Record):
    """Who graded a rubric-graded benchmark, with which instrument."""

    instruments: list[str] = many("the instruments whose prompts were sent", list)
    graders: list[str] = many("the graders that graded", list)


class GenerationCap(Record):
    """``--medhelm-max-tokens N``: the cap, and each benchmark of the run it lowered with its own limit."""

    max_tokens: int = Field(description="the cap (N)")
    benchmarks: dict[str, int] = many("the benchmarks whose answers it shortened, with their own max_tokens", dict)


class MergedFrom(Record):
    """One input of a merged run (pytest-medhelm merge)."""

    file: str = Field(description="the input file")
    shard: Any = about("its --medhelm-shard ([i, n]), null for a whole run")
    started: str | None = about("when it started")
    git_commit: str | None = about("its commit")
    instances: int = about("its instances", 0)


class RunHeader(Record):
    """Who ran what, how and when."""

    ALWAYS = ("plugin_version", "started", "finished", "models", "judges", "options", "git_commit", "compat",
              "jury_prompts", "python", "machine", "interrupted")

    plugin_version: str = about("pytest-medhelm's version", "")
    started: str = about("when the run started (ISO 8601, UTC)", "")
    finished: str = about("when the results were built (ISO 8601, UTC)", "")
    models: list[str] = many("the models under test, in the order given", list)
    judges: list[str] = many("the jury (empty without an open-ended benchmark)", list)
    options: dict[str, Any] = many("the run's options that bear on its numbers", dict)
    git_commit: str | None = about("the commit of the rootdir, if a git checkout")
    compat: str = about("--medhelm-compat: default, helm or medhelm", "default")
    jury_prompts: str | None = about("the judge prompts' instrument; 'mixed: A + B' when the processes (or merged "
                                     "runs) used different ones")
    python: str | None = about("the Python version")
    machine: str | None = about("the machine's architecture")
    interrupted: bool = about("the run was stopped (Ctrl-C) before its end", False)
    filtered: dict[str, dict[str, int]] | None = about("per benchmark and reason, the records a loader dropped")
    data_unverified: dict[str, dict[str, dict[str, str | None]]] | None = about(
        "files accepted although they differ from their pins: benchmark -> file -> what differed")
    budget: dict[str, Any] | None = about("--medhelm-budget: limit_usd, spent_usd, not_sent, exhausted")
    generation_cap: GenerationCap | None = about("--medhelm-max-tokens: the cap and the benchmarks it shortened")
    reasoning: ReasoningSettings | None = about("the reasoning options and the models treated as reasoning models")
    shared_cache: SharedCacheState | None = about("--medhelm-cache-url: the shared cache's URL (redacted) and whether "
                                                  "it answered (null: no shared cache)")
    rubric_graders: dict[str, RubricGraders] | None = about("per rubric-graded benchmark, its graders")
    length_adjustment: LengthAdjustment | None = about("HealthBench: the rule of benchmarks' length_adjusted")
    merged_from: list[MergedFrom] | None = about("a merged run's inputs")
    machine_info: dict[str, Any] | None = about("a saved run: platform, Python, CPU count")
    commit_info: dict[str, Any] | None = about("a saved run: git commit, branch and dirty")


class SavedInfo(Record):
    """A saved run's name and number under .medhelm/runs/."""

    name: str = Field(description="the --medhelm-save name (autosave for --medhelm-autosave)")
    number: int = Field(description="its number")
    file: str = Field(description="its file name (NNNN_<name>.json)")
    saved_at: str = Field(description="when it was saved (ISO 8601, UTC)")


class Results(Record):
    """The results JSON (``--medhelm-json``, a saved run, a merged run)."""

    SCHEMA_IDENTITY: ClassVar[tuple[str, str]] = (SCHEMA_ID, "pytest-medhelm results")
    ALWAYS = ("schema_version", "run", "benchmarks", "categories", "models", "gates", "jury_agreement", "instances")

    schema_version: Literal[1] = about("1 (names change only with a new version)", SCHEMA_VERSION)
    run: RunHeader = Field(default_factory=RunHeader, description="who ran what, how and when")
    benchmarks: list[BenchmarkRow] = many("one row per benchmark × model", list)
    categories: list[CategoryRow] = many("one row per category × model", list)
    models: list[ModelRow] = many("one row per model: the leaderboard", list)
    gates: list[Gate] = many("the thresholds' and compare-fail gates' verdicts, per model", list)
    jury_agreement: list[JuryAgreementRow] = many("the judges' agreement per benchmark × model", list)
    instances: list[InstanceRecord] = many("one record per item", list)
    rubric_breakdown: list[RubricBreakdownRow] | None = about("HealthBench's theme and axis breakdowns")
    comparison: dict[str, Any] | None = about("the comparison with a baseline (docs/comparing.md)")
    saved: SavedInfo | None = about("a saved run's name and number")

    @classmethod
    def read(cls, results: Results | Mapping[str, Any]) -> Results:
        """``results`` through the models (a results dict of this run, or a file's data); a Results as it is."""
        return results if isinstance(results, Results) else cls.model_validate(results)

    def model_names(self) -> list[str]:
        """The models of the run in the order it gives them, then any other model a row or instance names."""
        return ordered_models(self.run.models, (row.model for rows in (self.models, self.benchmarks, self.categories,
                                                                        self.instances) for row in rows))


#: the lists of the results and the record each holds
SECTIONS: dict[str, type[Record]] = {"benchmarks": BenchmarkRow, "categories": CategoryRow, "models": ModelRow,
                                     "gates": Gate, "jury_agreement": JuryAgreementRow, "instances": InstanceRecord,
                                     "rubric_breakdown": RubricBreakdownRow}


def section(results: Results | Mapping[str, Any], name: str) -> list[Any]:
    """One list of the results, typed, without reading the rest: a Results' own, or a dict's read through its
    record (a table of 20 rows does not read 100,000 instances)."""
    if isinstance(results, Results):
        return list(getattr(results, name) or [])
    record = SECTIONS[name]
    return [row if isinstance(row, record) else record.model_validate(row) for row in results.get(name) or []]


def header(results: Results | Mapping[str, Any]) -> RunHeader:
    """The run header of the results, typed."""
    if isinstance(results, Results):
        return results.run
    return RunHeader.model_validate(results.get("run") or {})


def dump(results: Results) -> dict[str, Any]:
    """The results as the JSON contract's plain data: every field each record has, none it does not."""
    return results.model_dump(exclude_unset=True)


def results_schema() -> dict[str, Any]:
    """The JSON Schema of the results file, generated from :class:`Results` (the validation side: what a file
    must hold to be read back)."""
    schema = Results.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return json.dumps(results_schema(), indent=1, ensure_ascii=False, sort_keys=False) + "\n"


#: the records docs/contract.md's field tables describe, in its order, with the place each is found
DOCUMENTED: tuple[tuple[str, type[Record]], ...] = (
    ("the file", Results), ("run", RunHeader), ("run.reasoning", ReasoningSettings),
    ("run.reasoning.models{}, run.reasoning.judges{}", ReasoningModel), ("run.shared_cache", SharedCacheState),
    ("benchmarks[]", BenchmarkRow), ("benchmarks[].grader_agreement", GraderAgreement),
    ("categories[]", CategoryRow),
    ("models[]", ModelRow), ("gates[]", Gate), ("jury_agreement[]", JuryAgreementRow),
    ("rubric_breakdown[]", RubricBreakdownRow), ("instances[]", InstanceRecord))


def _type_name(prop: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        return "object" if prop["$ref"].rsplit("/", 1)[-1] != "Results" else "results"
    if "anyOf" in prop:
        return " or ".join(_type_name(option) for option in prop["anyOf"])
    if "const" in prop or "enum" in prop:
        return " or ".join(json.dumps(v) for v in prop.get("enum", [prop.get("const")]))
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type_name(prop.get('items', {}))}"
    return {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "null": "null",
            "object": "object", None: "any"}.get(kind, str(kind))


def field_tables() -> str:
    """docs/contract.md's field tables, generated from the models (``--doc-tables`` prints them)."""
    schema = results_schema()
    parts = []
    for place, record in DOCUMENTED:
        node = schema if record is Results else schema["$defs"][record.__name__]
        required = set(node.get("required", ()))
        parts += [f"### `{place}`", "", (record.__doc__ or "").strip().split("\n")[0], "",
                  "| field | type | always | meaning |", "|---|---|---|---|"]
        for name, prop in node["properties"].items():
            meaning = (prop.get("description") or "").replace("|", "\\|")
            parts.append(f"| `{name}` | {_type_name(prop)} | {'yes' if name in required else ''} | {meaning} |")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_medhelm.report.records --write-schema``: regenerate the shipped schema file;
    ``--doc-tables``: print docs/contract.md's field tables; without an option, print the schema."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write-schema"]:
        SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
        print(f"wrote {SCHEMA_FILE.name}")
        return 0
    if args == ["--doc-tables"]:
        sys.stdout.write(field_tables())
        return 0
    if args:
        print("usage: python -m pytest_medhelm.report.records [--write-schema | --doc-tables]", file=sys.stderr)
        return 2
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
