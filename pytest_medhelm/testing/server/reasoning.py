"""Reasoning models as the test server plays them: OpenAI's checks of a reasoning model's request, and replies that
spend reasoning tokens out of the request's limit (provider documentation, summarised in docs/reasoning.md).

Checks (:func:`reasoning_problem`): a request whose model, after any ``provider/`` prefix, starts with
``o<digit>`` or ``gpt-5`` gets OpenAI's 400 for ``max_tokens`` (use ``max_completion_tokens``), a ``temperature``
other than 1, ``top_p``, ``presence_penalty``, ``frequency_penalty``, ``logprobs``, ``stop`` (the gpt-5 family),
and a ``reasoning_effort`` the model does not take. Plain model names are not checked.

Thinking (:class:`Thinking`, the options ``reasoning_tokens``, ``reasoning_shape`` and ``thinking_text``): each
reply first spends ``reasoning_tokens`` tokens thinking, out of the request's limit (``max_completion_tokens``,
else ``max_tokens``; Anthropic's ``thinking.budget_tokens`` caps them there). When they take the whole limit there
is no answer (``finish_reason`` ``"length"``); otherwise the answer is cut to the tokens left. ``usage`` counts
them in ``completion_tokens`` and says them in ``completion_tokens_details.reasoning_tokens``. The thinking's text
is ``thinking_text`` (default: ``hmm`` per token), cut to the tokens spent, and ``reasoning_shape`` says where it
goes: ``"hidden"`` (nowhere: OpenAI), ``"reasoning_content"`` (SGLang, llama.cpp, DeepSeek's API, vLLM before
0.11), ``"reasoning"`` (vLLM 0.11 and later), ``"inline"`` (``<think>…</think>\\n\\n`` before the answer in
``content``, unclosed when the limit ran out: a served reasoner without a reasoning parser), ``"null_content"``
(``reasoning_content``, and ``content`` null when nothing is left for an answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

#: the values of ``reasoning_shape``
REASONING_SHAPES = ("hidden", "reasoning_content", "reasoning", "inline", "null_content")
_OPENAI_REASONING = re.compile(r"o\d|gpt-5")
_EFFORTS = ("low", "medium", "high")


class Problem(NamedTuple):
    """Why a request is refused with a 400: OpenAI's message, and its ``param`` and ``code`` when it names them."""

    message: str
    param: str | None = None
    code: str | None = None


def is_openai_reasoning(model: Any) -> bool:
    return isinstance(model, str) and bool(_OPENAI_REASONING.match(model.rsplit("/", 1)[-1].lower()))


def reasoning_problem(body: dict[str, Any]) -> Problem | None:
    """OpenAI's 400 for what a reasoning model does not take, None when the request is one it takes (or the model
    is not a reasoning model)."""
    model = body.get("model")
    if not is_openai_reasoning(model):
        return None
    if "max_tokens" in body:
        return Problem("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                       "'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
    temperature = body.get("temperature")
    if "temperature" in body and temperature != 1:
        return Problem(f"Unsupported value: 'temperature' does not support {temperature} with this model. Only the "
                       "default (1) value is supported.", "temperature", "unsupported_value")
    for name in ("top_p", "presence_penalty", "frequency_penalty", "logprobs"):
        if name in body:
            return Problem(f"Unsupported parameter: '{name}' is not supported with this model.", name,
                           "unsupported_parameter")
    gpt5 = str(model).rsplit("/", 1)[-1].lower().startswith("gpt-5")
    if gpt5 and "stop" in body:
        return Problem("Unsupported parameter: 'stop' is not supported with this model.", "stop",
                       "unsupported_parameter")
    effort = body.get("reasoning_effort")
    efforts = (*(("minimal",) if gpt5 else ()), *_EFFORTS)
    if "reasoning_effort" in body and effort not in efforts:
        supported = ", ".join(f"'{e}'" for e in efforts[:-1]) + f", and '{efforts[-1]}'"
        return Problem(f"Unsupported value: 'reasoning_effort' does not support {effort!r} with this model. "
                       f"Supported values are: {supported}.", "reasoning_effort", "unsupported_value")
    return None


@dataclass(frozen=True)
class Thinking:
    """How a reply thinks (module docstring)."""

    tokens: int = 0
    shape: str = "hidden"
    text: str = ""

    def words(self, spent: int) -> str:
        """The thinking's text, cut to ``spent`` tokens (words)."""
        words = (self.text.split() if self.text else ["hmm"] * spent)[:spent]
        return " ".join(words)


@dataclass(frozen=True)
class Thought:
    """A reply's thinking and answer once the limit is applied."""

    answer: str
    thinking: str
    reasoning_tokens: int
    answer_tokens: int
    ran_out: bool  # the limit ended the reply (no answer, or an answer cut short)


def think(thinking: Thinking, answer: str, limit: Any, count: Any) -> Thought:
    """``answer`` after ``thinking.tokens`` tokens of thinking within ``limit`` tokens (None: no limit);
    ``count`` counts a text's tokens."""
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    spent = thinking.tokens if limit is None else min(thinking.tokens, limit)
    left = None if limit is None else limit - spent
    # the thinking took the whole limit: the model never got to say it was done, whatever its answer would be
    ran_out = limit is not None and thinking.tokens >= limit
    if ran_out:
        answer = ""
    elif left is not None and count(answer) > left:
        answer, ran_out = " ".join(answer.split()[:left]), True
    return Thought(answer, thinking.words(spent), spent, count(answer), ran_out)


def shape_message(message: dict[str, Any], thought: Thought, shape: str) -> None:
    """Put ``thought`` into an OpenAI ``message`` as ``shape`` says."""
    if shape == "inline":
        closed = f"</think>\n\n{thought.answer}" if thought.answer or not thought.ran_out else ""
        message["content"] = f"<think>{thought.thinking}{closed}"
        return
    message["content"] = thought.answer
    if shape in ("reasoning_content", "reasoning", "null_content"):
        message["reasoning_content" if shape == "null_content" else shape] = thought.thinking
    if shape == "null_content" and not thought.answer:
        message["content"] = None


def thinking_config(key: str, value: Any) -> Any:
    """A ``reasoning_*``/``thinking_text`` option checked; raises ValueError naming what was expected."""
    if key == "reasoning_tokens":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"reasoning_tokens must be an integer >= 0, got {value!r}")
    elif key == "reasoning_shape":
        if value not in REASONING_SHAPES:
            raise ValueError(f"reasoning_shape must be one of {', '.join(REASONING_SHAPES)}, got {value!r}")
    elif key == "thinking_text" and not isinstance(value, str):
        raise ValueError(f"thinking_text must be a string, got {value!r}")
    return value
