"""Reading a judge's reply: criterion -> (score on 1-5, explanation).

HELM (``LLMJuryMetric``'s annotator) takes the greedy regex ``\\{.*\\}`` of the reply, ``json.loads`` it, retries once
with ``"}"`` appended when the error is "Expecting ',' delimiter", requires ``{"<criterion>": {"score",
"explanation"}}`` for every criterion, and later ``int()``-s the score (the metric). Everything else drops the judge for
that instance, or crashes the metric ("4/5", "4.5", an extra top-level number).

:func:`parse_judgement` accepts everything HELM accepts and also:

* the JSON inside a code fence, or surrounded by text, or several objects of which one holds the criteria (every
  top-level ``{...}`` is tried, then HELM's greedy match, then that match with up to three ``}`` appended for a
  reply cut off by ``max_tokens``); raw newlines inside strings (``strict=False``); a Python-style dict with single
  quotes; a ``<think>…</think>`` preamble of a reasoning judge;
* keys in any case or spacing (``"Accuracy"``, ``"ACCURACY"``), the criteria nested one or two levels down
  (``{"scores": {...}}``) or as a list of ``{"criterion": …, "score": …}``, score keys ``score``/``rating``/``value``,
  explanation keys ``explanation``/``reason``/``rationale``/``justification``; a bare score per criterion
  (``"accuracy": 4``);
* scores as numbers or strings: ``4``, ``"4"``, ``4.5``, ``"4/5"``, ``"4 out of 5"``, ``"**4**"``;
* as a last resort, lines such as ``Accuracy: 4/5 - …`` when there is no usable JSON at all.

It rejects, with a :class:`JudgementError` naming the reason: no JSON, a missing criterion, a score that is not a
number, and a score outside 1..5 (HELM's own example shows ``"score": 0``; a judge that copies it is not grading).
A judge whose reply is rejected is excluded for that instance and counted (:func:`~pytest_medhelm.jury.jury_score`).

**The judge's own verdict.** A judge often quotes the answer it grades, and an answer can end with a judgement of
its own (all 5s). When a reply holds several complete judgements, the *last* one is the judge's: the one that
starts last among those not inside another (a judgement inside the string or a nested object of another one is
part of that one), not on a Markdown quote line (``> {...}``), and not a restatement of a judgement the answer
itself holds: a verdict with the same scores and explanations as one planted in the answer, or whose text is in
the answer verbatim (one nested in the answer's own, or in its ``<think>``), is the answer's, even written after
the judge's own, and so is every judgement inside such a copy; so are score lines (``Accuracy: 5/5``) that read
as the answer's (a reply whose only verdicts are such copies gives no judgement: the judge is excluded for that
answer, with the reason). A partial or invalid object after the verdict does not displace
it. HELM's greedy match (``--medhelm-compat helm``) takes the first ``{`` to the last ``}``: two
objects there do not parse and the judge is dropped.

**Bounded in time.** Every step is linear in the reply's length (no regex that backtracks over the reply; objects
are found by ``json``'s decoder from the positions where an object can start), and a reply longer than
:data:`MAX_REPLY_CHARS` is rejected unread. JSON nested too deeply for Python's parser (``RecursionError``) is a
:class:`JudgementError`, so one judge's reply can only exclude that judge.

:func:`~pytest_medhelm.jury.parsing_helm.parse_judgement_helm` is HELM's parser and its metric's reading of the
scores, quirks included (every key of the reply, ``int()`` on each score), used under ``--medhelm-compat helm``.
"""

from __future__ import annotations

import ast
import collections
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MAX_REPLY_CHARS", "JudgementError", "parse_judgement"]

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js|python)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
#: where a JSON object or a Python dict can start: "{" then a key's quote or the closing brace
_OBJECT_START = re.compile(r"\{[ \t\r\n]*+[\"'}]")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_SCORE_TEXT = re.compile(
    r"^\s*[*_`\"']*\s*([0-9]+(?:\.[0-9]+)?)\s*[*_`\"']*\s*(?:(?:/|out\s+of|of)\s*5(?:\.0+)?)?\s*[*_`\"']*\s*\.?\s*$",
    re.IGNORECASE,
)
#: a score written as text is short ("4", "**4/5**", "4 out of 5"); longer strings are not read (the pattern above
#: backtracks on long runs of spaces and emphasis)
_MAX_SCORE_TEXT = 40
#: a reply longer than this is not read: a judgement is a few hundred characters and a judge's max_tokens is 4096
#: (HELM's); the transport refuses bodies over its own bound first (pytest_medhelm/sending/replies.py)
MAX_REPLY_CHARS = 1_000_000
#: a candidate object on a line starting with ">" (within this many characters) is a quotation, not a verdict
_QUOTE_LOOKBACK = 200
_SCORE_KEYS = ("score", "rating", "value", "grade", "points")
_EXPLANATION_KEYS = ("explanation", "reason", "reasoning", "rationale", "justification", "comment", "comments")
_NAME_KEYS = ("criterion", "criteria", "name", "axis", "dimension", "aspect")


class JudgementError(ValueError):
    """A judge's reply could not be read as a judgement; ``reason`` says why (recorded per judge)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _norm(key: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip().strip("*_`\"'").strip().lower())


def _to_score(value: Any, criterion: str) -> float:
    if isinstance(value, bool) or value is None:
        raise JudgementError(f"{criterion}: score {value!r} is not a number")
    if isinstance(value, (int, float)):
        score = float(value)
    elif isinstance(value, str):
        match = _SCORE_TEXT.match(value) if len(value) <= _MAX_SCORE_TEXT else None
        if match is None:
            raise JudgementError(f"{criterion}: score {value!r} is not a number")
        score = float(match.group(1))
    else:
        raise JudgementError(f"{criterion}: score {value!r} is not a number")
    if not math.isfinite(score):
        raise JudgementError(f"{criterion}: score {value!r} is not a number")
    if not 1.0 <= score <= 5.0:
        raise JudgementError(f"{criterion}: score {score:g} outside 1-5")
    return score


def _explanation(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False)


def _pick(mapping: Mapping[str, Any], keys: Sequence[str]) -> tuple[bool, Any]:
    normalized = {_norm(k): v for k, v in mapping.items()}
    for key in keys:
        if key in normalized:
            return True, normalized[key]
    return False, None


def _criteria_map(obj: Any, criteria: Sequence[str], depth: int = 0) -> Mapping[str, Any] | None:
    """The mapping (normalized key -> value) that holds the criteria: ``obj`` itself or a nested one."""
    wanted = {_norm(c) for c in criteria}
    if isinstance(obj, Mapping):
        normalized = {_norm(k): v for k, v in obj.items()}
        if wanted <= normalized.keys():
            return normalized
        if depth < 2:
            for value in obj.values():
                found = _criteria_map(value, criteria, depth + 1)
                if found is not None:
                    return found
    elif isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        # [{"criterion": "accuracy", "score": 4, "explanation": "..."}, ...]
        by_name: dict[str, Any] = {}
        for entry in obj:
            has_name, name = _pick(entry, _NAME_KEYS)
            if has_name and isinstance(name, str):
                by_name[_norm(name)] = entry
        if wanted <= by_name.keys():
            return by_name
    return None


def _partial(obj: Any, criteria: Sequence[str]) -> list[str] | None:
    """The criteria missing from a dict that has some of them (for a helpful reason), else None."""
    if not isinstance(obj, Mapping):
        return None
    keys = {_norm(k) for k in obj}
    present = [c for c in criteria if _norm(c) in keys]
    if not present:
        return None
    return [c for c in criteria if _norm(c) not in keys]


def _extract(obj: Any, criteria: Sequence[str]) -> dict[str, tuple[float, str]]:
    found = _criteria_map(obj, criteria)
    if found is None:
        missing = _partial(obj, criteria)
        if missing:
            raise JudgementError(f"missing criteria: {', '.join(missing)}")
        raise JudgementError(f"no criteria ({', '.join(criteria)}) in the JSON")
    out: dict[str, tuple[float, str]] = {}
    for criterion in criteria:
        value = found[_norm(criterion)]
        if isinstance(value, Mapping):
            has_score, score = _pick(value, _SCORE_KEYS)
            if not has_score:
                raise JudgementError(f"{criterion}: no score")
            _has, explanation = _pick(value, _EXPLANATION_KEYS)
            out[criterion] = (_to_score(score, criterion), _explanation(explanation))
        elif isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
            out[criterion] = (_to_score(value[0], criterion), _explanation(value[1]))
        else:
            out[criterion] = (_to_score(value, criterion), "")
    return out


def _loads(candidate: str) -> Any:
    """``candidate`` as JSON (raw newlines in strings allowed), else as a Python literal; raises ValueError
    (also for JSON nested too deeply to read)."""
    try:
        return json.loads(candidate, strict=False)
    except ValueError as exc:
        error: ValueError = exc
    except RecursionError:
        error = ValueError("nested too deeply")
    without_trailing_commas = _TRAILING_COMMA.sub(r"\1", candidate)
    if without_trailing_commas != candidate:
        try:
            return json.loads(without_trailing_commas, strict=False)
        except (ValueError, RecursionError):
            pass
    try:
        return ast.literal_eval(candidate)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise error from None


def _top_level_objects(text: str, offset: int = 0,
                       cut_off: list[int] | None = None) -> Iterable[tuple[int, int, Any]]:
    """(start, end, object) of every top-level JSON object of ``text``, left to right.

    Only the positions where an object can start (``{`` then a quote or ``}``: never ``{{``, never an escaped
    ``{\\"`` inside a string) are tried, with ``json``'s decoder; after an object is read the search goes on after
    its end, so an object inside another (or inside one of its strings) is part of that one, not a candidate of
    its own. Each position is tried once, and a failed try stops where the JSON went wrong; after
    :data:`_MAX_FAILED_STARTS` failed tries the rest is not searched (a bound on the time a reply can take when
    every failed try reads deep: objects nested up to Python's recursion limit)."""
    decoder = json.JSONDecoder(strict=False)
    position = failed = 0
    while True:
        found = _OBJECT_START.search(text, position)
        if found is None:
            return
        start = found.start()
        try:
            obj, end = _decode_at(decoder, text, start)
        except (ValueError, RecursionError) as exc:
            if cut_off is not None and not cut_off and _runs_off_the_end(exc, text):
                cut_off.append(start)  # the outermost object the reply ends inside (max_tokens)
            failed += 1
            if failed >= _MAX_FAILED_STARTS:
                return
            position = start + 1
            continue
        yield offset + start, offset + end, obj
        position = end


def _runs_off_the_end(exc: BaseException, text: str) -> bool:
    return isinstance(exc, json.JSONDecodeError) and (exc.msg.startswith("Unterminated string")
                                                      or exc.pos >= len(text.rstrip()) - 1)


#: positions that did not start an object after which a reply's search stops (a judgement needs a few)
_MAX_FAILED_STARTS = 5000
#: code fences looked at (the last ones: the judge's verdict comes last)
_MAX_FENCES = 64
#: the first window an object is decoded in (grown x4 while the object may go on past it)
_WINDOW = 256


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> tuple[Any, int]:
    """``decoder.raw_decode(text, start)`` in a window that grows only while the object may go on past it.

    Why not on the whole text: a failed decode builds a ``JSONDecodeError`` whose line and column are counted from
    the start of the document, so trying every position of a long reply would be quadratic."""
    size = _WINDOW
    while True:
        window = text[start:start + size]
        try:
            obj, end = decoder.raw_decode(window)
            return obj, start + end
        except json.JSONDecodeError as exc:
            whole = start + size >= len(text)
            # an error well inside the window, other than a string running past it, is where the JSON is wrong
            if whole or (exc.pos < len(window) - 8 and not exc.msg.startswith("Unterminated string")):
                raise
        size *= 4


def _closing(tail: str) -> Any:
    """A reply cut off by ``max_tokens`` inside its object, closed; raises ValueError."""
    tail = tail.rstrip().rstrip(",")
    for suffix in ('"}}', '"}}}', "}", "}}", "}}}"):
        try:
            return _loads(tail + suffix)
        except ValueError:
            continue
    raise ValueError("cannot close it")


def _candidates(text: str) -> Iterable[tuple[int, int, Any]]:
    """(start, end, parsed object) to look for the criteria in: the whole reply, each code fence, every top-level
    object, HELM's greedy match (first ``{`` to last ``}``, with up to three ``}`` appended), a reply cut off
    before its closing braces closed. Lazily: later ones cost more."""
    if text[:1] in "{[":
        try:
            yield 0, len(text), _loads(text)
        except ValueError:
            pass
    for fence in collections.deque(_FENCE.finditer(text), maxlen=_MAX_FENCES):
        body = fence.group(1)
        stripped = body.strip()
        start = fence.start(1) + (len(body) - len(body.lstrip()))
        try:
            yield start, start + len(stripped), _loads(stripped)
        except ValueError:
            yield from _top_level_objects(stripped, start)
    cut_off: list[int] = []
    yield from _top_level_objects(text, 0, cut_off)
    first = text.find("{")
    last = text.rfind("}")
    if first != -1 and last > first:  # HELM's greedy \{.*\}, found without a regex that backtracks
        greedy = text[first:last + 1]
        for suffix in ("", "}", "}}", "}}}"):
            try:
                yield first, last + 1, _loads(greedy + suffix)
                break
            except ValueError:
                continue
    if first != -1 and not text.rstrip().endswith("}"):
        # cut off before its closing braces (max_tokens): close it, from the first "{" and from the outermost
        # object the reply ends inside (a cut-off verdict after a quoted one)
        for start in dict.fromkeys([first, *cut_off]):
            try:
                yield start, len(text), _closing(text[start:])
            except ValueError:
                continue


def _is_quoted(text: str, start: int) -> bool:
    """True when the object at ``start`` is on a Markdown quote line (``> {...}``): the judge quoting, not judging."""
    window = text[max(0, start - _QUOTE_LOOKBACK):start]
    newline = window.rfind("\n")
    if newline == -1 and start > _QUOTE_LOOKBACK:
        return False
    return window[newline + 1:].lstrip().startswith(">")


def _without_think(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks (an unclosed one is kept), in one pass."""
    parts: list[str] = []
    position = 0
    while True:
        opened = _THINK_OPEN.search(text, position)
        if opened is None:
            break
        closed = _THINK_CLOSE.search(text, opened.end())
        if closed is None:
            break
        parts.append(text[position:opened.start()])
        position = closed.end()
    parts.append(text[position:])
    return "".join(parts)


_LINE_PREFIX = r"[ \t>#*\-\d.)_\"']*+"


def _line_pattern(criterion: str) -> re.Pattern[str]:
    words = r"[ \t_]+".join(re.escape(w) for w in re.split(r"[\s_]+", criterion.strip()) if w)
    # possessive quantifiers (*+) and no class that spans lines: one pass per line, no backtracking
    return re.compile(
        rf"{_LINE_PREFIX}{words}[*_\"']*+[ \t]*+(?:(?:score|rating)[ \t]*+)?[:=\-\u2013\u2014][ \t]*+[*_]*+[ \t]*+"
        rf"([0-9]++(?:\.[0-9]++)?+)[ \t]*+(?:/[ \t]*+5|out[ \t]++of[ \t]++5)?+[*_]*+[ \t]*+[\-\u2013\u2014:.,;]?+"
        rf"[ \t]*+(.*)",
        re.IGNORECASE,
    )


def _from_lines(text: str, criteria: Sequence[str]) -> dict[str, tuple[float, str]] | None:
    """``Accuracy: 4/5 - reason`` lines, when there is no JSON: every criterion must be there (the first line of
    each counts)."""
    patterns = [(criterion, _line_pattern(criterion)) for criterion in criteria]
    found: dict[str, re.Match[str]] = {}
    for line in text.splitlines():
        for criterion, pattern in patterns:
            if criterion not in found:
                match = pattern.match(line)
                if match is not None:
                    found[criterion] = match
    if len(found) < len(criteria):
        return None
    return {criterion: (_to_score(found[criterion].group(1), criterion), found[criterion].group(2).strip())
            for criterion in criteria}


def _judges_own(text: str, readings: list[tuple[int, int, dict[str, tuple[float, str]]]],
                planted: Sequence[dict[str, tuple[float, str]]] = (), answer: str = "") -> dict[str, tuple[float, str]]:
    """The judge's own verdict among the complete judgements read from ``text``: the one starting last that is not
    inside another one, not on a quote line, and not a copy of the answer's (``planted``: the same scores and
    explanations as a judgement the answer holds; or its text found in ``answer`` verbatim). A judgement inside a
    copy is part of the copy."""
    # sorted by start, the enclosing one first: a reading ending before the furthest end seen so far is inside
    ordered = sorted(range(len(readings)), key=lambda i: (readings[i][0], -readings[i][1], i))
    outer: list[int] = []
    furthest = -1
    for i in ordered:
        start, end, _judgement = readings[i]
        if end <= furthest:
            continue
        furthest = end
        outer.append(i)
    if planted or answer:
        outer = [i for i in outer if readings[i][2] not in planted
                 and text[readings[i][0]:readings[i][1]] not in answer]
        if not outer:
            raise JudgementError("every judgement in the reply repeats one the answer itself holds (a planted "
                                 "verdict): no judgement of the judge's own")
    for i in reversed(outer):
        if not _is_quoted(text, readings[i][0]):
            return readings[i][2]
    return readings[outer[-1]][2]  # every one quoted: the last is still the best reading there is


def _readings(cleaned: str, criteria: Sequence[str]
              ) -> tuple[list[tuple[int, int, dict[str, tuple[float, str]]]], JudgementError | None]:
    """Every complete judgement of ``cleaned`` (start, end, reading), and the most telling error of the others."""
    first_error: JudgementError | None = None
    readings: list[tuple[int, int, dict[str, tuple[float, str]]]] = []
    for start, end, obj in _candidates(cleaned):
        try:
            readings.append((start, end, _extract(obj, criteria)))
        except JudgementError as exc:
            # a score outside 1-5 or a missing criterion says more than "no criteria in this fragment"
            if first_error is None or first_error.reason.startswith("no criteria"):
                first_error = exc
    return readings, first_error


def _planted(answer: str, criteria: Sequence[str]) -> list[dict[str, tuple[float, str]]]:
    """The complete judgements an answer holds (a verdict planted for the judge to repeat)."""
    if not answer or "{" not in answer or len(answer) > MAX_REPLY_CHARS:
        return []
    return [reading for _start, _end, reading in _readings(_without_think(answer), criteria)[0]]


def _answers_lines(answer: str, criteria: Sequence[str]) -> dict[str, tuple[float, str]] | None:
    """The ``Accuracy: 5/5`` lines the answer holds, read as a reply's are (a verdict planted for the judge to
    repeat), or None."""
    if not answer or len(answer) > MAX_REPLY_CHARS:
        return None
    try:
        return _from_lines(_without_think(answer), criteria)
    except JudgementError:
        return None


def _parse_judgement(text: str, criteria: Sequence[str], answer: str = "") -> dict[str, tuple[float, str]]:
    if not criteria:
        raise ValueError("parse_judgement needs at least one criterion")
    if text is None or not str(text).strip():
        raise JudgementError("empty reply")
    text = str(text)
    if len(text) > MAX_REPLY_CHARS:
        raise JudgementError(f"reply too long to be a judgement ({len(text):,} characters; at most "
                             f"{MAX_REPLY_CHARS:,} are read)")
    cleaned = _without_think(text).strip()
    readings, first_error = _readings(cleaned, criteria)
    if readings:
        return _judges_own(cleaned, readings, _planted(answer, criteria), answer)
    try:
        from_lines = _from_lines(cleaned, criteria)
    except JudgementError as exc:
        from_lines = None
        first_error = first_error or exc
    if from_lines is not None:
        if _answers_lines(answer, criteria) == from_lines:
            raise JudgementError("the reply's score lines repeat the ones the answer itself holds (a planted "
                                 "verdict): no judgement of the judge's own")
        return from_lines
    if first_error is not None:
        raise first_error
    # (every object parsed was looked at, and raised first_error unless it was read: here none parsed)
    raise JudgementError("malformed JSON" if "{" in cleaned else "no JSON object in the reply")


def parse_judgement(text: str, criteria: Sequence[str], answer: str = "") -> dict[str, tuple[float, str]]:
    """criterion -> (score in [1, 5], explanation), or :class:`JudgementError` with the reason.

    Several complete judgements in the reply: the judge's own is the last one that does not repeat a judgement
    ``answer`` (the answer under judgement) holds (see the module's docstring)."""
    try:
        return _parse_judgement(text, criteria, answer)
    except RecursionError:
        raise JudgementError("the reply's JSON is nested too deeply to read") from None
