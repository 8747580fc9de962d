"""``healthbench_meta``'s figures: the rubric grader against physicians, as simple-evals' meta-evaluation computes
them, on a benchmark row's ``grader_agreement`` and in every report.

Each scored record of the benchmark carries the grader's verdict and the row's physician labels
(``metrics["meta_eval"]``, :mod:`pytest_medhelm.metrics.healthbench_meta`). Over the scored rows of a benchmark ×
grader: the grader compared, on every row, with each physician's label (every pair counts once): precision, recall
and F1 per class (met, not met), their mean the **macro-F1** (HealthBench's reported meta-evaluation score); the
**agreement**, the share of agreeing pairs; per category the macro-F1; and beside them the physicians' own
macro-F1 against each other on the same rows (the mean over the physicians where it is defined), the bar a grader
is held to (:func:`pytest_medhelm.jury.healthbench_meta.pairwise_f1`). A rows' sample (``--medhelm-max-instances``)
measures both on the sample.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import Field

from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.record_base import Record, about, many

META_EVAL = "meta_eval"


class GraderAgreement(Record):
    """``benchmarks[].grader_agreement`` (healthbench_meta): the rubric grader against physicians."""

    grader: str = Field(description="the grader measured (the row's model)")
    instrument: str | None = about("the grader prompt's source (simple-evals@5e623c2)")
    template_sha256: str | None = about("sha256 of the grader prompt template (UTF-8): the calibration's prompt hash")
    macro_f1: float | None = about("the grader's pairwise macro-F1 against the physicians (mean of F1 met and not "
                                   "met); null: a class never said or never labelled")
    f1_met: float | None = about("F1 of the class 'met'")
    f1_not_met: float | None = about("F1 of the class 'not met'")
    agreement: float | None = about("the share of (grader, physician) pairs that agree")
    physician_macro_f1: float | None = about("the physicians' macro-F1 against each other on the same rows (mean "
                                             "over the physicians where defined)")
    n_rows: int = about("rows with a grader verdict", 0)
    n_pairs: int = about("(grader, physician) pairs", 0)
    n_physicians: int = about("physicians on those rows", 0)
    by_category: dict[str, dict[str, Any]] = many("per category: macro_f1 and n_pairs", dict)


def _rows(records: Iterable[Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        meta = (rec.metrics or {}).get(META_EVAL)
        if rec.score is not None and isinstance(meta, dict):
            grouped[(rec.benchmark, rec.model)].append(meta)
    return grouped


def grader_agreement(grader: str, metas: Sequence[dict[str, Any]]) -> GraderAgreement:
    """The figures of one grader over its rows' ``meta_eval`` records."""
    from pytest_medhelm.jury.healthbench_meta import LabelledRow, agreement

    rows = [LabelledRow(i, str(m.get("category", "")), tuple(bool(x) for x in m["labels"]),
                        tuple(str(p) for p in m["physicians"])) for i, m in enumerate(metas)]
    found = agreement(rows, {i: bool(m["verdict"]) for i, m in enumerate(metas)})
    model = found["model"] or {}
    pairs = [(bool(m["verdict"]), label) for m in metas for label in m["labels"]]
    return GraderAgreement(
        grader=grader, instrument=metas[0].get("instrument"), template_sha256=metas[0].get("template_sha256"),
        macro_f1=model.get("f1_balanced"), f1_met=model.get("f1_pos"), f1_not_met=model.get("f1_neg"),
        agreement=sum(a == b for a, b in pairs) / len(pairs) if pairs else None,
        physician_macro_f1=found["physician_f1_balanced_mean"], n_rows=len(rows), n_pairs=model.get("n_pairs", 0),
        n_physicians=found["n_physicians"],
        by_category={c: {"macro_f1": f["f1_balanced"], "n_pairs": f["n_pairs"]}
                     for c, f in (model.get("by_category") or {}).items()})


def add_grader_agreement(results: Any, records: Sequence[Any]) -> None:
    """Each healthbench_meta row's ``grader_agreement``, from its scored records."""
    grouped = _rows(records)
    for row in results.benchmarks:
        metas = grouped.get((row.slug, row.model))
        if metas:
            row.grader_agreement = grader_agreement(row.model, metas)


TITLE = "rubric grader vs physicians (HealthBench meta-evaluation, pairwise macro-F1 as simple-evals)"


def grader_table(benchmarks: Iterable[Any]) -> tuple[list[str], list[list[str]]]:
    header = ["benchmark", "grader", "rows", "macro-F1", "F1 met", "F1 not met", "agreement",
              "physicians' macro-F1", "prompt sha256"]
    rows = []
    for row in benchmarks:
        a = row.grader_agreement
        if a is None:
            continue
        rows.append([row.slug, a.grader, str(a.n_rows), fixed(a.macro_f1), fixed(a.f1_met), fixed(a.f1_not_met),
                     fixed(a.agreement), fixed(a.physician_macro_f1), (a.template_sha256 or "-")[:12]])
    return header, rows
