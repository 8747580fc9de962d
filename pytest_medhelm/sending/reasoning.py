"""Reasoning models: which models the run treats as such, what each family is sent, and what of a reply is the answer.

A reasoning model thinks before it answers, and its thinking counts against the tokens a request allows. MedHELM's
answer limits (1 token for a multiple-choice letter, 10 for MedCalc) leave it no room: sent as HELM sends it, the
thinking takes the whole limit and the answer comes back empty. So, by default, a reasoning model gets a reasoning
budget on top of each request's answer limit (``--medhelm-reasoning-budget``, else :data:`DEFAULT_BUDGET`), said in
the header, the summary and every report; under ``--medhelm-compat helm``/``medhelm`` the request is the
references' (the answer limit alone) unless a budget is given.

The families (:func:`family_of`; the engine is the model name after its provider prefixes):

* ``openai``: an engine starting ``o<digit>`` or ``gpt-5`` (HELM's rule), wherever it is sent (OpenAI, Azure, a
  gateway's URL). Sent ``max_completion_tokens`` = limit + budget, no ``temperature``, ``top_p`` nor ``stop``
  (refused by these models: a stop sequence is applied to the answer once it arrives, as HELM truncates by stop
  sequences after the reply too), ``reasoning_effort`` when asked.
* ``anthropic``: a Claude model (``anthropic/``, ``bedrock/``, ``vertex_ai/``) when thinking is asked for (a
  budget or an effort given): ``thinking: {type: enabled, budget_tokens: B}`` with B at least Anthropic's 1,024,
  ``max_tokens`` = limit + B, no ``temperature`` (Anthropic refuses one but 1 while thinking). A Claude model
  without either is a plain model: it does not think unless asked.
* ``gemini``: Gemini 2.5 and later, which think by default: ``max_tokens`` = limit + budget and the thinking
  budget (litellm translates it), or ``reasoning_effort`` when asked.
* ``served``: a reasoner served by vLLM, SGLang, llama.cpp or a provider of open models, known by name (DeepSeek
  R1, QwQ, Qwen3, gpt-oss, ...) or, when ``--medhelm-reasoning-budget`` is given, any model sent to a URL (whose
  name says nothing): ``max_tokens`` = limit + budget (the thinking counts against it), the stop sequences applied
  after the answer arrives (inside the thinking they would end it).

The answer (:func:`answer_of`): the message content with a leading ``<think>…</think>`` block removed (an unclosed
block leaves an empty answer, as HELM's ``remove_deepseek_r1_thinking`` does; a ``</think>`` with no opening tag,
as chat templates that open the block in the prompt produce, ends the thinking too), then cut at the first stop
sequence the model was not sent. The thinking (a ``reasoning_content``/``reasoning`` field, Anthropic's thinking
blocks, the removed block) is kept apart from the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_medhelm.values import ChatRequest, ModelSpec, Reasoning, is_llama_cpp_model, split_thinking

__all__ = ["ANTHROPIC_MIN_BUDGET", "DEFAULT_BUDGET", "EFFORTS", "answer_of", "cut_at_stops", "family_of",
           "generation_parameters", "reasoning_for", "stops_after", "wire_request"]

#: reasoning tokens a reasoning model gets on top of each answer limit when no budget is given (default mode)
DEFAULT_BUDGET = 4096
#: the smallest ``budget_tokens`` Anthropic accepts
ANTHROPIC_MIN_BUDGET = 1024
#: the values of ``--medhelm-reasoning-effort`` (``minimal``: the gpt-5 family's lowest)
EFFORTS = ("minimal", "low", "medium", "high")
#: an Anthropic thinking budget for an effort asked without a budget
ANTHROPIC_EFFORT_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096}

_OPENAI_REASONING = re.compile(r"o\d|gpt-5")
#: engines of open reasoning models (lower case, anywhere in the engine's name)
_SERVED_REASONERS = ("deepseek-r1", "deepseek-reasoner", "qwq", "qwen3", "gpt-oss", "magistral", "-thinking",
                     "phi-4-reasoning", "r1-distill", "exaone-deep", "openthinker", "skywork-or1")
#: plain (non-thinking) variants of a family above
_NOT_REASONERS = ("instruct-2507", "qwen3-coder", "qwen3-embedding")
_ANTHROPIC_PROVIDERS = ("anthropic", "bedrock", "vertex_ai")
#: the Claude models with extended thinking (3.7 Sonnet, the Claude 4 family): another Claude refuses ``thinking``
_CLAUDE_THINKING = re.compile(r"claude-(3-7-|(opus|sonnet|haiku)-4|4)")
_GEMINI = re.compile(r"gemini-(2\.5|[3-9])")
#: providers whose Gemini requests litellm translates (a thinking budget); Gemini at an OpenAI-compatible URL takes
#: no ``thinking`` field, so it is sent as a served reasoner is
_GEMINI_PROVIDERS = ("gemini", "vertex_ai")


def engine_of(litellm_model: str) -> str:
    """The model's own name, after every provider prefix (``azure/o4-mini`` → ``o4-mini``)."""
    return litellm_model.rsplit("/", 1)[-1]


def family_of(spec: ModelSpec, *, thinking_asked: bool, budget_given: bool) -> str | None:
    """The reasoning family of ``spec`` (module docstring), None for a plain model.

    ``thinking_asked``: a budget or an effort was given (it turns Claude's thinking on); ``budget_given``: a budget
    was given (it makes any model sent to a URL a served reasoner)."""
    engine = engine_of(spec.litellm_model)
    lowered = engine.lower()
    provider = spec.name.partition("/")[0] if "/" in spec.name else ""
    if _OPENAI_REASONING.match(lowered):
        return "openai"
    claude = lowered[lowered.find("claude"):] if "claude" in lowered else ""  # (Bedrock's us.anthropic.claude-...)
    if claude and provider in _ANTHROPIC_PROVIDERS:
        return "anthropic" if thinking_asked and _CLAUDE_THINKING.match(claude) else None
    if _GEMINI.match(lowered):
        return "gemini" if provider in _GEMINI_PROVIDERS else "served"
    if any(name in lowered for name in _SERVED_REASONERS) and not any(name in lowered for name in _NOT_REASONERS):
        return "served"
    if budget_given and (spec.api_base or is_llama_cpp_model(spec.name)):
        return "served"
    return None


def reasoning_for(spec: ModelSpec, *, budget: int | None, effort: str | None, reproduce: bool,
                  judge: bool = False) -> Reasoning | None:
    """How the run treats ``spec``: its family, and the budget and effort its requests carry.

    ``budget`` and ``effort``: the run's options (None: not given); ``reproduce``: a compat mode, whose requests
    are the references' (no budget unless one is given); ``judge``: a judge or the rubric grader, which is sent what
    its family accepts (a gpt-5 judge), but whose mode the options do not change: they turn no Claude judge's
    thinking on (MedHELM's jury has Claude 3.7 Sonnet, thinking off) and make no plain judge at a URL a served
    reasoner."""
    # (a budget of 0 asks for no thinking: it turns nothing on, and makes no model at a URL a served reasoner)
    asked = not judge and (bool(budget) or bool(effort))
    family = family_of(spec, thinking_asked=asked, budget_given=not judge and bool(budget))
    if family is None:
        return None
    if budget is not None:
        amount, source = budget, "option"
    elif family == "anthropic":  # (thinking asked by an effort alone)
        amount, source = ANTHROPIC_EFFORT_BUDGETS[effort or "high"], "effort"
    elif reproduce:
        amount, source = 0, "none"
    else:
        amount, source = DEFAULT_BUDGET, "default"
    if family == "anthropic":
        amount = max(amount, ANTHROPIC_MIN_BUDGET)
    return Reasoning(family=family, budget=amount, effort=effort or "", source=source)


def wire_request(spec: ModelSpec, request: ChatRequest, model: str) -> dict[str, Any]:
    """The request every transport sends for ``request`` to ``spec`` (OpenAI's chat completions shape: the JSON body
    of a direct request or a batch line, litellm's keyword arguments): ``model`` as that wire names it, the
    messages, and the generation parameters."""
    return {"model": model, "messages": [{"role": role, "content": content} for role, content in request.messages],
            **generation_parameters(spec, request)}


def generation_parameters(spec: ModelSpec, request: ChatRequest) -> dict[str, Any]:
    """The generation parameters of ``request`` to ``spec`` (beside its model and messages), as both the direct
    OpenAI-compatible body and litellm take them: the one place that says what a model is sent."""
    family = spec.reasoning.family if spec.reasoning is not None else None
    limit = request.max_tokens + request.reasoning_budget
    if family == "openai":
        params: dict[str, Any] = {"max_completion_tokens": limit}
        if request.reasoning_effort:
            params["reasoning_effort"] = request.reasoning_effort
        return _with_format(params, request)
    params = {"temperature": request.temperature, "max_tokens": limit}
    if family == "anthropic":
        del params["temperature"]
        params["thinking"] = {"type": "enabled", "budget_tokens": request.reasoning_budget}
    elif family == "gemini":
        if request.reasoning_effort:
            params["reasoning_effort"] = request.reasoning_effort
        elif request.reasoning_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": request.reasoning_budget}
    elif family == "served" and request.reasoning_effort:
        params["reasoning_effort"] = request.reasoning_effort
    if request.stop and not stops_after(spec, request):
        params["stop"] = list(request.stop)
    return _with_format(params, request)


def _with_format(params: dict[str, Any], request: ChatRequest) -> dict[str, Any]:
    if request.response_format:
        import json

        params["response_format"] = json.loads(request.response_format)
    return params


def stops_after(spec: ModelSpec, request: ChatRequest) -> tuple[str, ...]:
    """The stop sequences of ``request`` applied to the answer once it arrives, not sent: an OpenAI reasoning
    model refuses them, and a served reasoner would stop inside its thinking."""
    family = spec.reasoning.family if spec.reasoning is not None else None
    return tuple(request.stop) if family in ("openai", "served") else ()


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    cut = len(text)
    for stop in stops:
        if stop:
            at = text.find(stop)
            if 0 <= at < cut:
                cut = at
    return text[:cut]


def answer_of(content: str, reasoning_fields: Sequence[str], stops: Sequence[str] = ()) -> tuple[str, str]:
    """(answer, thinking) of a reply: ``content`` with its thinking block split off (:func:`split_thinking`) and
    cut at the first of ``stops`` (those the model was not sent); the thinking is the reply's reasoning fields and
    the removed block, joined by a blank line."""
    answer, inline = split_thinking(content)
    thinking = "\n\n".join(part for part in (*reasoning_fields, inline) if part)
    return cut_at_stops(answer, stops), thinking
