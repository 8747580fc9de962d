"""ROUGE-1/2/L as HELM computes them (HELM ``SummarizationMetric``).

MedHELM scores its open-ended benchmarks (MTSamples, ACI-Bench, MedicationQA, MEDIQA, MedDialog, ...) with an LLM
jury (``metrics/jury.py``); HELM also reports ROUGE-1/2/L beside the jury score, for every one of them, and so does
the jury metric here (:func:`rouge_scores`). :class:`RougeL` makes ROUGE-L a main score, for a benchmark of one's
own. They are computed exactly as HELM does:

* the completion is stripped, then a leading ``"{"`` and a trailing ``"}"`` are removed from it and from each
  reference (HELM's ``_remove_braces``; it does the same to the input text, which only its coverage / density /
  compression statistics read, so the input plays no part here);
* ``rouge_score.rouge_scorer.RougeScorer(..., use_stemmer=True)``: lowercase, every run of characters other than
  ``a-z0-9`` is a separator (so non-ASCII letters are dropped), Porter stemming of tokens longer than 3 letters;
* the F-measure, and the maximum over the references, for ``rougeL`` (not ``rougeLsum``), ``rouge1`` and
  ``rouge2``. ROUGE-L is the score (``Score.value`` and ``raw``, in [0, 1]); ROUGE-1 and ROUGE-2 are recorded in
  ``Score.extra`` as ``rouge_1`` and ``rouge_2``, HELM's names.

**What a miss means.** ROUGE-L is continuous, so an item is *missed* when its ROUGE-L F-measure is below
``pass_mark`` = 0.5: fewer than about half of the words of the answer and of the reference line up in a common
subsequence. This is a coarse flag, not a verdict: a correct clinical note worded differently from the reference
easily scores 0.2-0.4, and most answers of a good model fall below 0.5 on these benchmarks. Read the benchmark
mean (the number MedHELM's tables use), not the count of misses; use ``assert_metric(..., pass_mark=...)`` in a
test of your own to flag at another level.

HELM has no bug here, so ``compat`` changes nothing. The ``rouge_score`` package (and NLTK, which it imports for
the stemmer) takes seconds to import, so it is imported on first use only and the scorer is built once per
process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
#: HELM's metric names for the rouge_score types
HELM_NAMES = {"rouge1": "rouge_1", "rouge2": "rouge_2", "rougeL": "rouge_l"}

_SCORER: Any = None


def rouge_scorer() -> Any:
    """The process-wide ``RougeScorer`` (built on first use; building it imports NLTK)."""
    global _SCORER
    if _SCORER is None:
        from rouge_score import rouge_scorer as _rouge_scorer

        _SCORER = _rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    return _SCORER


def remove_braces(text: str) -> str:
    """HELM's ``_remove_braces``: drop one leading ``{`` and one trailing ``}``."""
    return text.removeprefix("{").removesuffix("}")


def rouge_scores(references: Sequence[str], prediction: str) -> dict[str, float]:
    """HELM's ``rouge_1``, ``rouge_2``, ``rouge_l``: F-measures, each the maximum over the references.

    ``prediction`` and ``references`` are taken as given; :class:`RougeL` strips and removes braces first.
    """
    if not references:
        raise ValueError("ROUGE needs at least one reference")
    scorer = rouge_scorer()
    best = dict.fromkeys(ROUGE_TYPES, 0.0)
    for reference in references:
        # rouge_score's argument order is (target, prediction); HELM passes (gold, pred)
        scores = scorer.score(reference, prediction)
        for rouge_type in ROUGE_TYPES:
            best[rouge_type] = max(best[rouge_type], float(scores[rouge_type].fmeasure))
    return {HELM_NAMES[rouge_type]: value for rouge_type, value in best.items()}


def _shown(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


class RougeL:
    name = "rouge_l"
    binary = False
    #: a continuous metric: an item below this ROUGE-L F-measure shows as a miss (see the module docstring)
    pass_mark = 0.5

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        if not instance.references:
            raise ValueError(f"instance {instance.id!r} has no reference answer")
        references = [remove_braces(reference) for reference in instance.references]
        prediction = remove_braces(answer.strip())
        scores = rouge_scores(references, prediction)
        value = scores["rouge_l"]
        return Score(
            value=value,
            raw=value,
            detail=f"ROUGE-L F {value:.3f} against the reference {_shown(references[0])}, got {_shown(prediction)}",
            extra={"rouge_1": scores["rouge_1"], "rouge_2": scores["rouge_2"]},
        )


ROUGE_L = RougeL()
