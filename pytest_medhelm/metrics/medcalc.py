"""MedCalc-Bench accuracy (HELM ``MedCalcBenchMetric`` → ``medcalc_bench_accuracy``).

The answer is stripped, then scored by the item's category (``Instance.extra["category"]``), with the limits in
``extra["lower_limit"]`` / ``extra["upper_limit"]`` and the ground truth in ``references[0]``:

* ``risk``, ``severity``, ``diagnosis``: strict string equality with the ground truth (``"4.0"`` is not ``"4"``);
* ``date``: when the ground truth looks like ``('14 weeks', '2 days')``, the answer and both limits are read in
  that format as a number of days, otherwise as ``%m/%d/%Y`` dates; inclusive range check;
* ``dosage conversion``, ``physical``: ``float(answer)`` within ``[float(lower), float(upper)]`` inclusive (no
  unit stripping: ``"12 mg"`` scores 0).

Any answer that does not parse scores 0, with a detail saying why.

Difference from HELM (default; ``compat="helm"`` restores HELM's behaviour):

* HELM raises, and scores 0, for every other category. MedCalc-Bench v1.0, the data HELM loads, names its
  equation-based categories ``lab`` (327 items) and ``dosage`` (40 items), so in HELM those items score 0 whatever
  the answer. By default they are range-checked like ``physical``, which is what MedCalc-Bench itself does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

EXACT_CATEGORIES = ("risk", "severity", "diagnosis")
HELM_RANGE_CATEGORIES = ("dosage conversion", "physical")
#: categories HELM's metric does not know (MedCalc-Bench's own names, "lab test" in some data versions)
CORRECTED_RANGE_CATEGORIES = ("lab", "lab test", "dosage")

_WEEKS_DAYS = re.compile(r"\('(\d+) weeks', '(\d+) days'\)")


class _Unparsable(ValueError):
    pass


def _days(text: str) -> int:
    # re.match, as HELM: the pattern is anchored at the start only
    match = _WEEKS_DAYS.match(text)
    if not match:
        raise _Unparsable(f"{text!r} is not in the form ('X weeks', 'Y days')")
    try:
        weeks, days = map(int, match.groups())
    except ValueError:  # more digits than int() reads (4,300): no gestational age
        raise _Unparsable(f"{_shown(text)} has numbers too long to read") from None
    return weeks * 7 + days


def _date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%m/%d/%Y")
    except ValueError:
        raise _Unparsable(f"{text!r} is not a date in the form MM/DD/YYYY") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _Unparsable(f"{text!r} is not a number") from None


# what a category's bounds and answer read as: days, a date, a number
_Ordered = TypeVar("_Ordered", int, float, datetime)


def _within(read: Callable[[str], _Ordered], lower: str, upper: str, answer: str) -> bool:
    """``answer`` within [``lower``, ``upper``], each read by ``read`` in this order (the first unreadable one is the
    one reported)."""
    low, high, value = read(lower), read(upper), read(answer)
    return low <= value <= high


def _shown(answer: str, limit: int = 60) -> str:
    return repr(answer if len(answer) <= limit else answer[: limit - 1] + "…")


class MedCalcAccuracy:
    name = "medcalc_bench_accuracy"
    binary = True
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        pred = answer.strip()
        gold = instance.references[0] if instance.references else ""
        category = str(instance.extra.get("category", ""))
        lower = str(instance.extra.get("lower_limit", ""))
        upper = str(instance.extra.get("upper_limit", ""))
        extra = {"category": category}

        if category in EXACT_CATEGORIES:
            ok = pred == gold
            return Score(1.0 if ok else 0.0, detail=f"expected {gold!r} exactly ({category}), got {_shown(pred)}",
                         extra=extra)

        range_categories: tuple[str, ...] = HELM_RANGE_CATEGORIES
        if not reproduces_helm(compat):
            range_categories += CORRECTED_RANGE_CATEGORIES
        if category != "date" and category not in range_categories:
            if reproduces_helm(compat) and category in CORRECTED_RANGE_CATEGORIES:
                why = f"HELM's metric does not support this category (--medhelm-compat {compat})"
            else:
                why = "unknown category"
            return Score(0.0, detail=f"category {category!r} scores 0: {why}; got {_shown(pred)}", extra=extra)

        try:
            if category == "date" and _WEEKS_DAYS.match(gold):
                ok = _within(_days, lower, upper, pred)
            elif category == "date":
                ok = _within(_date, lower, upper, pred)
            else:
                ok = _within(_number, lower, upper, pred)
        except _Unparsable as exc:
            return Score(0.0, detail=f"cannot score ({category}): {exc}", extra=extra)
        return Score(
            1.0 if ok else 0.0,
            detail=f"expected {gold!r}, within [{lower}, {upper}] ({category}), got {_shown(pred)}",
            extra=extra,
        )


MEDCALC_ACCURACY = MedCalcAccuracy()
