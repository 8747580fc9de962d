"""The two chat protocols the test server speaks, behind one small interface that its one request handler uses
(:mod:`.app`): OpenAI's chat completions, and Anthropic's Messages API as its documentation describes it (litellm
reaches it for ``anthropic/...`` models at ``{api_base}/v1/messages``).

Anthropic's checks: the ``anthropic-version`` header, ``model``, ``max_tokens`` (an integer >= 1) and non-empty
``messages``, ``stop_sequences`` a list of strings; with ``thinking: {"type": "enabled", "budget_tokens": N}``,
N >= 1,024 and N < ``max_tokens``, and no ``temperature`` other than 1, no ``top_k``, no ``top_p``. The key is
``x-api-key`` (401 ``authentication_error`` without it when the server has one). Errors are ``{"type": "error",
"error": {"type", "message"}}``. A reply is ``{"id": "msg_...", "type": "message", "role": "assistant", "model",
"content": [thinking block (thinking on), text block], "stop_reason", "stop_sequence", "usage": {"input_tokens",
"output_tokens"}}``: the thinking spends ``reasoning_tokens`` (at most the budget) out of ``max_tokens`` and is
billed in ``output_tokens``; the answer ends at the first of the ``stop_sequences`` it holds (``stop_reason``
``"stop_sequence"``, ``stop_sequence`` the one met) and is cut when ``max_tokens`` runs out (``"max_tokens"``; no
text block when nothing is left); otherwise ``"end_turn"``. Latency, faults, ``stop_after`` and the request log
are the chat endpoint's (:mod:`.app` serves both); a fault's error is sent in Anthropic's shape.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from pytest_medhelm.testing.server.behaviour import Answering, answer_for, reply_for
from pytest_medhelm.testing.server.protocol import (
    bearer,
    chat_request_problem,
    count_tokens,
    error_response,
    message_text,
    refused,
)
from pytest_medhelm.testing.server.reasoning import Problem, Thinking, think

#: the smallest thinking budget Anthropic accepts
MIN_THINKING_BUDGET = 1024


class Wire(Protocol):
    """What the request handler needs of a protocol."""

    name: str

    def key(self, request: web.Request) -> str | None: ...

    def refused(self, request: web.Request, api_key: str | None) -> bool: ...

    def problem(self, body: Any, headers: Mapping[str, str]) -> Problem | None: ...

    def error(self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None,
              param: str | None = None, code: str | None = None) -> web.Response: ...

    async def reply(self, cfg: Answering, body: dict, text: str) -> dict: ...


class OpenAIChat:
    name = "openai"

    def key(self, request: web.Request) -> str | None:
        return bearer(request)

    def refused(self, request: web.Request, api_key: str | None) -> bool:
        return refused(request, api_key)

    def problem(self, body: Any, headers: Mapping[str, str]) -> Problem | None:
        return chat_request_problem(body)

    def error(self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None,
              param: str | None = None, code: str | None = None) -> web.Response:
        return error_response(status, message, headers, param, code)

    async def reply(self, cfg: Answering, body: dict, text: str) -> dict:
        return await reply_for(cfg, body, text)


_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


class AnthropicMessages:
    name = "anthropic"

    def key(self, request: web.Request) -> str | None:
        return request.headers.get("x-api-key")

    def refused(self, request: web.Request, api_key: str | None) -> bool:
        return api_key is not None and self.key(request) != api_key

    def problem(self, body: Any, headers: Mapping[str, str]) -> Problem | None:
        if not headers.get("anthropic-version"):
            return Problem("anthropic-version: header is required")
        if not isinstance(body, dict):
            return Problem("The request body is not valid JSON.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return Problem("model: Field required")
        limit = body.get("max_tokens")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return Problem("max_tokens: Field required (an integer >= 1)")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return Problem("messages: at least one message is required")
        stops = body.get("stop_sequences")
        if stops is not None and (not isinstance(stops, list) or not all(isinstance(x, str) and x for x in stops)):
            return Problem("stop_sequences: Input should be a valid list of non-empty strings")
        if body.get("stream"):
            return Problem("stream=true is not supported by the pytest-medhelm test server")
        thinking = body.get("thinking")
        if thinking is None or (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
            return None
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        if not isinstance(thinking, dict) or thinking.get("type") != "enabled" or not isinstance(budget, int):
            return Problem("thinking: expected {\"type\": \"enabled\", \"budget_tokens\": N}")
        if budget < MIN_THINKING_BUDGET:
            return Problem(f"thinking.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}")
        if budget >= limit:
            return Problem("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                           "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
        if "temperature" in body and body["temperature"] != 1:
            return Problem("`temperature` may only be set to 1 when thinking is enabled.")
        for name in ("top_k", "top_p"):
            if name in body:
                return Problem(f"`{name}` cannot be set when thinking is enabled.")
        return None

    def error(self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None,
              param: str | None = None, code: str | None = None) -> web.Response:
        kind = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        text = message or ("invalid x-api-key" if status == 401 else f"HTTP {status}")
        return web.json_response({"type": "error", "error": {"type": kind, "message": text}}, status=status,
                                 headers=dict(headers or {}))

    async def reply(self, cfg: Answering, body: dict, text: str) -> dict:
        answer = await answer_for(cfg, body, text)
        if isinstance(answer, dict):  # a script's whole reply
            return answer
        thinking = body.get("thinking")
        on = isinstance(thinking, dict) and thinking.get("type") == "enabled"
        tokens = min(cfg.thinking.tokens, thinking["budget_tokens"]) if isinstance(thinking, dict) and on else 0
        answer, met = _until_stop(answer, body.get("stop_sequences") or ())
        thought = think(Thinking(tokens, "hidden", cfg.thinking.text), answer, body["max_tokens"], count_tokens)
        stop_reason = "max_tokens" if thought.ran_out else "end_turn" if met is None else "stop_sequence"
        content: list[dict[str, Any]] = []
        if on:
            content.append({"type": "thinking", "thinking": thought.thinking,
                            "signature": f"sig-{uuid.uuid4().hex[:16]}"})
        if thought.answer or not thought.ran_out:
            content.append({"type": "text", "text": thought.answer})
        prompt = [*(body["messages"]), {"content": body.get("system")}]  # (system: a string or text blocks)
        return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                "model": body["model"], "content": content,
                "stop_reason": stop_reason, "stop_sequence": met if stop_reason == "stop_sequence" else None,
                "usage": {"input_tokens": sum(count_tokens(message_text(m.get("content"))) for m in prompt
                                              if isinstance(m, dict)),
                          "output_tokens": thought.reasoning_tokens + thought.answer_tokens}}


def _until_stop(answer: str, stops: Any) -> tuple[str, str | None]:
    """``answer`` up to the first stop sequence in it (which is not sent), and that sequence (None: none met)."""
    found = [(answer.find(stop), stop) for stop in stops if stop in answer]
    if not found:
        return answer, None
    at, stop = min(found, key=lambda hit: hit[0])
    return answer[:at], stop


OPENAI, ANTHROPIC = OpenAIChat(), AnthropicMessages()
