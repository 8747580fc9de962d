"""The comparison of a run with a baseline: rows, gates, win rates, and their terminal and Markdown tables.

:func:`build_comparison` takes two results dicts (the JSON contract) and returns ``(comparison, gates)``:
``comparison`` goes under ``results["comparison"]``, ``gates`` are appended to ``results["gates"]``.

Which models are compared: when the baseline has one model, every model of the current run is compared with it
(the usual fine-tune case: ``my-finetune-v2`` against the saved ``my-finetune-v1``); when it has several, each
current model is compared with the baseline model of the same name, and current models without one are listed
under ``unmatched_models``. Instances are matched by (benchmark, subset, instance id), never by model, and only
instances that both runs scored take part (see :mod:`pytest_medhelm.compare.stats` for the tests).

``comparison`` (all numbers are normalized scores; ``delta`` = current − baseline)::

    {"baseline": {"source", "name", "number", "models", "git_commit", "branch", "started"},
     "alpha": 0.05, "power": 0.8, "resamples": 10000, "seed": 0, "multiple_comparisons": "holm",
     "pairs": [{"model", "baseline_model"}], "unmatched_models": [...],
     "rows": [{"scope": "benchmark"|"category"|"overall", "name", "label", "model", "baseline_model", "n",
               "n_benchmarks", "n_baseline_only", "n_current_only", "baseline", "current", "delta", "ci_low",
               "ci_high", "p", "test", "mde", "significant", "discordant"?}],
     "win_rates": [{"model", "win_rate", "win_sd" (population SD, ddof 0, of the per-benchmark win rates),
                    "macro_avg", "baseline"}],
     "warnings": [...]}

Runs whose open-ended benchmarks were scored by different jury instruments (``run.jury_prompts``: HELM's judge
prompts in one, our own rubric in the other; a run with a jury but without the field counts as "unknown"; a
"mixed: ..." run, whose processes asked from different instruments, matches nothing, not even itself) are not
comparable: ``comparison["instrument_mismatch"]`` says which, the first line of every rendering says so, and no
compare-fail gate is evaluated (each fails with a reason saying why, so a CI job that asked for gates stops).

A compare-fail gate ``NAME:DROP`` (NAME a benchmark slug, a category or ``overall``) fails for a model when there
is significant evidence that the score dropped by *more than* DROP: the one-sided test of ``H0: true drop ≤ DROP``
(:func:`pytest_medhelm.compare.stats.margin_p`), its p-value Holm-adjusted over all of the run's compare-fail gates,
below α = 0.05. A true drop of exactly DROP fails at most 5% of runs; a point estimate just past DROP does not fail.
A gate whose NAME has no comparison (absent from either run, or no instance scored by both) fails, as a threshold
on a missing score does: it must not pass silently in CI.

A gate (appended to ``results["gates"]``)::

    {"spec": "compare-fail pubmedqa:0.05", "kind": "compare_fail", "name", "drop", "model", "baseline_model",
     "value" (the delta), "baseline", "current",
     "p" (one-sided p-value of "the drop is at most DROP"), "test" ("tango_score_margin",
     "paired_bootstrap_margin" or "stratified_paired_bootstrap_margin"), "p_holm", "passed", "reason"}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_medhelm.compare import stats
from pytest_medhelm.report.formatting import fixed, p_value
from pytest_medhelm.report.records import Gate, InstanceRecord, Results, section

_EPS = 1e-12


# ---------------------------------------------------------------------------------------------------- building
def run_models(results: Results | Mapping[str, Any]) -> list[str]:
    return Results.read(results).model_names()


def model_pairs(baseline_models: Sequence[str], current_models: Sequence[str]) -> tuple[list[tuple[str, str]],
                                                                                         list[str]]:
    """(current model, baseline model) pairs, and the current models left without a baseline model."""
    if len(baseline_models) == 1:
        return [(m, baseline_models[0]) for m in current_models], []
    pairs = [(m, m) for m in current_models if m in baseline_models]
    return pairs, [m for m in current_models if m not in baseline_models]


Index = dict[str, dict[str, dict[str, dict[str, InstanceRecord]]]]


def _index(results: Results) -> Index:
    """model → benchmark → subset → instance id → instance (scored or not)."""
    index: Index = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for inst in results.instances:
        index[inst.model][inst.benchmark][inst.subset or ""][str(inst.instance_id)] = inst
    return index


def _categories(*results: Results) -> dict[str, str]:
    """benchmark slug → category slug, from the runs' benchmark rows (the current run's first)."""
    from pytest_medhelm.catalogue.taxonomy import category_named

    out: dict[str, str] = {}
    for res in results:
        for row in res.benchmarks:
            if row.slug in out:
                continue
            slug = row.category_slug
            if not slug and row.category:
                cat = category_named(row.category)
                slug = cat.slug if cat else row.category
            if slug:
                out[row.slug] = slug
    return out


def _category_label(slug: str) -> str:
    from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG

    cat = CATEGORY_BY_SLUG.get(slug)
    return cat.name if cat else slug


def _category_order(slug: str) -> tuple[int, str]:
    from pytest_medhelm.catalogue.taxonomy import CATEGORIES

    slugs = [c.slug for c in CATEGORIES]
    return (slugs.index(slug) if slug in slugs else len(slugs), slug)


def _row(scope: str, name: str, label: str, model: str, baseline_model: str, result: stats.PairedResult | None,
         alpha: float, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"scope": scope, "name": name, "label": label, "model": model,
                           "baseline_model": baseline_model}
    if result is None:
        row.update(n=0, n_benchmarks=0, baseline=None, current=None, delta=None, ci_low=None, ci_high=None, p=None,
                   test=None, mde=None, significant=False)
    else:
        row.update(result.as_dict())
        row["significant"] = result.p < alpha
    row.update(extra)
    return row


def baseline_info(baseline: Results | Mapping[str, Any]) -> dict[str, Any]:
    baseline = Results.read(baseline)
    run, saved = baseline.run, baseline.saved
    commit = run.commit_info or {}
    return {"source": (baseline.model_extra or {}).get("source"), "name": saved.name if saved else None,
            "number": saved.number if saved else None, "models": baseline.model_names(),
            "git_commit": commit.get("commit") or run.git_commit, "branch": commit.get("branch"),
            "started": run.started}


def baseline_label(info: Mapping[str, Any]) -> str:
    if info.get("number") is not None:
        return f"{int(info['number']):04d}_{info.get('name')}"
    source = info.get("source")
    if source:
        from pathlib import Path

        return Path(source).name
    return "baseline"


def jury_instruments(baseline: Results | Mapping[str, Any],
                     current: Results | Mapping[str, Any]) -> dict[str, str] | None:
    """{"baseline": name, "current": name} when both runs had a jury and its instruments differ, else None."""
    from pytest_medhelm.report.records import header
    from pytest_medhelm.report.results import MIXED

    names = []
    for res in (baseline, current):
        run = header(res)
        if not run.judges and not run.jury_prompts:
            return None  # a run without a jury: nothing scored by an instrument
        names.append(run.jury_prompts or "unknown")
    if names[0] == names[1] and not names[0].startswith(MIXED):  # a mixed run is one measurement with neither
        return None
    return {"baseline": names[0], "current": names[1]}


def instrument_message(mismatch: Mapping[str, str]) -> str:
    return (f"NOT COMPARABLE: the open-ended benchmarks were scored with different judge prompts (baseline "
            f"{mismatch['baseline']}, this run {mismatch['current']}); compare-fail gates are not evaluated")


def build_comparison(baseline: Results | Mapping[str, Any], current: Results | Mapping[str, Any], *,
                     compare_fail: Iterable[tuple[str, float]] = (), alpha: float = stats.ALPHA,
                     power: float = stats.POWER, resamples: int = stats.RESAMPLES,
                     seed: int = stats.SEED) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The comparison section and the compare-fail gates (see the module docstring)."""
    baseline, current = Results.read(baseline), Results.read(current)
    pairs, unmatched = model_pairs(baseline.model_names(), current.model_names())
    base_index, cur_index = _index(baseline), _index(current)
    category_of = _categories(current, baseline)
    rows: list[dict[str, Any]] = []
    paired: dict[tuple[str, str, str], stats.PairedResult] = {}  # (scope, name, model) → the row's statistics
    warnings: list[str] = []
    prompts_differ = 0
    for model, base_model in pairs:
        by_benchmark: dict[str, stats.PairedResult] = {}
        bench_rows: list[dict[str, Any]] = []
        for slug in sorted(set(cur_index[model]) & set(base_index[base_model])):
            cur_b, base_b = cur_index[model][slug], base_index[base_model][slug]
            matched: dict[str, tuple[list[float], list[float]]] = {}
            only_base = only_cur = 0
            for subset in sorted(set(cur_b) | set(base_b)):
                cur_s, base_s = cur_b.get(subset, {}), base_b.get(subset, {})
                cur_ok = {i: inst.score for i, inst in cur_s.items() if inst.score is not None}
                base_ok = {i: inst.score for i, inst in base_s.items() if inst.score is not None}
                common = sorted(cur_ok.keys() & base_ok.keys())
                only_base += len(base_ok.keys() - cur_ok.keys())
                only_cur += len(cur_ok.keys() - base_ok.keys())
                if common:
                    matched[subset] = ([base_ok[i] for i in common], [cur_ok[i] for i in common])
                    prompts_differ += sum(1 for i in common if base_s[i].prompt_sha256 and cur_s[i].prompt_sha256
                                          and base_s[i].prompt_sha256 != cur_s[i].prompt_sha256)
            result = stats.compare_benchmark(matched, key=slug, resamples=resamples, seed=seed, alpha=alpha,
                                             power=power) if matched else None
            if result is not None:
                by_benchmark[slug] = paired["benchmark", slug, model] = result
            bench_rows.append(_row("benchmark", slug, slug, model, base_model, result, alpha,
                                   category=category_of.get(slug), n_baseline_only=only_base,
                                   n_current_only=only_cur))
        rows += bench_rows
        per_category: dict[str, list[stats.PairedResult]] = defaultdict(list)
        for slug, result in by_benchmark.items():
            per_category[category_of.get(slug, "")].append(result)
        for cat in sorted(per_category, key=_category_order):
            combined = stats.combine(per_category[cat], alpha=alpha, power=power)
            if combined is not None:
                paired["category", cat, model] = combined
            rows.append(_row("category", cat, _category_label(cat), model, base_model, combined, alpha))
        overall = stats.combine(list(by_benchmark.values()), alpha=alpha, power=power)
        if overall is not None:
            paired["overall", "overall", model] = overall
        rows.append(_row("overall", "overall", "overall", model, base_model, overall, alpha))
    if prompts_differ:
        warnings.append(f"{prompts_differ} matched instance(s) were asked with a different prompt than in the "
                        "baseline (prompt_sha256 differs): the comparison mixes prompt and model changes")
    b, c = baseline.run.compat, current.run.compat
    if b and c and b != c:
        warnings.append(f"the baseline ran with compat={b}, this run with compat={c}: scores are not comparable")
    if unmatched:
        warnings.append("no baseline model for " + ", ".join(unmatched) + " (the baseline has "
                        + ", ".join(baseline.model_names()) + ")")
    if pairs and not any(r["scope"] == "benchmark" and r["n"] for r in rows):
        warnings.append("no instance was scored by both runs: nothing to compare")
    mismatch = jury_instruments(baseline, current)
    if mismatch is not None:
        warnings.insert(0, instrument_message(mismatch))
    comparison = {
        "baseline": baseline_info(baseline), "alpha": alpha, "power": power, "resamples": resamples, "seed": seed,
        "multiple_comparisons": "holm",
        "pairs": [{"model": m, "baseline_model": b} for m, b in pairs], "unmatched_models": unmatched,
        "rows": rows, "win_rates": win_rate_rows(baseline, current), "warnings": warnings,
        "instrument_mismatch": mismatch,
    }
    gates = compare_gates(comparison, paired, compare_fail, alpha=alpha)
    return comparison, gates


def _normalize_name(name: str, rows: Sequence[Mapping[str, Any]]) -> str:
    from pytest_medhelm.catalogue.taxonomy import gate_target

    benchmarks = {r["name"] for r in rows if r["scope"] == "benchmark"}
    return gate_target(name, benchmarks) or name


def _find(rows: Sequence[Mapping[str, Any]], name: str, model: str) -> Mapping[str, Any] | None:
    """The row of ``name`` for ``model``: a benchmark first, then a category, then ``overall``."""
    for scope in ("benchmark", "category", "overall"):
        for r in rows:
            if r["scope"] == scope and r["name"] == name and r["model"] == model:
                return r
    return None


def compare_gates(comparison: Mapping[str, Any], paired: Mapping[tuple[str, str, str], stats.PairedResult],
                  compare_fail: Iterable[tuple[str, float]], *, alpha: float = stats.ALPHA) -> list[dict[str, Any]]:
    """The compare-fail gates: each one-sided margin test (``paired`` holds each row's statistics, keyed by
    (scope, name, model)), Holm-adjusted over all of them (module docstring)."""
    rows = comparison["rows"]
    gates: list[Gate] = []
    for name, drop in compare_fail:
        target = _normalize_name(name, rows)
        for pair in comparison["pairs"]:
            row = _find(rows, target, pair["model"])
            result = None if row is None else paired.get((row["scope"], row["name"], row["model"]))
            p, test = stats.margin_p(result, drop) if result is not None else (None, None)
            gates.append(Gate(spec=f"compare-fail {name}:{drop:g}", kind="compare_fail", name=target, drop=drop,
                              model=pair["model"], baseline_model=pair["baseline_model"],
                              value=None if result is None else result.delta,
                              baseline=None if result is None else result.baseline,
                              current=None if result is None else result.current,
                              p=p, test=test, p_holm=None, passed=False))
    mismatch = comparison.get("instrument_mismatch")
    if mismatch:
        for gate in gates:  # not evaluated: a drop could be the instrument's, not the model's
            gate.value, gate.evaluated, gate.passed = None, False, False
            gate.reason = (f"not evaluated: different judge prompts (baseline {mismatch['baseline']}, "
                           f"this run {mismatch['current']})")
    else:
        for gate, p_holm in zip(gates, stats.holm([g.p for g in gates])):
            _judge(gate, p_holm, alpha)
    return [gate.model_dump(exclude_unset=True) for gate in gates]


def _judge(gate: Gate, p_holm: float | None, alpha: float) -> None:
    """A compare-fail gate's verdict and reason from its Holm-adjusted p-value."""
    gate.p_holm = p_holm
    if gate.value is None or p_holm is None or gate.drop is None:
        gate.reason = "no score in common with the baseline"
        gate.passed = False
        return
    drop, limit = -gate.value, gate.drop
    failed = p_holm < alpha
    gate.passed = not failed
    evidence = f"p={p_value(p_holm)} (Holm) for a drop of at most {limit:g}"
    if failed:
        gate.reason = f"dropped by {drop:.3f}, significantly more than {limit:g}: {evidence} < {alpha:g}"
    elif drop > limit + _EPS:
        gate.reason = f"dropped by {drop:.3f} > {limit:g} but not significantly more ({evidence})"
    elif gate.value >= 0:
        gate.reason = f"no drop ({gate.value:+.3f})"
    else:
        gate.reason = f"dropped by {drop:.3f} <= {limit:g}"


def win_rate_rows(baseline: Results | Mapping[str, Any], current: Results | Mapping[str, Any]) -> list[dict[str, Any]]:
    """HELM's win rate over the current run's benchmarks, with each baseline model as one more model named
    ``<model> (baseline)``; macro-averages over the same columns."""
    from pytest_medhelm.report.aggregate import win_rates

    current_rows, baseline_rows = section(current, "benchmarks"), section(baseline, "benchmarks")
    columns = {r.slug for r in current_rows if r.mean is not None}
    table: dict[str, dict[str, float | None]] = defaultdict(dict)
    is_baseline: dict[str, bool] = {}
    for rows, suffix in ((current_rows, ""), (baseline_rows, " (baseline)")):
        for r in rows:
            if r.slug in columns and r.mean is not None:
                name = f"{r.model}{suffix}"
                table[name][r.slug] = r.mean
                is_baseline[name] = bool(suffix)
    if len(table) < 2:
        return []
    rates = win_rates(table)
    out = []
    for name, (rate, sd) in rates.items():
        values = [v for v in table[name].values() if v is not None]
        out.append({"model": name, "win_rate": rate, "win_sd": sd,
                    "macro_avg": sum(values) / len(values) if values else None, "baseline": is_baseline[name]})
    return sorted(out, key=lambda r: (-(r["win_rate"] if r["win_rate"] is not None else -1.0),
                                      -(r["macro_avg"] or 0.0), r["model"]))


# ---------------------------------------------------------------------------------------------------- rendering
_TESTS = {"mcnemar_exact": "McNemar", "paired_bootstrap": "bootstrap",
          "stratified_paired_bootstrap": "strat. bootstrap", None: "-"}


def _marks(p: float | None) -> str:
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def _arrow(delta: float | None) -> str:
    if delta is None:
        return ""
    return "=" if abs(delta) < 0.0005 else ("↑" if delta > 0 else "↓")


def table_rows(comparison: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    several = len(comparison["pairs"]) > 1
    header = (["model"] if several else []) + ["", "baseline", "current", "delta", "95% CI", "p", "MDE", "n",
                                               "test"]
    rows = []
    for r in comparison["rows"]:
        label = r["label"] if r["scope"] == "benchmark" else (
            f"[{r['label']}]" if r["scope"] == "category" else "OVERALL")
        delta = "-" if r["delta"] is None else f"{_arrow(r['delta'])} {fixed(r['delta'], sign=True)} {_marks(r['p'])}"
        ci = "-" if r["ci_low"] is None else f"[{fixed(r['ci_low'], sign=True)}, {fixed(r['ci_high'], sign=True)}]"
        n = str(r["n"]) + (f" ({r['n_benchmarks']} bench)" if r["scope"] != "benchmark" and r["n"] else "")
        rows.append(([r["model"]] if several else []) + [label, fixed(r["baseline"]), fixed(r["current"]),
                                                          delta.rstrip(), ci, p_value(r["p"]), fixed(r["mde"]), n,
                                                          _TESTS.get(r["test"], "-")])
    return header, rows


def win_rate_table(comparison: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "win rate", "win SD", "macro avg"]
    return header, [[r["model"], fixed(r["win_rate"], 2), fixed(r["win_sd"], 2), fixed(r["macro_avg"])]
                    for r in comparison.get("win_rates", [])]


def gate_rows(gates: Iterable[Gate | Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["gate", "model", "delta", "p (drop > DROP)", "p (Holm)", "verdict", "why"]
    typed = [g if isinstance(g, Gate) else Gate.model_validate(g) for g in gates]
    rows = [[g.spec, g.model or "", fixed(g.value, sign=True), p_value(g.p), p_value(g.p_holm),
             "PASS" if g.passed else "FAIL", g.reason or ""]
            for g in typed if g.kind == "compare_fail"]
    return header, rows


def legend(comparison: Mapping[str, Any]) -> str:
    return (f"delta = current - baseline on the instances both runs scored; paired tests: exact McNemar for 0/1 "
            f"scores, paired bootstrap ({comparison['resamples']:,} resamples, stratified by benchmark for "
            f"categories) otherwise; 95% CI: percentile bootstrap; * p<0.05 ** p<0.01 *** p<0.001 (two-sided, "
            f"unadjusted; a compare-fail gate NAME:DROP tests one-sidedly whether the drop exceeds DROP, with Holm's "
            f"correction); MDE: minimum detectable effect at alpha "
            f"{comparison['alpha']:g}, power {comparison['power']:g}")


def _title(comparison: Mapping[str, Any]) -> str:
    info = comparison["baseline"]
    bits = [baseline_label(info)]
    if info.get("git_commit"):
        bits.append(f"commit {info['git_commit'][:10]}")
    if info.get("branch"):
        bits.append(f"branch {info['branch']}")
    pairs = comparison["pairs"]
    models = "; ".join(p["model"] if p["model"] == p["baseline_model"] else f"{p['model']} vs {p['baseline_model']}"
                       for p in pairs)
    title = f"comparison with {bits[0]}"
    if bits[1:]:
        title += f" ({', '.join(bits[1:])})"
    title += f": {models}" if models else ""
    if comparison.get("instrument_mismatch"):
        title = f"{instrument_message(comparison['instrument_mismatch'])} -- {title}"
    return title


def _comparison(results: Results | Mapping[str, Any]) -> Mapping[str, Any]:
    comparison = results.comparison if isinstance(results, Results) else results.get("comparison")
    if comparison is None:
        raise ValueError("these results hold no comparison with a baseline")
    return comparison


def terminal_sections(results: Results | Mapping[str, Any]) -> list[tuple[str, str]]:
    from pytest_medhelm.report.tables import render

    comparison = _comparison(results)
    body = render(*table_rows(comparison)) if comparison["rows"] else "(no benchmark in common)"
    notes = [legend(comparison)] + [f"warning: {w}" for w in comparison.get("warnings", [])]
    sections = [(_title(comparison), body + "\n" + "\n".join(notes))]
    if comparison.get("win_rates"):
        sections.append(("leaderboard with the baseline", render(*win_rate_table(comparison))))
    header, rows = gate_rows(section(results, "gates"))
    if rows:
        sections.append(("compare-fail gates", render(header, rows)))
    return sections


def markdown_section(results: Results | Mapping[str, Any]) -> str:
    from pytest_medhelm.report.tables import render

    comparison = _comparison(results)
    title = _title(comparison)
    lines = [f"### {title[0].upper()}{title[1:]}", ""]
    if comparison["rows"]:
        lines += [render(*table_rows(comparison), fmt="github"), ""]
    else:
        lines += ["No benchmark in common with the baseline.", ""]
    lines += [f"<sub>{legend(comparison)}</sub>", ""]
    for w in comparison.get("warnings", []):
        lines += [f"> ⚠️ {w}", ""]
    if comparison.get("win_rates"):
        lines += ["#### Leaderboard with the baseline", "", render(*win_rate_table(comparison), fmt="github"), ""]
    header, rows = gate_rows(section(results, "gates"))
    if rows:
        lines += ["#### Compare-fail gates", "", render(header, rows, fmt="github"), ""]
    return "\n".join(lines)
