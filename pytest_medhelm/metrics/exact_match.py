"""HELM's exact-match family: ``exact_match`` and ``quasi_exact_match``, as HELM computes them.

* :class:`MultipleChoiceExactMatch`: the multiple-choice-joint rule. The stripped completion must be exactly one
  of the option letters (``"A."``, ``"a"``, ``"**A**"`` or ``"A) yes"`` are not); the letter is mapped to its option
  text and compared with the correct option's text, so when two options carry the same text either letter counts.
* :class:`GenerationExactMatch`: stripped string equality with any reference.
* :func:`quasi_exact_match`: equality after lowercasing and removing punctuation, articles and extra whitespace;
  recorded in ``Score.extra["quasi_exact_match"]`` beside both metrics, as HELM reports it beside exact_match.

There is no HELM bug here, so ``compat`` changes nothing.
"""

from __future__ import annotations

import re
import string
from typing import TYPE_CHECKING

from pytest_medhelm.metrics.base import Score
from pytest_medhelm.prompting import LETTERS

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _shown(answer: str, limit: int = 60) -> str:
    """An answer as quoted in a one-line detail."""
    return repr(answer if len(answer) <= limit else answer[: limit - 1] + "…")


def normalize_text(text: str) -> str:
    """HELM's ``normalize_text``: lowercase, drop punctuation, drop articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(gold: str, pred: str | None) -> float:
    if not pred:
        return 0.0
    return 1.0 if gold.strip() == pred.strip() else 0.0


def quasi_exact_match(gold: str, pred: str | None) -> float:
    if not pred:
        return 0.0
    return 1.0 if normalize_text(gold) == normalize_text(pred) else 0.0


class MultipleChoiceExactMatch:
    name = "exact_match"
    binary = True
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        choices = instance.choices
        if instance.correct is None or not 0 <= instance.correct < len(choices):
            raise ValueError(f"instance {instance.id!r} has no valid correct choice")
        gold_letter = LETTERS[instance.correct]
        gold_text = choices[instance.correct]
        pred = answer.strip()
        # HELM's output_mapping: only an exact letter maps to an option; anything else is None and scores 0
        mapped = choices[LETTERS.index(pred)] if len(pred) == 1 and pred in LETTERS[: len(choices)] else None
        value = exact_match(gold_text, mapped)
        return Score(
            value=value,
            detail=f"expected {gold_letter!r} ({gold_text}), got {_shown(answer)}",
            extra={"quasi_exact_match": quasi_exact_match(gold_text, mapped)},
        )


class GenerationExactMatch:
    name = "exact_match"
    binary = True
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        if not instance.references:
            raise ValueError(f"instance {instance.id!r} has no reference answer")
        pred = answer.strip()
        value = max(exact_match(ref, pred) for ref in instance.references)
        quasi = max(quasi_exact_match(ref, pred) for ref in instance.references)
        return Score(
            value=value,
            detail=f"expected {_shown(instance.references[0].strip())}, got {_shown(pred)}",
            extra={"quasi_exact_match": quasi},
        )


MULTIPLE_CHOICE_EXACT_MATCH = MultipleChoiceExactMatch()
GENERATION_EXACT_MATCH = GenerationExactMatch()
