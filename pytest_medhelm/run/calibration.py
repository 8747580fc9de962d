"""The run's side of calibration records (:mod:`pytest_medhelm.jury.calibration`): a ``healthbench_meta`` run writes
one per grader it measured, and ``--medhelm-require-calibrated`` holds each gate that reads a judged benchmark to
them.

**Which raters a judged benchmark has**, each with the sha256 of the prompt template it is asked with:

* a rubric-graded benchmark (HealthBench, HealthBench Professional): its grader (``--medhelm-grader``, or the
  benchmark's reference grader) and the reference's ``GRADER_TEMPLATE``; under ``--medhelm-compat medhelm`` every
  judge of the jury grades, with medhelm 0.8.0's rubric template;
* a benchmark the jury scores: the jury as one rater (its judges sorted, joined by `` + ``) and the benchmark's
  judge prompt template (HELM's, or our fallback rubric's).

**A gate** (a threshold or a compare-fail gate; one already not evaluated is left as it is) whose benchmarks, category
or ``overall`` include a judged benchmark of its model holds only when every such rater has a calibrated latest
record for its exact prompt hash. Otherwise the gate is *not evaluated*, ``status`` ``"not evaluated"``, with the
reason naming each rater, prompt hash and what was missing, and it fails the run (``passed`` false, exit status 1):
the user asked that an uncalibrated judge decide nothing, and a CI job must not go green on its verdict, as the
compare-fail gates do when the judge prompts of the two runs differ. Each gate it concerns gets ``calibration``: the
raters looked up and what was found.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.report.records import Results
    from pytest_medhelm.run.context import RunContext


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def raters_of(ctx: RunContext, slug: str) -> list[tuple[str, str | None, str]]:
    """(rater, prompt template sha256 or None when unknown, what it is) of a judged benchmark; [] for another."""
    from pytest_medhelm.jury.calibration import jury_rater

    if slug not in ctx.registry:
        return []
    bench = ctx.registry.get(slug)
    if not bench.is_judged:
        return []
    metric = bench.metric
    if getattr(metric, "rubric_graded", False):
        fork = bool(metric.fork_prompts(ctx.run_config.compat))  # type: ignore[attr-defined]  # (rubric-graded)
        prompts = ctx.grader_prompts(fork)
        template = _sha(prompts.fork_rubric if fork else prompts.reference)
        graders = ctx.judge_names() if fork else [ctx.grader_name(slug)]
        return [(grader, template, "grader") for grader in graders]
    prompt = ctx.jury_instrument.prompt_for(slug)
    return [(jury_rater(ctx.judge_names()), _sha(prompt.template) if prompt is not None else None, "jury")]


HINT = ("calibrate a grader with pytest benchmarks --medhelm-benchmark healthbench_meta --medhelm-grader MODEL, a "
        "jury with pytest-medhelm agreement RATINGS.csv --jury-rater NAME --calibration-judge MODEL ... "
        "--calibration-prompt-sha256 HASH (docs/comparing.md)")


def require_calibration(ctx: RunContext, data: dict[str, Any], rootdir: Path) -> None:
    """Each gate of ``data`` (the results as plain data) reading a judged benchmark, held to the records."""
    from pytest_medhelm.jury.calibration import latest, read_all
    from pytest_medhelm.report.results import gate_reads

    records, problems = read_all(rootdir)
    raters: dict[str, list[tuple[str, str | None, str]]] = {}
    for gate in data.get("gates") or []:
        if gate.get("passed") is None:
            continue
        slugs = sorted({row["slug"] for row in data.get("benchmarks") or []
                        if row.get("model") == gate.get("model")
                        and gate_reads(gate.get("name"), row.get("slug"), row.get("category_slug"))})
        looked: list[dict[str, Any]] = []
        missing: list[str] = []
        for slug in slugs:
            for rater, prompt, what in raters.setdefault(slug, raters_of(ctx, slug)):
                found = latest(records, rater, prompt) if prompt is not None else None
                looked.append({"benchmark": slug, "rater": rater, "prompt_sha256": prompt,
                               "record": found.path.name if found is not None and found.path else None,
                               "calibrated": found is not None and found.calibrated})
                if prompt is None:
                    missing.append(f"{slug}: the {what}'s prompt is not known")
                elif found is None:
                    missing.append(f"{slug}: no calibration record for the {what} {rater} with prompt sha256 {prompt}")
                elif not found.calibrated:
                    missing.append(f"{slug}: the {what} {rater} is below the humans' own agreement: "
                                   f"{found.describe()}")
        if not looked:
            continue
        gate["calibration"] = looked
        if missing:
            unreadable = (f"; {len(problems)} file(s) of .medhelm/calibration/ are not records and do not count "
                          f"(first: {problems[0]})") if problems else ""
            gate["passed"], gate["status"] = False, "not evaluated"
            gate["reason"] = ("not evaluated (--medhelm-require-calibrated): " + "; ".join(dict.fromkeys(missing))
                              + unreadable + f"; {HINT}")


def write_calibration(results: Results, rootdir: Path) -> list[str]:
    """A calibration record per healthbench_meta row with a macro-F1; the summary's lines saying where and what."""
    from pytest_medhelm.jury.calibration import CalibrationRecord, write_record

    lines = []
    for row in results.benchmarks:
        found = row.grader_agreement
        if found is None:
            continue
        if found.macro_f1 is None or not found.template_sha256:
            lines.append(f"medhelm: no calibration record for grader {found.grader}: its macro-F1 is undefined "
                         "(a class the grader never said or the physicians never gave)")
            continue
        record = CalibrationRecord(rater=found.grader, prompt_sha256=found.template_sha256, statistic="macro_f1",
                                   value=found.macro_f1, human=found.physician_macro_f1, n=found.n_rows,
                                   source=f"{row.slug} ({row.n} of {row.n_planned or row.n} rows)",
                                   instrument=found.instrument,
                                   created=datetime.now(UTC).isoformat(timespec="seconds"))
        path = write_record(record, rootdir)
        verdict = "calibrated" if record.calibrated else "NOT calibrated (below the physicians' own agreement)"
        lines.append(f"medhelm: calibration record {CALIBRATION_SHOWN}/{path.name}: grader {found.grader}, "
                     f"{record.describe()}: {verdict}")
    return lines


CALIBRATION_SHOWN = ".medhelm/calibration"
