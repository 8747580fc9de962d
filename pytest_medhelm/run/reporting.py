"""Aggregate, gate and report, in the process that reports (central, or xdist's controller).

The items' records come in through :meth:`Reporting.add` (from the per-item hooks); once the loop is over they are
aggregated into the results (the JSON contract), thresholds are evaluated, other plugins add their sections and
gates (``pytest_medhelm_results``), and the terminal summary and the files (JSON, Markdown, HTML) are written.
Extra sections of other plugins come through one hook, ``pytest_medhelm_summary_rows``, for the terminal and for
Markdown alike (``fmt``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_medhelm.run.imports_ahead import ImportsAhead
from pytest_medhelm.values import printable

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.report.records import InstanceRecord, Results
    from pytest_medhelm.run.context import RunContext

Line = tuple[str, dict[str, bool]]


def now() -> str:
    from datetime import datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


class Reporting:
    def __init__(self, ctx: RunContext, removed: dict[str, dict[str, int]],
                 sender_lines: Callable[[], list[Line]]) -> None:
        self.ctx = ctx
        self.removed = removed  # benchmark -> reason -> records a loader's filter dropped
        self.sender_lines = sender_lines
        #: one record per item, its last attempt's (a rerun replaces the earlier attempts)
        self._records: dict[str, InstanceRecord] = {}
        self._misses: dict[str, str] = {}
        self.results: Results | None = None
        #: the results as the plain data the hooks were given and read back from (what other plugins see)
        self.data: dict[str, Any] | None = None
        self.gate_failed = False
        #: warning lines: what the results refused of the plugins' hooks (the results built before them are kept)
        self.rejected: list[str] = []
        self.started = now()
        #: the benchmarks with collected items (None: not known) and each one's planned instances per model
        self.selected: set[str] | None = None
        self.planned: dict[str, int] = {}
        self.interrupted = False
        #: files accepted although they differ from their pins (None: this process checked them itself)
        self.data_unverified: dict[str, Any] | None = None
        self._imports = ImportsAhead(("numpy", "numpy.random", "tabulate"), "medhelm-report-imports")
        self._prefetch_at_first_record = False
        #: the summary's lines about the calibration records a healthbench_meta run wrote
        self.calibration_lines: list[str] = []

    def prefetch(self) -> None:
        """While the items run (mostly waiting for their answers), import the libraries that building and printing
        the results needs (numpy for the confidence intervals, 0.1-0.2 s; tabulate), so that the end of the run
        does not wait for them."""
        self._imports.start()

    def prefetch_at_first_record(self) -> None:
        """:meth:`prefetch`, once the first item is done: in a process that sends the answers itself, an import
        before that would hold the interpreter while the sending thread imports its HTTP client and sends its first
        requests (the first request went out 0.04-0.17 s later)."""
        self._prefetch_at_first_record = True

    def _prefetched(self) -> None:
        self._imports.join()

    def add(self, report: pytest.TestReport, record: InstanceRecord) -> None:
        if self._prefetch_at_first_record:
            self._prefetch_at_first_record = False
            self._imports.start()
        self._records.pop(report.nodeid, None)  # (re-inserted: the order is that of the last attempts)
        self._records[report.nodeid] = record
        self._misses.pop(report.nodeid, None)
        if record.missed:
            self._misses[report.nodeid] = record.detail or ""

    @property
    def records(self) -> list[InstanceRecord]:
        return list(self._records.values())

    @property
    def misses(self) -> list[tuple[str, str]]:
        return list(self._misses.items())

    # ------------------------------------------------------------------------------------------ results
    def finish(self) -> None:
        """Build the results once, also when nothing was measured (then the files and the summary say so, and gates
        with nothing scored fail rather than pass silently)."""
        if self.results is None and self.ctx.configured:
            self._build()

    def _build(self) -> None:
        self._prefetched()
        from pytest_medhelm.gitinfo import commit_of
        from pytest_medhelm.report.records import Gate, dump
        from pytest_medhelm.report.results import build_report, evaluate_gates

        ctx, rc = self.ctx, self.ctx.run_config
        # (the definitions of the benchmarks this run has records of or selected: the others' modules stay unread)
        recorded = {r.benchmark for r in self.records}
        wanted = recorded | (self.selected or set())
        catalogue = {slug: ctx.registry.get(slug) for slug in ctx.registry.slugs() if slug in wanted}
        judged = any(catalogue[r.benchmark].is_judged and not _graded(catalogue[r.benchmark])
                     for r in self.records if r.benchmark in catalogue)
        results = build_report(self.records, catalogue, models=rc.models, judges=ctx.judge_names() if judged else [],
                                options=rc.public_options(), started=self.started, finished=now(),
                                compat=rc.compat, commit=commit_of(Path(str(ctx.config.rootpath))),
                                planned=self.planned, interrupted=self.interrupted,
                                jury_prompts=ctx.jury_instrument.name if judged else None,
                                prices=ctx.prices if rc.prices is not None else None,
                                litellm_models={m: ctx.model_spec(m).litellm_model for m in rc.models})
        run = results.run
        run.filtered = {slug: reasons for slug, reasons in sorted(self.removed.items()) if reasons}
        run.data_unverified = (ctx.data_verification.record() if self.data_unverified is None
                               else self.data_unverified)
        if ctx.budget is not None:
            run.budget = ctx.budget.as_json()
        from pytest_medhelm.report.generation_cap import cap_record

        slugs = self.selected if self.selected is not None else recorded
        run.generation_cap = cap_record(rc.max_tokens, (catalogue[s] for s in slugs if s in catalogue))
        run.reasoning = self._reasoning(judged, slugs, catalogue)
        shared = ctx.shared_cache_record()
        if shared is not None:
            from pytest_medhelm.report.shared_cache import SharedCacheState

            run.shared_cache = SharedCacheState(**shared)
        rootdir = Path(str(ctx.config.rootpath))
        if not self.interrupted:  # (healthbench_meta: the grader against physicians, kept for the gates)
            from pytest_medhelm.run.calibration import write_calibration

            self.calibration_lines = write_calibration(results, rootdir)
        if rc.shard is None:
            benchmarks_of: dict[str, set[str]] = {}
            for slug in ctx.registry.slugs():
                benchmarks_of.setdefault(ctx.registry.category_of(slug), set()).add(slug)
            evaluate_gates(results, rc.thresholds, selected=self.selected, benchmarks_of=benchmarks_of,
                           strict=rc.strict_gates)
        else:  # a shard holds part of each benchmark: thresholds are checked on the merged run
            results.gates = [Gate(spec=t.spec, name=t.name, model=m, value=None, threshold=t.value, passed=None,
                                  status="not evaluated",
                                  reason="a shard: checked on the merged run (pytest-medhelm merge --threshold)")
                             for t in rc.thresholds for m in rc.models]
        # plugins (comparisons with a baseline, cost, reports) may add sections and gates of their own, on the
        # results as the JSON contract's data (the hook's contract); read back through the models
        data = dump(results)
        ctx.config.hook.pytest_medhelm_results(results=data, config=ctx.config)
        if rc.require_calibrated:  # (after the plugins' hooks: their compare-fail gates are held to it too)
            from pytest_medhelm.run.calibration import require_calibration

            require_calibration(ctx, data, rootdir)
        self.results, self.data = self._read_back(results, data)
        self.gate_failed = any(g.failed for g in self.results.gates)

    def _reasoning(self, judged: bool, slugs: set[str], catalogue: dict[str, Any]) -> Any:
        """``run.reasoning``: the options and the models, judges and grader of this run treated as reasoning
        models (pytest_medhelm.report.reasoning)."""
        from pytest_medhelm.report.reasoning import reasoning_record

        ctx, rc = self.ctx, self.ctx.run_config
        judges = ctx.judge_specs() if judged else []
        for grader in dict.fromkeys(ctx.grader_name(slug) for slug in sorted(slugs)
                                    if slug in catalogue and _graded(catalogue[slug])):
            judges.append(ctx.judge_spec(grader))
        return reasoning_record(rc.reasoning_budget, rc.reasoning_effort,
                                [ctx.model_spec(name) for name in rc.models], judges)

    def _read_back(self, built: Results, data: dict[str, Any]) -> tuple[Results, dict[str, Any]]:
        """The results as the prices and the plugins' ``pytest_medhelm_results`` hooks left them, read back through
        the models; values the models refuse (a plugin's gate valued "n/a") never abort the run (this runs in the
        test loop's ``finally``, where raising would hide the run's own exception and write no file): the results
        built before the hooks are kept, and a warning names what was refused."""
        from pydantic import ValidationError

        from pytest_medhelm.report.records import Results, dump

        try:
            return Results.read(data), data
        except ValidationError as exc:
            self.rejected.extend(
                f"medhelm: WARNING: a pytest_medhelm_results hook wrote a value the results "
                f"refuse at {'.'.join(map(str, err['loc']))}: {err['msg']}; the results built before the hooks "
                f"are written instead" for err in exc.errors())
        try:
            kept = Results.read(dump(built))
        except ValidationError as exc:  # a header value the run itself set (assignments are not validated)
            self.rejected.extend(f"medhelm: WARNING: the run header refuses its value at "
                                 f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in exc.errors())
            kept = built
        return kept, dump(kept)

    def extra_sections(self, fmt: str) -> list[tuple[str, str]]:
        sections: list[tuple[str, str]] = []
        for extra in self.ctx.config.hook.pytest_medhelm_summary_rows(results=self.data, config=self.ctx.config,
                                                                      fmt=fmt):
            sections.extend(extra or [])
        return sections

    # ------------------------------------------------------------------------------------------ terminal
    def judge_failure_lines(self) -> list[Line]:
        """One line per judge and reason, over every item that got no valid judgement."""
        from collections import Counter

        counts = Counter((judge, reason) for rec in self.records
                         for judge, reason in (rec.judge_failures or {}).items())
        return [(f"medhelm: judge {judge} gave no valid judgement on {n} item{'s' if n != 1 else ''}: {reason}",
                 {"red": True}) for (judge, reason), n in counts.items()]

    def terminal_summary(self, tr: Any, config: pytest.Config) -> None:
        lines = list(self.sender_lines()) + self.judge_failure_lines()
        lines += [(line, {}) for line in self.calibration_lines]
        lines += [(line, {"yellow": True, "bold": True}) for line in self.rejected]
        name = self.results.run.jury_prompts if self.results is not None else None
        if name:
            warning = self.ctx.jury()[1]
            if warning:  # our own rubric scored the open-ended benchmarks: said where the scores are
                lines.insert(0, (warning, {"yellow": True, "bold": True}))
            from pytest_medhelm.report.results import MIXED

            if name.startswith(MIXED):  # (under xdist every process loads the instrument itself)
                lines.insert(0, (f"medhelm: the processes of this run asked the judges from different instruments "
                                 f"({name[len(MIXED):]}: each item's jury_instrument says which); its open-ended "
                                 "scores are not one measurement", {"red": True, "bold": True}))
        if self.results is not None and self.results.run.generation_cap is not None:
            from pytest_medhelm.report.generation_cap import cap_note

            lines.insert(0, (f"medhelm: {cap_note(self.results.run.generation_cap)}", {"yellow": True}))
        if self.results is not None and self.results.run.reasoning is not None:
            from pytest_medhelm.report.reasoning import ran_out_lines, reasoning_note

            reasoning = self.results.run.reasoning
            lines += [(line, {"yellow": True}) for line in ran_out_lines(self.results.models, reasoning)]
            lines.insert(0, (f"medhelm: {reasoning_note(reasoning)}", {}))
        budget = self.ctx.budget if self.ctx.configured else None
        if budget is not None:
            lines.append((budget.summary(), {"yellow": True} if budget.not_sent else {}))
        if (self.results is not None and not lines and not self.results.instances and not self.results.gates
                and not self.selected):
            return  # no medhelm item in this run (other tests, with medhelm options in the ini file): nothing to say
        if self.results is None and not lines:
            return
        if self.results is not None and self.misses:
            tr.section("medhelm misses", sep="-", yellow=True)
            # all of them with -v, or when the short summary lists xfails and the like (-rA, -ra, -rx)
            every = config.option.verbose > 0 or any(c in (config.option.reportchars or "") for c in "Aax")
            limit = None if every else 20
            for nodeid, detail in self.misses[:limit]:
                tr.write_line(printable(f"MISSED {nodeid} - {detail}", keep_breaks=True))
            if limit is not None and len(self.misses) > limit:
                tr.write_line(f"... and {len(self.misses) - limit} more (-v shows all; --lf runs them again)")
        tr.section("medhelm", sep="=", bold=True)
        for line, markup in lines:  # (a server's text among them, a cache's error for one: escaped)
            tr.write_line(printable(line), **markup)
        if self.results is None:
            return
        if lines:
            tr.write_line("")
        if self.results.instances:
            from pytest_medhelm.report.tables import terminal_sections

            for title, text in terminal_sections(self.results) + self.extra_sections("terminal"):
                tr.write_line(f"{title}:", bold=True)
                for line in text.splitlines():
                    tr.write_line(line)
                tr.write_line("")
        else:
            tr.write_line("medhelm: nothing was measured: no medhelm item produced a score "
                          "(see the skip reasons: -rs)", yellow=True, bold=True)
        self._gate_lines(tr)

    def _gate_lines(self, tr: Any) -> None:
        gates = self.results.gates if self.results is not None else []
        if not gates:
            return
        failed = [g for g in gates if g.failed]
        unevaluated = [g for g in gates if g.passed is None]
        for g in failed:
            value = g.reason or "no score" if g.value is None else f"{g.value:.3f}"
            model = f" for {g.model}" if g.model else ""
            if g.status == "not evaluated":  # (one that may not decide: it fails the run, with its reason)
                tr.write_line(f"medhelm gate NOT EVALUATED, failing the run: {g.spec}{model}: {g.reason}", red=True,
                              bold=True)
                continue
            tr.write_line(f"medhelm gate FAILED: {g.spec}{model}: {value}", red=True, bold=True)
        for g in unevaluated:
            tr.write_line(f"medhelm gate NOT EVALUATED: {g.spec} for {g.model}: {g.reason} "
                          "(--medhelm-strict-gates fails it)", yellow=True, bold=True)
        for g in gates:
            if g.partial:
                tr.write_line(f"medhelm gate {g.spec} for {g.model}: read from a partial run (some of its "
                              "benchmarks were scored on fewer instances than their sample)", yellow=True)
        if not failed and not unevaluated:
            tr.write_line(f"medhelm gates: all {len(gates)} passed", green=True, bold=True)
        elif not failed:
            tr.write_line(f"medhelm gates: {len(gates) - len(unevaluated)} passed, {len(unevaluated)} not evaluated",
                          yellow=True, bold=True)

    # ------------------------------------------------------------------------------------------ files
    def write_files(self, interrupted: bool = False) -> None:
        self._prefetched()  # (a session that built no results: no thread outlives it)
        if interrupted:
            self.interrupted = True
            if self.results is not None and self.data is not None:
                self.results.run.interrupted = self.data["run"]["interrupted"] = True
        if self.results is None and (self.records or interrupted):
            self._build()  # interrupted before the loop ended: still write what was measured
        if self.results is None:
            return
        rc = self.ctx.run_config
        if rc.json_path:
            from pytest_medhelm.report.results import write_json

            write_json(self.results, rc.json_path)
        if rc.html_path and self.data is not None:
            from pytest_medhelm.report.html import write_html

            write_html(self.data, rc.html_path)
        if rc.markdown_path:
            from pytest_medhelm.report.tables import markdown

            text = markdown(self.results, [text for _title, text in self.extra_sections("markdown")])
            Path(rc.markdown_path).parent.mkdir(parents=True, exist_ok=True)
            Path(rc.markdown_path).write_text(text, encoding="utf-8")


def _graded(bench: Any) -> bool:
    """A benchmark graded per rubric criterion (HealthBench), not by the jury."""
    return bool(getattr(bench.metric, "rubric_graded", False))
