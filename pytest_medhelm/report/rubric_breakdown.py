"""HealthBench's theme and axis breakdowns, as its reference reports them, and who graded a rubric-graded run.

Each scored HealthBench instance graded the reference's way carries ``metrics.tag_scores`` (its score for each of its
``example_tags`` and for each rubric tag whose criteria have a positive point). Per benchmark x model x tag, the
breakdown is the mean of those scores over the instances that have the tag, clipped to [0, 1], with the bootstrap
standard deviation of the clipped mean and the count, as simple-evals aggregates its ``theme:*`` and ``axis:*``
metrics. Under ``--medhelm-compat medhelm`` medhelm 0.8.0 reports none: the instances carry no tag scores.

The results JSON gets ``rubric_breakdown``: a list of ``{"benchmark", "model", "tag", "kind", "n", "mean",
"bootstrap_std"}`` (``kind`` ``"theme"`` or ``"axis"``, sorted by benchmark, model, kind, tag), and
``run.rubric_graders``: per rubric-graded benchmark, the instrument whose prompts were sent and who graded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pytest_medhelm.report.formatting import fixed
from pytest_medhelm.report.records import InstanceRecord, Results, RubricBreakdownRow, RubricGraders, section

#: the tag prefixes the reference's breakdowns report, and the kind each names
KINDS: dict[str, Literal["theme", "axis"]] = {"theme:": "theme", "axis:": "axis"}


def _kind(tag: str) -> Literal["theme", "axis"] | None:
    for prefix, kind in KINDS.items():
        if tag.startswith(prefix):
            return kind
    return None


def rubric_breakdown(records: Iterable[InstanceRecord]) -> list[RubricBreakdownRow]:
    """The theme and axis rows of the scored records that carry tag scores."""
    from pytest_medhelm.jury.rubric_scoring import clipped_bootstrap_std, clipped_mean

    values: dict[tuple[str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for rec in records:
        if rec.score is None:
            continue
        tags = (rec.metrics or {}).get("tag_scores")
        if not isinstance(tags, Mapping):
            continue
        for tag, score in tags.items():
            if _kind(str(tag)) is not None and isinstance(score, (int, float)) and not isinstance(score, bool):
                values[(rec.benchmark, rec.model, str(tag))].append((str(rec.instance_id), float(score)))
    rows = []
    for (slug, model, tag), scored in values.items():
        ordered = [score for _id, score in sorted(scored)]  # a fixed order: xdist and shards give the same figures
        kind = _kind(tag)
        assert kind is not None  # (only tags of a kind were kept)
        rows.append(RubricBreakdownRow(benchmark=slug, model=model, tag=tag, kind=kind, n=len(ordered),
                                       mean=clipped_mean(ordered), bootstrap_std=clipped_bootstrap_std(ordered)))
    return sorted(rows, key=lambda r: (r.benchmark, r.model, r.kind, r.tag))


def rubric_graders(records: Iterable[InstanceRecord], graded: Sequence[str]) -> dict[str, RubricGraders]:
    """Per rubric-graded benchmark: the instruments its records were graded with and the graders that graded."""
    out = {slug: RubricGraders(instruments=[], graders=[]) for slug in graded}
    for rec in records:
        entry = out.get(rec.benchmark)
        rubric = (rec.metrics or {}).get("rubric")
        if entry is None or not isinstance(rubric, Mapping):
            continue
        if rubric.get("instrument") and rubric["instrument"] not in entry.instruments:
            entry.instruments.append(rubric["instrument"])
        names = [rubric["grader"]] if rubric.get("grader") else list(rubric.get("per_judge") or {})
        entry.graders.extend(name for name in names if name not in entry.graders)
    return out


def add_rubric_sections(results: Results, records: Sequence[InstanceRecord]) -> None:
    """``rubric_breakdown`` and ``run.rubric_graders`` into the results, when some record was rubric-graded."""
    graded = sorted({rec.benchmark for rec in records if isinstance((rec.metrics or {}).get("rubric"), Mapping)})
    if not graded:
        return
    results.rubric_breakdown = rubric_breakdown(records)
    results.run.rubric_graders = rubric_graders(records, graded)


def breakdown_table(results: Results | Mapping[str, object]) -> tuple[list[str], list[list[str]]]:
    """The breakdown as a table (terminal, Markdown, HTML)."""
    header = ["benchmark", "model", "kind", "tag", "n", "mean (clipped)", "bootstrap std"]
    rows = [[r.benchmark, r.model, r.kind, r.tag.split(":", 1)[1], str(r.n), fixed(r.mean), fixed(r.bootstrap_std)]
            for r in section(results, "rubric_breakdown")]
    return header, rows
