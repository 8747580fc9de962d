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
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

#: the tag prefixes the reference's breakdowns report, and the kind each names
KINDS = {"theme:": "theme", "axis:": "axis"}


def _kind(tag: str) -> str | None:
    for prefix, kind in KINDS.items():
        if tag.startswith(prefix):
            return kind
    return None


def rubric_breakdown(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The theme and axis rows of the scored records that carry tag scores."""
    from pytest_medhelm.jury.rubric_scoring import clipped_bootstrap_std, clipped_mean

    values: dict[tuple[str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for rec in records:
        if rec.get("score") is None:
            continue
        tags = (rec.get("metrics") or {}).get("tag_scores")
        if not isinstance(tags, Mapping):
            continue
        for tag, score in tags.items():
            if _kind(str(tag)) is not None and isinstance(score, (int, float)) and not isinstance(score, bool):
                values[(rec["benchmark"], rec["model"], str(tag))].append((str(rec.get("instance_id")), float(score)))
    rows = []
    for (slug, model, tag), scored in values.items():
        ordered = [score for _id, score in sorted(scored)]  # a fixed order: xdist and shards give the same figures
        rows.append({"benchmark": slug, "model": model, "tag": tag, "kind": _kind(tag), "n": len(ordered),
                     "mean": clipped_mean(ordered), "bootstrap_std": clipped_bootstrap_std(ordered)})
    return sorted(rows, key=lambda r: (r["benchmark"], r["model"], r["kind"], r["tag"]))


def rubric_graders(records: Iterable[Mapping[str, Any]], graded: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per rubric-graded benchmark: the instruments its records were graded with and the graders that graded."""
    out: dict[str, dict[str, Any]] = {slug: {"instruments": [], "graders": []} for slug in graded}
    for rec in records:
        entry = out.get(rec.get("benchmark"))
        rubric = (rec.get("metrics") or {}).get("rubric")
        if entry is None or not isinstance(rubric, Mapping):
            continue
        if rubric.get("instrument") and rubric["instrument"] not in entry["instruments"]:
            entry["instruments"].append(rubric["instrument"])
        names = [rubric["grader"]] if rubric.get("grader") else list(rubric.get("per_judge") or {})
        entry["graders"].extend(name for name in names if name not in entry["graders"])
    return out


def add_rubric_sections(results: dict[str, Any], records: Sequence[Mapping[str, Any]]) -> None:
    """``rubric_breakdown`` and ``run.rubric_graders`` into the results, when some record was rubric-graded."""
    graded = sorted({rec["benchmark"] for rec in records
                     if isinstance((rec.get("metrics") or {}).get("rubric"), Mapping)})
    if not graded:
        return
    results["rubric_breakdown"] = rubric_breakdown(records)
    results["run"]["rubric_graders"] = rubric_graders(records, graded)


def breakdown_table(results: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The breakdown as a table (terminal, Markdown, HTML)."""
    header = ["benchmark", "model", "kind", "tag", "n", "mean (clipped)", "bootstrap std"]
    rows = [[r["benchmark"], r["model"], r["kind"], r["tag"].split(":", 1)[1], str(r["n"]),
             "-" if r["mean"] is None else f"{r['mean']:.3f}",
             "-" if r["bootstrap_std"] is None else f"{r['bootstrap_std']:.3f}"]
            for r in results.get("rubric_breakdown") or ()]
    return header, rows
