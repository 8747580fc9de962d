"""The judges' verdicts of one instance record, flattened for the drill-down: whatever the jury's record looks like
(pytest_medhelm.jury's ``JuryResult.to_record()``, a judge → criterion mapping, a list of verdicts, plain numbers),
the report shows one ``JudgeVerdict`` per judge and criterion."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: long texts are cut at this many characters in the report (the results JSON keeps them whole)
MAX_TEXT = 4000
#: at most this many verdicts per instance
MAX_VERDICTS = 200
_LEAF_KEYS = ("explanation", "score", "rating", "reason", "reasoning", "rationale")
_EXPLANATION_KEYS = ("explanation", "reason", "reasoning", "rationale")
_NAME_KEYS = ("judge", "model", "name", "criterion", "annotator")


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge's verdict on one criterion (``label`` "judge / criterion"); ``score`` as the judge gave it."""

    label: str
    score: float | str | None
    explanation: str


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def clip(text: Any, limit: int) -> str:
    """``text`` (a non-string as JSON) cut at ``limit`` characters, saying so; "" for None."""
    if text is None:
        return ""
    whole = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    if len(whole) > limit:
        return whole[:limit] + f" … [cut: {len(whole):,} characters in all; the results JSON has the whole text]"
    return whole


def _score(score: Any) -> float | str | None:
    if score is None or isinstance(score, str):
        return score
    number = finite(score)
    return number if number is not None else json.dumps(score, default=str)


def jury_entries(inst: Mapping[str, Any], limit: int = MAX_TEXT) -> list[JudgeVerdict]:
    """The judges' verdicts in an instance record.

    Looks in ``inst["jury"]`` and ``inst["metrics"]["jury"]``, whatever their nesting: judge → criterion →
    ``{"score": ..., "explanation": ...}``, a list of ``{"judge": ..., "score": ..., "explanation": ...}``, or
    plain numbers."""
    sources = []
    if inst.get("jury") is not None:
        sources.append(inst["jury"])
    metrics = inst.get("metrics")
    if isinstance(metrics, Mapping) and metrics.get("jury") is not None:
        sources.append(metrics["jury"])
    out: list[JudgeVerdict] = []
    for source in sources:
        if isinstance(source, Mapping) and isinstance(source.get("per_judge"), Mapping):
            _jury_record(source, out, limit)  # pytest_medhelm.jury's JuryResult.to_record()
        else:
            _walk_jury(source, [], out, limit)
    return out[:MAX_VERDICTS]


def _jury_record(record: Mapping[str, Any], out: list[JudgeVerdict], limit: int) -> None:
    for judge, criteria in record["per_judge"].items():
        if isinstance(criteria, Mapping):
            for criterion, verdict in criteria.items():
                if isinstance(verdict, Mapping):
                    out.append(JudgeVerdict(f"{judge} / {criterion}", _score(verdict.get("score")),
                                            clip(verdict.get("explanation") or "", limit)))
                else:
                    out.append(JudgeVerdict(f"{judge} / {criterion}", _score(verdict), ""))
    for judge, reason in (record.get("failures") or {}).items():
        out.append(JudgeVerdict(str(judge), None, clip(f"excluded: {reason}", limit)))
    if record.get("raw") is not None or record.get("flagged"):
        out.append(JudgeVerdict("jury mean (1-5)", _score(record.get("raw")),
                                clip(f"flagged: {record['flagged']}" if record.get("flagged") else "", limit)))


def _walk_jury(node: Any, path: list[str], out: list[JudgeVerdict], limit: int) -> None:
    if isinstance(node, Mapping):
        name = next((str(node[k]) for k in _NAME_KEYS if isinstance(node.get(k), str)), None)
        here = path + [name] if name and name not in path else path
        if any(k in node for k in _LEAF_KEYS):
            score = next((node[k] for k in ("score", "rating") if k in node), None)
            explanation = next((node[k] for k in _EXPLANATION_KEYS if k in node), "")
            out.append(JudgeVerdict(" / ".join(here) or "jury", _score(score), clip(explanation, limit)))
            for key, value in node.items():
                if isinstance(value, (Mapping, list)) and key not in _LEAF_KEYS:
                    _walk_jury(value, here + [str(key)], out, limit)
            return
        for key, value in node.items():
            if key in _NAME_KEYS and isinstance(value, str):
                continue
            _walk_jury(value, here + [str(key)], out, limit)
    elif isinstance(node, (list, tuple)):
        for value in node:
            _walk_jury(value, path, out, limit)
    elif node is not None:
        number = finite(node)
        out.append(JudgeVerdict(" / ".join(path) or "jury", number, "" if number is not None else clip(node, limit)))
