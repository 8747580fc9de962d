"""The judges' agreement per benchmark with a jury, for every report: the ``jury_agreement`` records of the results
JSON (computed from the instance records by :func:`pytest_medhelm.jury.agreement.judge_agreement`) and the table the
terminal, the Markdown summary and the HTML report show.

One record per (benchmark, model) whose instances carry a jury verdict: ICC(3,k) and Krippendorff's alpha
(interval) over the judges' per-instance composite scores, the instances every judge graded, and each judge's
failures. With fewer than two judges there is nothing to agree on: the record says so (``note``) instead of
showing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.records import InstanceRecord, JuryAgreementRow, Results, section

NEEDS_TWO = "agreement needs two judges"


def _jury_of(record: InstanceRecord) -> Mapping[str, Any] | None:
    jury = (record.metrics or {}).get("jury")
    return jury if isinstance(jury, Mapping) else None


def jury_agreement_records(records: Sequence[InstanceRecord | Mapping[str, Any]],
                           judges: Sequence[str]) -> list[JuryAgreementRow]:
    """A ``jury_agreement`` record per (benchmark, model) with jury verdicts, in the order first seen.

    ``judges`` are the run's judges: a judge that was never asked still counts (its failures are 0), and with
    fewer than two the agreement is not computed.
    """
    from pytest_medhelm.report.aggregate import instance_records

    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in instance_records(records):
        jury = _jury_of(record)
        if jury is not None:
            groups.setdefault((record.benchmark, record.model), []).append(jury)
    if not groups:
        return []
    from pytest_medhelm.jury.agreement import judge_agreement  # numpy: only when a run has a jury

    out = []
    for (benchmark, model), juries in sorted(groups.items()):
        stats = judge_agreement(juries)
        names = list(dict.fromkeys([*judges, *stats["judges"]]))
        row = JuryAgreementRow(
            benchmark=benchmark, model=model, judges=names, n_instances=stats["n_instances"],
            n_complete=stats["n_complete"], icc3k=stats["icc3k"], icc3_1=stats["icc3_1"],
            alpha_interval=stats["alpha_interval"],
            failures={judge: stats["failures"].get(judge, 0) for judge in names},
            judge_means={judge: stats["judge_means"].get(judge) for judge in names},
            flagged=stats["flagged"], per_criterion=stats["per_criterion"], note=None)
        if len(names) < 2:
            row.icc3k = row.icc3_1 = row.alpha_interval = None
            row.per_criterion, row.note = {}, NEEDS_TWO
        out.append(row)
    return out


def _short(judge: str) -> str:
    return judge.rsplit("/", 1)[-1]


def agreement_table(results: Results | Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """benchmark, model, judges, instances graded by all, ICC(3,k), alpha, failures per judge."""
    header = ["benchmark", "model", "judges", "graded by all", "ICC(3,k)", "alpha", "judge failures"]
    rows = []
    for r in section(results, "jury_agreement"):
        failures = ", ".join(f"{_short(j)}: {n}" for j, n in r.failures.items()) or "-"
        icc, alpha = (r.note, "-") if r.note else (fixed(r.icc3k), fixed(r.alpha_interval))
        rows.append([r.benchmark, r.model, str(len(r.judges)), f"{r.n_complete}/{r.n_instances}", icc, alpha,
                     failures])
    return header, rows
