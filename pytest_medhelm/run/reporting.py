"""Aggregate, gate and report, in the process that reports (central, or xdist's controller).

The items' records come in through :meth:`Reporting.add` (from the per-item hooks); once the loop is over they are
aggregated into the results (the JSON contract), thresholds are evaluated, other plugins add their sections and
gates (``pytest_medhelm_results``), and the terminal summary and the files (JSON, Markdown, HTML) are written.
Extra sections of other plugins come through one hook, ``pytest_medhelm_summary_rows``, for the terminal and for
Markdown alike (``fmt``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.context import RunContext

Line = tuple[str, dict[str, bool]]


def now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Reporting:
    def __init__(self, ctx: "RunContext", removed: dict[str, dict[str, int]],
                 sender_lines: Callable[[], list[Line]]) -> None:
        self.ctx = ctx
        self.removed = removed  # benchmark -> reason -> records a loader's filter dropped
        self.sender_lines = sender_lines
        self.records: list[dict[str, Any]] = []
        self.misses: list[tuple[str, str]] = []
        self.results: dict[str, Any] | None = None
        self.gate_failed = False
        self.started = now()

    def add(self, report: pytest.TestReport, record: dict[str, Any]) -> None:
        self.records.append(record)
        if record.get("missed"):
            self.misses.append((report.nodeid, record.get("detail") or ""))

    # ------------------------------------------------------------------------------------------ results
    def finish(self) -> None:
        """Build the results once (gates with nothing scored fail rather than pass silently)."""
        if self.results is not None:
            return
        if self.records or (self.ctx.configured and self.ctx.run_config.thresholds):
            self._build()

    def _build(self) -> None:
        from pytest_medhelm.gitinfo import commit_of
        from pytest_medhelm.report.results import build_results, evaluate_gates

        ctx, rc = self.ctx, self.ctx.run_config
        catalogue = {b.slug: b for b in ctx.registry}
        judged = any(catalogue[r["benchmark"]].is_judged for r in self.records if r["benchmark"] in catalogue)
        results = build_results(self.records, catalogue, models=rc.models, judges=ctx.judge_names() if judged else [],
                                options=rc.public_options(), started=self.started, finished=now(),
                                compat=rc.compat, commit=commit_of(Path(str(ctx.config.rootpath))))
        if rc.prices is not None:
            from pytest_medhelm.cost import apply_file_prices

            apply_file_prices(results, ctx.prices, {m: ctx.model_spec(m).litellm_model for m in rc.models})
        results["run"]["filtered"] = {slug: reasons for slug, reasons in sorted(self.removed.items()) if reasons}
        if ctx.budget is not None:
            results["run"]["budget"] = ctx.budget.as_json()
        if rc.shard is None:  # a shard holds part of each benchmark: thresholds are checked on the merged run
            evaluate_gates(results, rc.thresholds)
        # plugins (comparisons with a baseline, cost, reports) may add sections and gates of their own
        ctx.config.hook.pytest_medhelm_results(results=results, config=ctx.config)
        self.gate_failed = any(not g["passed"] for g in results["gates"])
        self.results = results

    def extra_sections(self, fmt: str) -> list[tuple[str, str]]:
        sections: list[tuple[str, str]] = []
        for extra in self.ctx.config.hook.pytest_medhelm_summary_rows(results=self.results, config=self.ctx.config,
                                                                      fmt=fmt):
            sections.extend(extra or [])
        return sections

    # ------------------------------------------------------------------------------------------ terminal
    def terminal_summary(self, tr: Any, config: pytest.Config) -> None:
        lines = list(self.sender_lines())
        budget = self.ctx.budget if self.ctx.configured else None
        if budget is not None:
            lines.append((budget.summary(), {"yellow": True} if budget.not_sent else {}))
        if self.results is None and not lines:
            return
        if self.results is not None and self.misses:
            tr.section("medhelm misses", sep="-", yellow=True)
            limit = None if config.option.verbose > 0 else 20
            for nodeid, detail in self.misses[:limit]:
                tr.write_line(f"MISSED {nodeid} - {detail}")
            if limit is not None and len(self.misses) > limit:
                tr.write_line(f"... and {len(self.misses) - limit} more (-v shows all; --lf runs them again)")
        tr.section("medhelm", sep="=", bold=True)
        for line, markup in lines:
            tr.write_line(line, **markup)
        if self.results is None:
            return
        if lines:
            tr.write_line("")
        from pytest_medhelm.report.tables import terminal_sections

        for title, text in terminal_sections(self.results) + self.extra_sections("terminal"):
            tr.write_line(f"{title}:", bold=True)
            for line in text.splitlines():
                tr.write_line(line)
            tr.write_line("")
        gates = self.results["gates"]
        if gates:
            failed = [g for g in gates if not g["passed"]]
            for g in failed:
                value = "no score" if g["value"] is None else f"{g['value']:.3f}"
                tr.write_line(f"medhelm gate FAILED: {g['spec']} for {g['model']}: {value}", red=True, bold=True)
            if not failed:
                tr.write_line(f"medhelm gates: all {len(gates)} passed", green=True, bold=True)

    # ------------------------------------------------------------------------------------------ files
    def write_files(self) -> None:
        if self.results is None and self.records:
            self._build()  # interrupted before the loop ended: still write what was measured
        if self.results is None:
            return
        rc = self.ctx.run_config
        if rc.json_path:
            from pytest_medhelm.report.results import write_json

            write_json(self.results, rc.json_path)
        if rc.html_path:
            from pytest_medhelm.report.html import write_html

            write_html(self.results, rc.html_path)
        if rc.markdown_path:
            from pytest_medhelm.report.tables import markdown

            text = markdown(self.results, [text for _title, text in self.extra_sections("markdown")])
            Path(rc.markdown_path).parent.mkdir(parents=True, exist_ok=True)
            Path(rc.markdown_path).write_text(text, encoding="utf-8")
