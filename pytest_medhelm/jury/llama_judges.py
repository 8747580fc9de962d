"""Judges on the llama.cpp servers we start (``local/...``): their replies constrained to the judgement's JSON.

A small local model asked for HELM's judgement JSON often writes something else, and writes it until
``max_tokens`` (HELM's 4096): SmolLM2-135M spent minutes per judgement and most replies did not parse. llama.cpp
can constrain sampling with a grammar built from a JSON schema (``llama_cpp.server`` reads it from the request's
``response_format: {"type": "json_object", "schema": ...}``), so every reply it finishes is a valid judgement:

* the schema is the rubric's: ``{criterion: {"score": one of 1..5, "explanation": string}}`` for exactly the
  benchmark's criteria, in the rubric's order, nothing else;
* the explanation is capped at :data:`EXPLANATION_MAX_CHARS` characters (the rubric asks for one or two
  sentences), and ``max_tokens`` at what that object can take (:func:`max_tokens_for`), so a 135M model finishes.

The prompt is unchanged: the judge reads HELM's rubric either way. Only judges named ``local/...`` get this: a
hosted judge receives HELM's plain request (the paper's judges were not constrained). The ``response_format`` and
the smaller ``max_tokens`` are part of the request, and so of its cache key. :func:`notice` is the line that says
so on screen.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pytest_medhelm.values import is_llama_cpp_model

#: the longest explanation a local judge may write per criterion (characters)
EXPLANATION_MAX_CHARS = 160
#: the scores a judge may give (the rubric's 1-5 scale); an enum, which llama.cpp's schema grammar supports
#: (it ignores ``minimum``/``maximum``)
SCORES = (1, 2, 3, 4, 5)


def constrained(judge_name: str) -> bool:
    """Whether ``judge_name`` is a judge on a llama.cpp server the run starts (``local/...``)."""
    return is_llama_cpp_model(judge_name)


def judgement_schema(criteria: Sequence[str]) -> dict:
    """The JSON schema of one judgement: every criterion, each with an integer score 1-5 and a short explanation."""
    criterion = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "enum": list(SCORES)},
            "explanation": {"type": "string", "maxLength": EXPLANATION_MAX_CHARS},
        },
        "required": ["score", "explanation"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {name: criterion for name in criteria},
        "required": list(criteria),
        "additionalProperties": False,
    }


def response_format(criteria: Sequence[str]) -> str:
    """The request's ``response_format`` (llama_cpp.server's form), as the canonical JSON a ChatRequest holds."""
    # keys in the schema's own order, never sorted: llama.cpp's grammar writes the properties in that order
    # (the rubric's criteria, score before explanation, as HELM's example shows them)
    return json.dumps({"type": "json_object", "schema": judgement_schema(criteria)}, separators=(",", ":"))


def max_tokens_for(criteria: Sequence[str]) -> int:
    """Enough tokens for the largest judgement the schema allows (a token is at least one character): per
    criterion its quoted name, ``: {"score": N, "explanation": ""}, `` and the explanation, plus the braces."""
    return sum(len(json.dumps(name)) + 40 + EXPLANATION_MAX_CHARS for name in criteria) + 8


def notice(judge_names: Sequence[str], helm_max_tokens: int) -> str | None:
    """One line for the terminal when some judges are constrained: what differs from HELM, and for which judges."""
    local = [name for name in judge_names if constrained(name)]
    if not local:
        return None
    return (f"medhelm: local judge{'s' if len(local) > 1 else ''} {', '.join(local)}: replies constrained to the "
            f"judgement's JSON schema (llama.cpp grammar: scores 1-5, explanations of at most "
            f"{EXPLANATION_MAX_CHARS} characters, about {max_tokens_for(('accuracy', 'completeness', 'clarity'))} "
            f"tokens at most instead of HELM's {helm_max_tokens}); the prompt is HELM's rubric, unchanged")
