"""SCT-Bench's script-concordance scoring (medhelm 0.8.0 ``SCTBenchMetric``, itself SCT-Bench's own ``modeling.py``).

The answer is stripped; the rating is read from the five characters after the first ``"Rating: "``: every match of
``+2``, ``+1``, ``0``, ``-1``, ``-2`` there, joined, read as an integer, kept only when it is one of -2 … +2.
Anything else (no ``"Rating: "``, no match, ``"+1 or -1"`` joined to ``+1-1``) is no rating and scores 0. This is
the benchmark authors' reading, kept in every mode, quirks included: ``"Rating: 1"`` and ``"Rating: 2"`` are no
rating (the unsigned positive digits are not in the pattern), and ``"Rating: 10"`` reads as 0.

Partial credit (``sct_score``, the main metric) = the panel's count for the rating / the panel's largest count (0
when the panel is all zero): 1 for the panel's modal answer, a fraction for a rating fewer experts chose, 0 for one
no expert chose. ``sct_expert_set_membership`` (recorded beside it) = 1 when at least one expert chose the rating.
The panel is the instance's ``extra["expert_distribution"]``: five counts in rating order -2 … +2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

#: the ratings' labels in panel order (medhelm's reference texts)
PANEL_LABELS = ("-2", "-1", "0", "+1", "+2")
_RATING = re.compile(r"\+2|\+1|0|-1|-2")
_MARK = "Rating: "


def parse_rating(answer: str) -> int | None:
    """The rating in ``answer`` as SCT-Bench reads it (module docstring), or None."""
    parts = answer.strip().split(_MARK)
    if len(parts) < 2:
        return None
    digits = "".join(_RATING.findall(parts[1][:5]))
    try:
        rating = int(digits)
    except ValueError:
        return None
    return rating if -2 <= rating <= 2 else None


def partial_credit(panel: Sequence[float], rating: int) -> float:
    """The panel's count for ``rating`` over its largest count; 0 when no expert answered."""
    top = max(panel)
    return panel[rating + 2] / top if top else 0.0


def _label(rating: int) -> str:
    return PANEL_LABELS[rating + 2]


class SctScore:
    name = "sct_score"
    binary = False
    #: a miss is any rating other than the panel's modal one
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        panel = tuple(instance.extra.get("expert_distribution") or ())
        if len(panel) != 5:
            raise ValueError(f"instance {instance.id!r} has no expert distribution of five counts")
        rating = parse_rating(answer)
        counts = ", ".join(f"{label}: {count:g}" for label, count in zip(PANEL_LABELS, panel))
        shown = answer.strip()
        shown = repr(shown if len(shown) <= 60 else shown[:59] + "…")
        if rating is None:
            return Score(0.0, detail=f"no rating (-2 … +2 after 'Rating: ') in {shown}; panel {counts}",
                         extra={"sct_expert_set_membership": 0.0, "rating": None})
        value = partial_credit(panel, rating)
        return Score(
            value,
            detail=f"rated {_label(rating)}: credit {value:.3g} (panel {counts}; modal {instance.expected})",
            extra={"sct_expert_set_membership": 1.0 if panel[rating + 2] > 0 else 0.0, "rating": rating},
        )


SCT_SCORE = SctScore()
