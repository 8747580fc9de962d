"""Terminal tables and the Markdown summary, shaped like the paper's: benchmark × model, category × model, and the
Table 1 leaderboard (win rate, Win SD, macro-average, SD), then the gates' verdicts."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping, Sequence

from pytest_medhelm.catalogue.taxonomy import CATEGORIES
from pytest_medhelm.cost import model_row_costs


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _models(results: Mapping[str, Any]) -> list[str]:
    return list(results["run"]["models"]) or sorted({r["model"] for r in results["benchmarks"]})


def benchmark_table(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    models = _models(results)
    cells = {(r["slug"], r["model"]): r for r in results["benchmarks"]}
    slugs = list(dict.fromkeys(r["slug"] for r in results["benchmarks"]))
    header = ["benchmark", "metric"] + models
    rows = []
    for slug in slugs:
        first = next(r for r in results["benchmarks"] if r["slug"] == slug)
        row = [slug, first["metric"]]
        for m in models:
            r = cells.get((slug, m))
            # not-scored items (the metric cannot score them) are shown, never silently left out of n
            not_scored = f" ({r['n_not_scored']} not scored)" if r is not None and r.get("n_not_scored") else ""
            if r is None or r["mean"] is None:
                row.append("-" if r is None else f"- (n=0, {r['n_errors']} err){not_scored}")
                continue
            text = f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] n={r['n']}"
            if r.get("partial"):  # a subset (-k, --lf, a shard, errors, an interruption): not the benchmark's score
                text += f"/{r['n_planned']} partial"
            if r["n_errors"]:
                text += f" ({r['n_errors']} err)"
            row.append(text + not_scored)
        rows.append(row)
    return header, rows


def category_table(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    models = _models(results)
    cells = {(r["category_slug"], r["model"]): r for r in results["categories"]}
    header = ["category"] + models
    rows = []
    for cat in CATEGORIES:
        if not any(key[0] == cat.slug for key in cells):
            continue
        rows.append([cat.name] + [
            _f(cells[(cat.slug, m)]["score"]) + f" ({cells[(cat.slug, m)]['n_benchmarks']})"
            if (cat.slug, m) in cells else "-" for m in models])
    return header, rows


def leaderboard_table(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "win rate", "win SD", "macro avg", "SD", "tokens in", "tokens out", "model cost", "jury cost",
              "total cost"]
    rows = []
    ranked = sorted(results["models"], key=lambda r: (-(r["win_rate"] if r["win_rate"] is not None else -1),
                                                      -(r["macro_avg"] or 0)))
    for r in ranked:
        rows.append([r["model"], _f(r["win_rate"], 2), _f(r["win_sd"], 2), _f(r["macro_avg"]), _f(r["macro_sd"]),
                     str(r["tokens_in"]), str(r["tokens_out"]), *model_row_costs(r)])
    return header, rows


def gate_table(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["gate", "model", "value", "verdict"]
    rows = [[g["spec"], g["model"] or "-", _f(g["value"]), _verdict(g)] for g in results["gates"]]
    return header, rows


def _verdict(gate: Mapping[str, Any]) -> str:
    if gate.get("passed") is None:
        return "not evaluated"
    text = "PASS" if gate["passed"] else "FAIL"
    return f"{text} ({gate['reason']})" if gate.get("reason") and not gate["passed"] else text


def render(header: list[str], rows: list[list[str]], fmt: str = "simple") -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=header, tablefmt=fmt, disable_numparse=True)


def terminal_sections(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    sections = [("benchmarks (normalized score, 95% CI)", render(*benchmark_table(results))),
                ("categories (macro-average of benchmarks)", render(*category_table(results))),
                ("leaderboard", render(*leaderboard_table(results)))]
    if results["gates"]:
        sections.append(("gates", render(*gate_table(results))))
    if results.get("jury_agreement"):
        from pytest_medhelm.report.agreement import agreement_table

        sections.append((f"jury agreement (judge prompts {results['run'].get('jury_prompts') or 'unknown'})",
                         render(*agreement_table(results))))
    if results.get("rubric_breakdown"):
        from pytest_medhelm.report.rubric_breakdown import breakdown_table

        sections.append(("HealthBench themes and axes (reference scoring: clipped mean)",
                         render(*breakdown_table(results))))
    return sections


def markdown(results: Mapping[str, Any], extra_sections: Sequence[str] = ()) -> str:
    """The PR-comment summary; ``extra_sections`` are other plugins' Markdown (the comparison with a baseline)."""
    gates = results["gates"]
    failed = [g for g in gates if g.get("passed") is False]
    unevaluated = [g for g in gates if g.get("passed") is None]
    lines = ["## MedHELM results", ""]
    from pytest_medhelm.report.generation_cap import cap_note

    cap = cap_note(results["run"].get("generation_cap"))
    if cap:  # (first: every score below is read under it)
        lines += [f"**{cap}**", ""]
    if gates:
        verdict = "all gates pass" if not failed else f"{len(failed)} of {len(gates)} gates fail"
        if unevaluated:
            verdict += f"; {len(unevaluated)} not evaluated (deselected)"
        lines += [f"**{'✅' if not failed else '❌'} {verdict}**", ""]
    if not results["instances"]:
        lines += ["**Nothing was measured**: no medhelm item produced a score.", ""]
    lines += ["### Leaderboard", "", render(*leaderboard_table(results), fmt="github"), "",
              "### Categories", "", render(*category_table(results), fmt="github"), "",
              "### Benchmarks", "", render(*benchmark_table(results), fmt="github"), ""]
    if gates:
        lines += ["### Gates", "", render(*gate_table(results), fmt="github"), ""]
    if results.get("jury_agreement"):
        from pytest_medhelm.report.agreement import agreement_table

        lines += ["### Jury agreement", "",
                  f"Judge prompts: {results['run'].get('jury_prompts') or 'unknown'}. ICC(3,k) and Krippendorff's "
                  "alpha (interval) over each judge's mean score per instance.", "",
                  render(*agreement_table(results), fmt="github"), ""]
    lines += list(extra_sections)
    run = results["run"]
    prompts = f", judge prompts {run['jury_prompts']}" if run.get("jury_prompts") else ""
    lines += [f"<sub>pytest-medhelm {run['plugin_version']}, compat={run['compat']}{prompts}, "
              f"commit {run.get('git_commit') or 'n/a'}</sub>", ""]
    return "\n".join(lines)
