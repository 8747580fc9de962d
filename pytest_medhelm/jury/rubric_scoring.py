"""HealthBench's rubric scores from the grader's verdicts: the reference's formula and medhelm 0.8.0's.

Pure functions of the rubric items and the verdicts, so that each formula can be checked by hand.

**Reference** (simple-evals ``calculate_score``): an example's score is the sum of the points of the criteria met
(a negative criterion met subtracts) over the sum of the positive points; it can be negative, and above 1 never
(only positive points are in the denominator). Per tag, the same over the criteria carrying the tag (``axis:*``),
or the example's score for each of its ``example_tags`` (``theme:*``); a tag whose criteria have no positive point
has no score. The benchmark's score is the mean over examples clipped to [0, 1] (:mod:`pytest_medhelm.report`).

**medhelm 0.8.0** (``health_bench_annotator.calculate_score``): a negative criterion's points p become 10 + p and
count in the denominator too; the verdicts a judge returned are zipped with the criteria from the first one, so a
dropped verdict shifts the later ones onto earlier criteria and the last criteria go ungraded; a verdict is met
when ``str(criteria_met).lower() == "true"``. No clipping.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_medhelm.jury.grader_reply import fork_met

#: the length adjustment of simple-evals PR #108 (HealthBench Professional's paper, section 4.1): a score moves by
#: this much per 500 characters of answer away from the centre, down above it and up below it
LENGTH_CENTER_CHARS = 2000
LENGTH_PENALTY_PER_500_CHARS = 0.0147
LENGTH_RULE = ("score - penalty_per_500_chars * (answer_chars - center_chars) / 500, per example, linear in the "
               "answer's characters (Python len), a bonus below the centre as a penalty above it, not clipped; the "
               "benchmark's length_adjusted is the mean of these aggregated as its raw score is (HealthBench's "
               "reference: clipped to [0, 1])")


def length_adjusted(score: float, answer: str) -> float:
    """simple-evals' length-adjusted example score: ``score - 0.0147 * (len(answer) - 2000) / 500``."""
    return score - LENGTH_PENALTY_PER_500_CHARS * (len(answer) - LENGTH_CENTER_CHARS) / 500


def points_of(item: Mapping[str, Any]) -> float:
    """A rubric item's points (the data loader has checked that they are a finite number)."""
    return float(item["points"])


def reference_score(points: Sequence[float], met: Sequence[bool]) -> float | None:
    """simple-evals' example score; None when no criterion has positive points."""
    if len(points) != len(met):
        raise ValueError(f"{len(points)} criteria but {len(met)} verdicts")
    possible = math.fsum(p for p in points if p > 0)
    if possible == 0:
        return None
    return math.fsum(p for p, m in zip(points, met) if m) / possible


def reference_tag_scores(example_tags: Sequence[str], items: Sequence[Mapping[str, Any]],
                         met: Sequence[bool], overall: float) -> dict[str, float]:
    """The reference's per-tag scores of one example: each example tag gets the example's score; each rubric tag
    the score over the criteria carrying it (left out when they have no positive point)."""
    scores = {tag: overall for tag in example_tags}
    by_tag: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for item, verdict in zip(items, met):
        for tag in dict.fromkeys(item.get("tags") or ()):  # a tag repeated on one item counts once
            by_tag[tag].append((points_of(item), verdict))
    for tag, graded in by_tag.items():
        score = reference_score([p for p, _m in graded], [m for _p, m in graded])
        if score is not None:
            scores[tag] = score
    return scores


def rectified(points: float) -> float:
    """medhelm 0.8.0's points: 10 + p for a negative p."""
    return 10 + points if points < 0 else points


def fork_score(points: Sequence[float], verdicts: Sequence[Mapping[str, Any]]) -> float | None:
    """medhelm 0.8.0's ``calculate_score`` (the release's: zip without ``strict``): None when the rectified points
    sum to 0 (the fork's ``float(None)`` then fails the instance)."""
    rect = [rectified(p) for p in points]
    total = math.fsum(rect)
    if total == 0:
        return None
    return math.fsum(r for r, verdict in zip(rect, verdicts) if fork_met(verdict)) / total


def clipped_mean(values: Sequence[float]) -> float | None:
    """The reference's benchmark score: the mean clipped to [0, 1]."""
    if not values:
        return None
    return min(1.0, max(0.0, math.fsum(values) / len(values)))


def clipped_bootstrap_std(values: Sequence[float], resamples: int = 1000, seed: int = 0) -> float | None:
    """The reference's ``bootstrap_std``: the standard deviation of the clipped means of ``resamples`` resamples
    (a fixed seed here, so that a run and its shards merged give the same figure)."""
    if not values:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.clip(data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1), 0.0, 1.0)
    return float(np.std(means))
