"""The report rendered: the view records of views.py and charts.py through the package's Jinja2 templates.

Autoescaping is on for every template, so any text from the run (answers, model names, benchmark data) is escaped
wherever a template writes it. Three things go into the page unescaped, each safe by construction: the style sheet
and the script (files of this package), and the drill-down's JSON blocks (``script_json``, which leaves no ``<``,
``>`` or ``&`` in them). The page's Content-Security-Policy allows that one style sheet and that one script by
their sha256 hashes, and nothing else: no other script or style runs, nothing is fetched.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pytest_medhelm.report.html.charts import CategoryChart, CostChart, Heatmap, category_chart, cost_chart, heatmap
from pytest_medhelm.report.html.verdicts import MAX_TEXT
from pytest_medhelm.report.html.views import (
    BenchmarkInstances,
    GateRow,
    ModelSummary,
    RunFacts,
    TextTable,
    benchmark_instances,
    benchmark_scores,
    category_order,
    category_scores,
    gate_rows,
    grader_agreement,
    jury_agreement,
    length_adjusted,
    model_names,
    model_summaries,
    results_mapping,
    rubric_breakdown,
    run_benchmarks,
    run_facts,
    script_json,
)

#: rows of the instance table built at a time (then "show more")
PAGE_ROWS = 500
PACKAGE = "pytest_medhelm.report.html"


@dataclass(frozen=True)
class ReportView:
    """Everything the page shows, as the templates read it."""

    title: str
    run: RunFacts
    leaderboard: list[ModelSummary]
    heatmap: Heatmap | None
    categories: CategoryChart | None
    cost: CostChart | None
    cost_missing: list[str]  # the models the cost chart leaves out, and why
    cost_uses_win: bool
    gates: list[GateRow]
    jury_agreement: TextTable | None
    rubric_breakdown: TextTable | None
    length_adjusted: tuple[str, TextTable] | None
    grader_agreement: TextTable | None
    benchmarks: list[BenchmarkInstances]
    holds_texts: bool
    report_text_how: str
    page_rows: int


@dataclass(frozen=True)
class Asset:
    """A style sheet or script of the package, inlined, and the CSP source that allows exactly it."""

    text: Markup
    csp_source: str


def _asset(name: str) -> Asset:
    text = (resources.files(PACKAGE) / "static" / name).read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return Asset(Markup(text), f"'sha256-{digest}'")  # (our own file: nothing from the run is in it)


@functools.cache
def assets() -> tuple[Asset, Asset]:
    """The style sheet and the script."""
    return _asset("report.css"), _asset("report.js")


def content_security_policy(style: Asset, script: Asset) -> str:
    return (f"default-src 'none'; style-src {style.csp_source}; script-src {script.csp_source}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def _coord(value: float) -> str:
    """An SVG coordinate: at most one decimal, no trailing zero."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _script_data(value: Any) -> Markup:
    """A value as JSON for a ``<script type="application/json">`` block: ``script_json`` escapes ``<``, ``>`` and
    ``&``, so the text cannot end its block or start markup, and goes in as it is (HTML escaping would corrupt
    it: a script's text is not HTML)."""
    return Markup(script_json(value))


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader(PACKAGE, "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(coord=_coord, script_data=_script_data, thousands="{:,}".format)
    return env


def build_view(results: Any, *, title: str = "MedHELM results", max_text: int = MAX_TEXT,
               page_rows: int = PAGE_ROWS) -> ReportView:
    """The report's records, from the run's results."""
    from pytest_medhelm.report.texts import HOW

    data = results_mapping(results)
    models, benches = model_names(data), run_benchmarks(data)
    leaderboard = model_summaries(data)
    cats = category_scores(data)
    order = category_order()
    categories = sorted({c.category for c in cats}, key=lambda c: (order.get(c, len(order)), c))
    use_win = sum(1 for m in leaderboard if m.win_rate is not None) >= 2
    y_label = "win rate" if use_win else "macro-average score"
    plotted, missing = [], []
    for m in leaderboard:
        if m.total_cost is None or (m.win_rate if use_win else m.macro_avg) is None:
            missing.append(f"{m.model} ({'cost unknown' if m.total_cost is None else 'no ' + y_label})")
        else:
            plotted.append(m)
    instances = benchmark_instances(data, max_text)
    return ReportView(
        title=title, run=run_facts(data), leaderboard=leaderboard,
        heatmap=heatmap(models, benches, benchmark_scores(data)) if benches and models else None,
        categories=category_chart(models, categories, cats) if cats and models else None,
        cost=cost_chart(models, plotted, use_win) if plotted else None, cost_missing=missing,
        cost_uses_win=use_win, gates=gate_rows(data), jury_agreement=jury_agreement(data),
        rubric_breakdown=rubric_breakdown(data), length_adjusted=length_adjusted(data),
        grader_agreement=grader_agreement(data), benchmarks=instances,
        holds_texts=any(i.question is not None or i.reference is not None for b in instances for i in b.instances),
        report_text_how=HOW, page_rows=int(page_rows))


def render_html(results: Any, *, title: str = "MedHELM results", max_text: int = MAX_TEXT,
                page_rows: int = PAGE_ROWS) -> str:
    """The whole report as one HTML string (no external resource of any kind)."""
    view = build_view(results, title=title, max_text=max_text, page_rows=page_rows)
    style, script = assets()
    return environment().get_template("report.html.j2").render(
        view=view, style=style.text, script=script.text,
        csp=Markup(content_security_policy(style, script)))  # (ours: keywords and base64 hashes, no '"' or '<')


def write_html(results: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Write the report atomically (a temporary file beside it, then a rename): never a half-written page."""
    from pytest_medhelm.report.texts import open_report

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open_report(tmp, results_mapping(results)) as fh:  # (0600 when it holds instance texts: patient data)
            fh.write(render_html(results, **kwargs))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
