"""Reading a rubric grader's reply: one criterion's verdict, ``{"explanation": ..., "criteria_met": ...}``.

A grader's reply is untrusted text. Whatever it holds, reading it takes time linear in its length (no regular
expression that can backtrack: the code fence and the braces are found with ``str`` methods), never recurses
without bound (a reply of 100,000 nested brackets is a :class:`GraderReplyError`, not a ``RecursionError``), and
never raises anything but :class:`GraderReplyError`, whose ``reason`` is one short sentence for the item's error.

Three readers, one per reference:

* :func:`parse_reference_verdict`: HealthBench's own reference (simple-evals ``parse_json_to_dict``): the reply
  stripped, a leading `````json`` and a trailing ````` `` removed, the rest one JSON object whose ``criteria_met``
  is a boolean (simple-evals asks again until it is; here the item says why it has no score). When the whole
  reply is not JSON, the text from its first ``{`` to its last ``}`` is tried (a grader that writes a sentence
  before its fenced object).
* :func:`parse_fork_verdict`: medhelm 0.8.0 (``LLMAsJuryAnnotator._annotate_with_model``): the text from the first
  ``{`` to the last ``}`` (its greedy ``\\{.*\\}``), read as JSON, once more with ``}`` appended when the error is a
  missing ``,`` delimiter; accepted when it is an object with the keys ``explanation`` and ``criteria_met``, values
  as they are (the fork checks no type). ``None`` for a reply the fork drops.
* :func:`comparison_value`: the fork's physician-comparison verdict (``criteria_met`` 1-10) as the number its
  score formula uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: a grader's verdict is a few hundred characters; a reply longer than this is not read (bounded work per reply)
MAX_REPLY_CHARS = 200_000

_FENCE_OPEN = "```json"
_FENCE_CLOSE = "```"


class GraderReplyError(ValueError):
    """A reply that holds no usable verdict; ``reason`` says what was wrong, without quoting the reply."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Verdict:
    """One criterion graded: met or not, and the grader's explanation."""

    criteria_met: bool
    explanation: str


def _loads(text: str) -> Any:
    """``json.loads`` whose failures are all :class:`GraderReplyError` (a nesting too deep for Python's parser
    included)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise GraderReplyError("the reply's JSON is nested too deeply to read") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise GraderReplyError(f"the reply is not a JSON object ({_short(exc)})") from None


def _short(exc: BaseException) -> str:
    # JSONDecodeError's message names a line and column; the reply's own text is never quoted
    return str(exc).split(":", 1)[0][:80]


def _check_size(text: Any) -> str:
    if not isinstance(text, str):
        raise GraderReplyError("the reply is not text")
    if len(text) > MAX_REPLY_CHARS:
        raise GraderReplyError(f"the reply is {len(text):,} characters long (at most {MAX_REPLY_CHARS:,} are read)")
    return text


def _without_fence(text: str) -> str:
    """simple-evals' ``re.sub(r"^```json\\s*|\\s*```$", "", text.strip())``, without a regular expression."""
    text = text.strip()
    if text.startswith(_FENCE_OPEN):
        text = text[len(_FENCE_OPEN):].lstrip()
    if text.endswith(_FENCE_CLOSE):
        text = text[: -len(_FENCE_CLOSE)].rstrip()
    return text


def _braced(text: str) -> str | None:
    """The text from the first ``{`` to the last ``}`` (a greedy ``\\{.*\\}`` with DOTALL), or None."""
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end < start:
        return None
    return text[start:end + 1]


def _fenced_block(text: str) -> str | None:
    """The content of the reply's first Markdown code fence, labelled (```` ```json ````, ```` ```JSON ````, any
    language word right after the backticks) or not, wherever it is in the reply (text before and after it is left
    out); a fence that is never closed runs to the end. None without a fence."""
    start = text.find(_FENCE_CLOSE)
    if start < 0:
        return None
    start += len(_FENCE_CLOSE)
    while start < len(text) and (text[start].isalnum() or text[start] in "-_+."):  # the label, if any
        start += 1
    end = text.find(_FENCE_CLOSE, start)
    return (text[start:] if end < 0 else text[start:end]).strip()


def parse_reference_verdict(text: str) -> Verdict:
    """The verdict of a reply as HealthBench's reference reads it; :class:`GraderReplyError` when it has none.

    In order: the reply without simple-evals' ```` ```json ```` opening and closing fence, as JSON; else the content
    of its first code fence, labelled or not (simple-evals reads an unlabelled fence as no verdict and asks again;
    a grader that always writes one would never be read: inspect_evals' fix reads the fence's content); else the
    text from the first ``{`` to the last ``}``. The first reading's error is the one said."""
    text = _check_size(text)
    body = _without_fence(text)
    try:
        data = _loads(body)
    except GraderReplyError as first:
        data = None
        for candidate in (_fenced_block(text), _braced(body)):
            if candidate is None or candidate == body:
                continue
            try:
                data = _loads(candidate)
                break
            except GraderReplyError:
                continue
        if data is None:
            raise first from None
    if not isinstance(data, dict):
        raise GraderReplyError("the reply's JSON is not an object")
    if "criteria_met" not in data:
        raise GraderReplyError("the reply has no \"criteria_met\"")
    met = data["criteria_met"]
    if not isinstance(met, bool):
        raise GraderReplyError(f"\"criteria_met\" is {type(met).__name__}, not true or false")
    explanation = data.get("explanation", "")
    return Verdict(criteria_met=met, explanation=explanation if isinstance(explanation, str) else str(explanation))


def parse_fork_verdict(text: str) -> dict[str, Any] | None:
    """The reply as medhelm 0.8.0 accepts it (the object, values unchecked), or None where the fork drops it."""
    try:
        text = _check_size(text)
    except GraderReplyError:
        return None
    braced = _braced(text)
    if braced is None:
        return None
    try:
        data = json.loads(braced)
    except RecursionError:
        return None
    except ValueError as exc:
        if "Expecting ',' delimiter" not in str(exc):
            return None
        try:
            data = json.loads(braced + "}")
        except (ValueError, RecursionError):
            return None
    if not isinstance(data, dict) or "explanation" not in data or "criteria_met" not in data:
        return None
    return data


def fork_met(verdict: Mapping[str, Any]) -> bool:
    """The fork's test of a rubric verdict: ``str(criteria_met).lower() == "true"`` (so ``"TRUE"`` is met, and a
    JSON ``true`` is Python's ``True``, whose ``str`` is ``"True"``)."""
    value = verdict.get("criteria_met", "")
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() == "true"
    return False  # a number, a list, null: their str() is never "true"


def comparison_value(verdict: dict[str, Any], *, in_range: bool = False) -> float | None:
    """The fork's comparison score ``criteria_met`` as its formula ``(rubric + v / 10) / 2`` uses it: None when
    absent or null (the fork then keeps the rubric score alone); ``true``/``false`` count 1/0 (Python arithmetic);
    anything else that is not a number is a :class:`GraderReplyError` (the fork raises ``TypeError`` there).
    ``in_range`` (our default scoring): only a number from 1 to 10 is a comparison score."""
    value = verdict.get("criteria_met")
    if value is None:
        return None
    if in_range and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 10):
        # (by default: a grader's out-of-scale number would move the item's score outside [0, 1])
        raise GraderReplyError(f"the comparison's \"criteria_met\" is {str(value)[:40]!r}, not a number from 1 to 10")
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and value not in (float("inf"), float("-inf")):
        return float(value)
    raise GraderReplyError(f"the comparison's \"criteria_met\" is {type(value).__name__}, not a number from 1 to 10")
