"""Terminal tables and the Markdown summary, shaped like the paper's: benchmark × model, category × model, and the
Table 1 leaderboard (win rate, Win SD, macro-average, SD), then the gates' verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_medhelm.catalogue.taxonomy import CATEGORIES
from pytest_medhelm.cost import model_row_costs
from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.records import BenchmarkRow, Gate, Results

Table = tuple[list[str], list[list[str]]]


def benchmark_table(results: Results | Mapping[str, Any]) -> Table:
    results = Results.read(results)
    models = results.model_names()
    cells = {(r.slug, r.model): r for r in results.benchmarks}
    firsts: dict[str, BenchmarkRow] = {}
    for r in results.benchmarks:
        firsts.setdefault(r.slug, r)
    header = ["benchmark", "metric"] + models
    rows = []
    for slug, first in firsts.items():
        row = [slug, first.metric]
        for m in models:
            cell = cells.get((slug, m))
            row.append("-" if cell is None else _benchmark_cell(cell))
        rows.append(row)
    return header, rows


def _benchmark_cell(r: BenchmarkRow) -> str:
    # not-scored items (the metric cannot score them) are shown, never silently left out of n
    not_scored = f" ({r.n_not_scored} not scored)" if r.n_not_scored else ""
    if r.mean is None:
        return f"- (n=0, {r.n_errors} err){not_scored}"
    text = f"{fixed(r.mean)} [{fixed(r.ci_low)}, {fixed(r.ci_high)}] n={r.n}"
    if r.partial:  # a subset (-k, --lf, a shard, errors, an interruption): not the benchmark's score
        text += f"/{r.n_planned} partial"
    if r.n_errors:
        text += f" ({r.n_errors} err)"
    if r.n_ran_out:  # answers a reasoning model's thinking left no room for: misses, in n
        text += f" ({r.n_ran_out} ran out)"
    return text + not_scored


def category_table(results: Results | Mapping[str, Any]) -> Table:
    results = Results.read(results)
    models = results.model_names()
    cells = {(r.category_slug, r.model): r for r in results.categories}
    header = ["category"] + models
    rows = []
    for cat in CATEGORIES:
        if not any(key[0] == cat.slug for key in cells):
            continue
        rows.append([cat.name] + [f"{fixed(cell.score)} ({cell.n_benchmarks})"
                                  if (cell := cells.get((cat.slug, m))) is not None else "-" for m in models])
    return header, rows


def leaderboard_table(results: Results | Mapping[str, Any]) -> Table:
    header = ["model", "win rate", "win SD", "macro avg", "SD", "tokens in", "tokens out", "model cost", "jury cost",
              "total cost"]
    rows = []
    ranked = sorted(Results.read(results).models,
                    key=lambda r: (-(r.win_rate if r.win_rate is not None else -1), -(r.macro_avg or 0)))
    # reasoning models: their reasoning tokens (of tokens out) and the answers that ran out, beside tokens out
    thinking = any(r.reasoning_tokens or r.n_ran_out for r in ranked)  # (a plain gpt-4o reports 0 reasoning tokens)
    if thinking:
        header[7:7] = ["reasoning tokens", "ran out"]
    for r in ranked:
        row = [r.model, fixed(r.win_rate, 2), fixed(r.win_sd, 2), fixed(r.macro_avg), fixed(r.macro_sd),
               str(r.tokens_in), str(r.tokens_out), *model_row_costs(r.model_dump(exclude_unset=True))]
        if thinking:
            row[7:7] = ["-" if r.reasoning_tokens is None else str(r.reasoning_tokens),
                        f"{r.n_ran_out}/{r.n_answers}" if r.n_ran_out else "0"]
        rows.append(row)
    return header, rows


def gate_table(results: Results | Mapping[str, Any]) -> Table:
    header = ["gate", "model", "value", "verdict"]
    rows = [[g.spec, g.model or "-", fixed(g.value), _verdict(g)] for g in Results.read(results).gates]
    return header, rows


def _verdict(gate: Gate) -> str:
    if gate.passed is None:
        return "not evaluated"
    if gate.status == "not evaluated":  # (--medhelm-require-calibrated, judge prompts that differ: fails the run)
        return f"NOT EVALUATED ({gate.reason})" if gate.reason else "NOT EVALUATED"
    text = "PASS" if gate.passed else "FAIL"
    return f"{text} ({gate.reason})" if gate.reason and not gate.passed else text


def render(header: list[str], rows: list[list[str]], fmt: str = "simple") -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=header, tablefmt=fmt, disable_numparse=True)


def terminal_sections(results: Results | Mapping[str, Any]) -> list[tuple[str, str]]:
    results = Results.read(results)
    sections = [("benchmarks (normalized score, 95% CI)", render(*benchmark_table(results))),
                ("categories (macro-average of benchmarks)", render(*category_table(results))),
                ("leaderboard", render(*leaderboard_table(results)))]
    if results.gates:
        sections.append(("gates", render(*gate_table(results))))
    if results.jury_agreement:
        from pytest_medhelm.report.agreement import agreement_table

        sections.append((f"jury agreement (judge prompts {results.run.jury_prompts or 'unknown'})",
                         render(*agreement_table(results))))
    if results.rubric_breakdown:
        from pytest_medhelm.report.rubric_breakdown import breakdown_table

        sections.append(("HealthBench themes and axes (reference scoring: clipped mean)",
                         render(*breakdown_table(results))))
    if results.run.length_adjustment is not None:
        from pytest_medhelm.report.length_adjustment import length_table, length_title

        sections.append((length_title(results.run.length_adjustment), render(*length_table(results.benchmarks))))
    if any(row.grader_agreement is not None for row in results.benchmarks):
        from pytest_medhelm.report.grader_agreement import TITLE, grader_table

        sections.append((TITLE, render(*grader_table(results.benchmarks))))
    return sections


def markdown(results: Results | Mapping[str, Any], extra_sections: Sequence[str] = ()) -> str:
    """The PR-comment summary; ``extra_sections`` are other plugins' Markdown (the comparison with a baseline)."""
    results = Results.read(results)
    gates = results.gates
    failed = [g for g in gates if g.passed is False]
    unevaluated = [g for g in gates if g.passed is None]
    lines = ["## MedHELM results", ""]
    from pytest_medhelm.report.generation_cap import cap_note

    run = results.run
    cap = cap_note(run.generation_cap)
    if cap:  # (first: every score below is read under it)
        lines += [f"**{cap}**", ""]
    from pytest_medhelm.report.reasoning import ran_out_lines, reasoning_note

    reasoning = reasoning_note(run.reasoning)
    if reasoning:
        lines += [f"**{reasoning}**", "", *(f"- {line.removeprefix('medhelm: ')}"
                                            for line in ran_out_lines(results.models, run.reasoning)), ""]
    if gates:
        verdict = "all gates pass" if not failed else f"{len(failed)} of {len(gates)} gates fail"
        if unevaluated:
            verdict += f"; {len(unevaluated)} not evaluated (deselected)"
        lines += [f"**{'✅' if not failed else '❌'} {verdict}**", ""]
    if not results.instances:
        lines += ["**Nothing was measured**: no medhelm item produced a score.", ""]
    lines += ["### Leaderboard", "", render(*leaderboard_table(results), fmt="github"), "",
              "### Categories", "", render(*category_table(results), fmt="github"), "",
              "### Benchmarks", "", render(*benchmark_table(results), fmt="github"), ""]
    if gates:
        lines += ["### Gates", "", render(*gate_table(results), fmt="github"), ""]
    if results.jury_agreement:
        from pytest_medhelm.report.agreement import agreement_table

        lines += ["### Jury agreement", "",
                  f"Judge prompts: {run.jury_prompts or 'unknown'}. ICC(3,k) and Krippendorff's "
                  "alpha (interval) over each judge's mean score per instance.", "",
                  render(*agreement_table(results), fmt="github"), ""]
    if run.length_adjustment is not None:
        from pytest_medhelm.report.length_adjustment import length_table, length_title

        lines += [f"### {length_title(run.length_adjustment)}", "",
                  render(*length_table(results.benchmarks), fmt="github"), ""]
    if any(row.grader_agreement is not None for row in results.benchmarks):
        from pytest_medhelm.report.grader_agreement import TITLE, grader_table

        lines += [f"### {TITLE[0].upper()}{TITLE[1:]}", "", render(*grader_table(results.benchmarks), fmt="github"),
                  ""]
    lines += list(extra_sections)
    prompts = f", judge prompts {run.jury_prompts}" if run.jury_prompts else ""
    lines += [f"<sub>pytest-medhelm {run.plugin_version}, compat={run.compat}{prompts}, "
              f"commit {run.git_commit or 'n/a'}</sub>", ""]
    return "\n".join(lines)
