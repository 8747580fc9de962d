"""MEDEC error detection (HELM ``MedecMetric``).

The model answers ``CORRECT`` or ``"<sentence id> <corrected sentence>"``. Two values per note:

* ``medec_error_flag_accuracy`` (the main score): does the answer's error flag (0 = CORRECT, 1 = an error) equal
  the gold flag?
* ``medec_error_sentence_accuracy`` (``Score.extra``): when both flags are 1, is the sentence id the gold one;
  otherwise 1 exactly when both say CORRECT.

HELM's rule (``compat="helm"``): the gold text is the reference with every ``"."`` removed, then stripped;
``"CORRECT"`` gives flag 0, anything else flag 1 with sentence id ``int(text)`` or -1 when that fails. The answer is
stripped, periods kept: exactly ``"CORRECT"`` gives flag 0; otherwise a leading number is the sentence id (flag 1);
otherwise flag 1 with id -2.

Differences by default, each a HELM bug:

1. ``"CORRECT."``, ``"correct"``, ``"**CORRECT**"``: the instructions themselves say "return the following output:
   CORRECT." with a period, yet HELM counts any answer other than the bare word as flagging an error. By default an
   answer that is the word CORRECT, in any case, with only punctuation or whitespace around it, is flag 0.
2. The gold reference is ``"<id> <corrected sentence>"``, so HELM's ``int(text)`` always fails and the gold sentence
   id is -1, which no answer can match: HELM's sentence accuracy is 0 on every note with an error. By default the
   gold id is the dataset's ``Error Sentence ID`` column (``Instance.extra["error_sentence_id"]``).
"""

from __future__ import annotations

import re
import string
from typing import TYPE_CHECKING

from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.metrics.base import Score

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

_LEADING_ID = re.compile(r"^(\d+)")
_AROUND_CORRECT = string.punctuation + string.whitespace


def _gold(instance: Instance, compat: str) -> tuple[int, int]:
    """(flag, sentence id) of the gold answer."""
    text = (instance.references[0] if instance.references else "").replace(".", "").strip()
    if text == "CORRECT":
        return 0, -1
    if not reproduces_helm(compat) and instance.extra.get("error_sentence_id") is not None:
        return 1, int(instance.extra["error_sentence_id"])
    try:
        return 1, int(text)
    except ValueError:
        return 1, -1


def _predicted(answer: str, compat: str) -> tuple[int, int]:
    """(flag, sentence id) of the model's answer; id -2 when it flags an error without a readable id."""
    pred = answer.strip()
    says_correct = pred == "CORRECT" if reproduces_helm(compat) else pred.strip(_AROUND_CORRECT).upper() == "CORRECT"
    if says_correct:
        return 0, -1
    match = _LEADING_ID.match(pred)
    if match is None or len(match.group(1)) > 9:  # no sentence has a 10-digit id (and int() refuses 4,300 digits)
        return 1, -2
    return 1, int(match.group(1))


def _describe(flag: int, sentence: int) -> str:
    if flag == 0:
        return "CORRECT"
    return f"error in sentence {sentence}" if sentence >= 0 else "an error, sentence id unreadable"


class MedecErrorFlagAccuracy:
    name = "medec_error_flag_accuracy"
    binary = True
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        gold_flag, gold_sentence = _gold(instance, compat)
        pred_flag, pred_sentence = _predicted(answer, compat)
        flag_accuracy = 1.0 if pred_flag == gold_flag else 0.0
        if gold_flag == 1 and pred_flag == 1:
            sentence_accuracy = 1.0 if pred_sentence == gold_sentence else 0.0
        else:
            sentence_accuracy = 1.0 if gold_flag == 0 and pred_flag == 0 else 0.0
        shown = answer.strip()
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        return Score(
            value=flag_accuracy,
            detail=(
                f"expected {_describe(gold_flag, gold_sentence)}, got {shown!r} "
                f"(read as {_describe(pred_flag, pred_sentence)})"
            ),
            extra={"medec_error_sentence_accuracy": sentence_accuracy},
        )


MEDEC_ERROR_FLAG_ACCURACY = MedecErrorFlagAccuracy()
