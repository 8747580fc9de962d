"""Reading a judge's reply: criterion -> (score on 1-5, explanation).

HELM (``LLMJuryMetric``'s annotator) takes the greedy regex ``\\{.*\\}`` of the reply, ``json.loads`` it, retries once
with ``"}"`` appended when the error is "Expecting ',' delimiter", requires ``{"<criterion>": {"score",
"explanation"}}`` for every criterion, and later ``int()``-s the score (the metric). Everything else drops the judge for
that instance, or crashes the metric ("4/5", "4.5", an extra top-level number).

:func:`parse_judgement` accepts everything HELM accepts and also:

* the JSON inside a code fence, or surrounded by text, or several objects of which one holds the criteria (every
  balanced ``{...}`` is tried, then HELM's greedy match, then that match with up to three ``}`` appended for a
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

:func:`parse_judgement_helm` is HELM's parser and its metric's reading of the scores, quirks included (every key of
the reply, ``int()`` on each score), used under ``--medhelm-compat helm``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["JudgementError", "parse_judgement", "parse_judgement_helm"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js|python)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_GREEDY = re.compile(r"\{.*\}", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_SCORE_TEXT = re.compile(
    r"^\s*[*_`\"']*\s*([0-9]+(?:\.[0-9]+)?)\s*[*_`\"']*\s*(?:(?:/|out\s+of|of)\s*5(?:\.0+)?)?\s*[*_`\"']*\s*\.?\s*$",
    re.IGNORECASE,
)
_SCORE_KEYS = ("score", "rating", "value", "grade", "points")
_EXPLANATION_KEYS = ("explanation", "reason", "reasoning", "rationale", "justification", "comment", "comments")
_NAME_KEYS = ("criterion", "criteria", "name", "axis", "dimension", "aspect")
#: at most this many "{" positions are tried as the start of an object (a reply is at most 4096 tokens)
_MAX_STARTS = 400


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
        match = _SCORE_TEXT.match(value)
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
    """``candidate`` as JSON (raw newlines in strings allowed), else as a Python literal; raises ValueError."""
    try:
        return json.loads(candidate, strict=False)
    except ValueError as exc:
        error: ValueError = exc
    without_trailing_commas = _TRAILING_COMMA.sub(r"\1", candidate)
    if without_trailing_commas != candidate:
        try:
            return json.loads(without_trailing_commas, strict=False)
        except ValueError:
            pass
    try:
        return ast.literal_eval(candidate)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise error from None


def _balanced_objects(text: str) -> Iterable[Any]:
    decoder = json.JSONDecoder(strict=False)
    start = text.find("{")
    tried = 0
    while start != -1 and tried < _MAX_STARTS:
        tried += 1
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        yield obj
        start = text.find("{", end)


def _candidates(text: str) -> Iterable[Any]:
    """Parsed objects to look for the criteria in, most likely first (lazily: later ones cost more)."""
    if text[:1] in "{[":
        try:
            yield _loads(text)
        except ValueError:
            pass
    for fence in _FENCE.finditer(text):
        body = fence.group(1).strip()
        try:
            yield _loads(body)
        except ValueError:
            yield from _balanced_objects(body)
    yield from _balanced_objects(text)
    greedy = _GREEDY.search(text)
    if greedy is not None:
        for suffix in ("", "}", "}}", "}}}"):
            try:
                yield _loads(greedy.group() + suffix)
                break
            except ValueError:
                continue
    # cut off before its closing braces (max_tokens): close it
    first = text.find("{")
    if first != -1 and not text.rstrip().endswith("}"):
        tail = text[first:].rstrip().rstrip(",")
        for suffix in ('"}}', '"}}}', "}", "}}", "}}}"):
            try:
                yield _loads(tail + suffix)
                break
            except ValueError:
                continue


def _from_lines(text: str, criteria: Sequence[str]) -> dict[str, tuple[float, str]] | None:
    """``Accuracy: 4/5 - reason`` lines, when there is no JSON: every criterion must be there."""
    out: dict[str, tuple[float, str]] = {}
    for criterion in criteria:
        words = r"[\s_]+".join(re.escape(w) for w in re.split(r"[\s_]+", criterion))
        pattern = re.compile(
            rf"^[\s>#*\-\d.)]*[*_\"']*{words}[*_\"']*\s*(?:score|rating)?\s*[:=\-\u2013\u2014]\s*[*_]*\s*"
            rf"([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*5|out\s+of\s+5)?[*_]*\s*[\-\u2013\u2014:.,;]?\s*(.*)$",
            re.IGNORECASE | re.MULTILINE,
        )
        match = pattern.search(text)
        if match is None:
            return None
        out[criterion] = (_to_score(match.group(1), criterion), match.group(2).strip())
    return out


def parse_judgement(text: str, criteria: Sequence[str]) -> dict[str, tuple[float, str]]:
    """criterion -> (score in [1, 5], explanation), or :class:`JudgementError` with the reason."""
    if not criteria:
        raise ValueError("parse_judgement needs at least one criterion")
    if text is None or not str(text).strip():
        raise JudgementError("empty reply")
    cleaned = _THINK.sub("", str(text)).strip()
    first_error: JudgementError | None = None
    for obj in _candidates(cleaned):
        try:
            return _extract(obj, criteria)
        except JudgementError as exc:
            # a score outside 1-5 or a missing criterion says more than "no criteria in this fragment"
            if first_error is None or first_error.reason.startswith("no criteria"):
                first_error = exc
    try:
        from_lines = _from_lines(cleaned, criteria)
    except JudgementError as exc:
        from_lines = None
        first_error = first_error or exc
    if from_lines is not None:
        return from_lines
    if first_error is not None:
        raise first_error
    # (every object parsed was looked at, and raised first_error unless it was read: here none parsed)
    raise JudgementError("malformed JSON" if "{" in cleaned else "no JSON object in the reply")


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
    match = _GREEDY.search(text)
    json_text = match.group() if match is not None else text
    try:
        obj = json.loads(json_text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Expecting ',' delimiter":
            raise JudgementError(f"malformed JSON ({exc.msg})") from None
        try:
            obj = json.loads(json_text + "}")
        except json.JSONDecodeError as exc2:
            raise JudgementError(f"malformed JSON ({exc2.msg}, also with '}}' appended)") from None
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
