"""HELM 0.5.16's reading of a judge's reply and of its scores (``--medhelm-compat helm``, and medhelm 0.8.0's with
its two changes), quirks included: the greedy ``{...}``, every key of the reply, ``int()`` on each score. Our own
tolerant reading is :mod:`pytest_medhelm.jury.parsing`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from pytest_medhelm.jury.parsing import MAX_REPLY_CHARS, JudgementError

__all__ = ["parse_judgement_helm"]


def parse_judgement_helm(text: str, criteria: Sequence[str], subkeys: Sequence[str] = ("score", "explanation"),
                         read_score: Callable[[Any], float] = int) -> dict[str, tuple[float, str]]:
    """HELM 0.5.16's reading of a reply (``LLMAsJuryAnnotator._annotate_with_model``) and scores
    (``LLMJuryMetric``): every key of the reply -> (``int(score)``, explanation), extra keys included.

    The greedy ``\\{.*\\}`` (or the whole reply when there is none), ``json.loads``, once more with ``"}"``
    appended when the error is exactly "Expecting ',' delimiter"; then every criterion must be a key whose value
    contains each of ``subkeys`` (HELM tests ``subkey in value``, so a string value containing the words passes
    that test). No range check; ``int()`` truncates (4.9 -> 4) and reads strings ("2" -> 2). Where HELM's metric
    would crash the whole run (a value without a ``score``, a score ``int()`` cannot read) the judge is rejected
    here instead, with a reason that says so. ``subkeys`` and ``read_score`` are the caller's (the jury's mode,
    :func:`~pytest_medhelm.jury.scoring.jury_score`): medhelm 0.8.0 checks no sub-key and reads scores with
    ``float()``; a score that is not a finite number is then rejected too (it would make the mean NaN).
    """
    text = text or ""
    if len(text) > MAX_REPLY_CHARS:
        raise JudgementError(f"reply too long to be a judgement ({len(text):,} characters; at most "
                             f"{MAX_REPLY_CHARS:,} are read)")
    # HELM's re.search(r"\{.*\}", text, re.DOTALL): the first "{" to the last "}" after it (found without the
    # regex, which is quadratic on a reply of many "{")
    first, last = text.find("{"), text.rfind("}")
    json_text = text[first:last + 1] if first != -1 and last > first else text
    try:
        obj = json.loads(json_text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Expecting ',' delimiter":
            raise JudgementError(f"malformed JSON ({exc.msg})") from None
        try:
            obj = json.loads(json_text + "}")
        except json.JSONDecodeError as exc2:
            raise JudgementError(f"malformed JSON ({exc2.msg}, also with '}}' appended)") from None
        except RecursionError:
            raise JudgementError("malformed JSON (nested too deeply to read)") from None
    except RecursionError:
        # json.loads raises it on a reply nested too deeply: that judge is dropped, with the reason
        raise JudgementError("malformed JSON (nested too deeply to read)") from None
    if not isinstance(obj, dict):
        raise JudgementError("the JSON is not an object")
    for criterion in criteria:
        if criterion not in obj:
            raise JudgementError(f"missing criterion {criterion!r}")
        value = obj[criterion]
        for subkey in subkeys:
            try:
                present = subkey in value
            except TypeError:
                present = False
            if not present:
                raise JudgementError(f"{criterion}: no {subkey!r}")
    out: dict[str, tuple[float, str]] = {}
    for key, value in obj.items():
        if not isinstance(value, dict) or "score" not in value:
            raise JudgementError(f"{key}: {value!r} has no 'score' (HELM's metric would crash on it)")
        try:
            score = float(read_score(value["score"]))
        except (TypeError, ValueError, OverflowError):
            kind = "an integer" if read_score is int else "a number"
            raise JudgementError(f"{key}: score {value['score']!r} is not {kind} to HELM's "
                                 f"{getattr(read_score, '__name__', 'reading')}() (its metric would crash on it)"
                                 ) from None
        if not math.isfinite(score):
            raise JudgementError(f"{key}: score {value['score']!r} is not a finite number (the mean would be NaN)")
        out[key] = (score, str(value.get("explanation", "")))
    return out
