"""OpenAI's chat-completions protocol as the test server speaks it: request text, token counts, the completion
and error bodies, the bearer token, and the checks every chat request passes (a direct one or a batch's line).

Token usage is counted as whitespace-separated words (``str.split()``), at least 1 for a non-empty text:
``prompt_tokens`` sums this over the text of every request message, ``completion_tokens`` counts the answer.

``reply_shape`` bends how every normal answer is sent (a server that bends the protocol): ``"standard"``
(default); ``"content_parts"``, ``content`` as a list of text parts (one per word, joined they are the answer);
``"no_usage"``, no ``usage`` object; ``"negative_usage"``, counts of -1000; ``"content_object"``, ``content`` as a
JSON object (not an answer); ``"huge_usage"``, ``prompt_tokens`` of ``1e308``; ``"long_usage"``, a ``prompt_tokens``
of 4,299 digits (the longest integer Python reads by default).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from pytest_medhelm.testing.server.reasoning import Problem, Thought, reasoning_problem, shape_message

#: the values of ``reply_shape`` (see the module's docstring)
REPLY_SHAPES = ("standard", "content_parts", "no_usage", "negative_usage", "content_object", "huge_usage",
                "long_usage")
#: what OpenAI's chat completions are posted to, and what a batch's lines name
CHAT_URL = "/v1/chat/completions"

# Headers that carry credentials: their values are never logged, only the fact that one was present, so that
# tests can assert "the key was sent" without the key ever sitting in a log that a report might print.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})


def count_tokens(text: str) -> int:
    """Whitespace-split word count, at least 1 for any non-empty text (a stand-in for a tokenizer)."""
    if not text:
        return 0
    return len(text.split()) or 1


def message_text(content: Any) -> str:
    """The text of a message ``content``: a string, or OpenAI's list of parts (text parts joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def last_user_text(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def shaped(body: dict, shape: str) -> dict:
    """``body`` bent as ``reply_shape`` says (see the module's docstring)."""
    message = body["choices"][0]["message"]
    if shape == "content_parts":
        words = message["content"].split(" ")
        message["content"] = [{"type": "text", "text": w if i == len(words) - 1 else w + " "}
                              for i, w in enumerate(words)]
    elif shape == "content_object":
        message["content"] = {"text": message["content"]}
    elif shape == "no_usage":
        del body["usage"]
    elif shape == "negative_usage":
        body["usage"] = {"prompt_tokens": -1000, "completion_tokens": -1000, "total_tokens": -2000}
    elif shape == "huge_usage":
        body["usage"]["prompt_tokens"] = 1e308
    elif shape == "long_usage":
        body["usage"]["prompt_tokens"] = int("9" * 4299)
    return body


def completion_body(model: str, answer: str, messages: Sequence[Any] = (), thought: Thought | None = None,
                    reasoning_shape: str = "hidden") -> dict:
    """An OpenAI ``chat.completion`` object answering ``messages`` with ``answer``, or with ``thought`` (a reply
    that thought first: :mod:`.reasoning`) in ``reasoning_shape``."""
    if thought is not None:
        body = completion_body(model, thought.answer, messages)
        choice = body["choices"][0]
        shape_message(choice["message"], thought, reasoning_shape)
        if thought.ran_out:
            choice["finish_reason"] = "length"
        usage = body["usage"]
        usage["completion_tokens"] = thought.reasoning_tokens + thought.answer_tokens
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        usage["completion_tokens_details"] = {"reasoning_tokens": thought.reasoning_tokens}
        return body
    prompt_tokens = sum(count_tokens(message_text(m.get("content"))) for m in messages if isinstance(m, dict))
    completion_tokens = count_tokens(answer)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# (type, code, message) as OpenAI sends them, so that clients that branch on them (litellm does, on the status)
# see what they would see in production.
_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", None, "You are not allowed to access this resource."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}


def error_body(status: int, message: str | None = None, param: str | None = None, code: str | None = None) -> dict:
    """OpenAI's error object for an HTTP ``status``; ``message`` (and ``param``, ``code``) override the defaults."""
    default_type = "server_error" if status >= 500 else "invalid_request_error"
    err_type, default_code, default_message = _ERRORS.get(status, (default_type, None, f"HTTP {status}."))
    return {"error": {"message": message or default_message, "type": err_type, "param": param,
                      "code": code or default_code}}


def error_response(status: int, message: str | None = None, headers: Mapping[str, str] | None = None,
                   param: str | None = None, code: str | None = None):
    return web.json_response(error_body(status, message, param, code), status=status, headers=dict(headers or {}))


def loggable_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    kept: dict[str, str] = {}
    had_auth = False
    for name, value in headers.items():
        if name.lower() in _SECRET_HEADERS:
            had_auth = True
        else:
            kept[name] = value
    return kept, had_auth


def key_fingerprint(key: str | None) -> str | None:
    """What the server records of a bearer token: the first 16 hex digits of its sha256, never the token itself.
    A test computes the same from the key it planted to tell which key reached which server."""
    if not key:
        return None
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def refused(request: web.Request, api_key: str | None) -> bool:
    """Whether ``request`` lacks the server's key (``Authorization: Bearer KEY``), when the server has one."""
    return api_key is not None and bearer(request) != api_key


def chat_request_problem(body: Any) -> Problem | None:
    """Why ``body`` is not a chat-completions request this server answers (OpenAI's 400), None when it is. The one
    check of a direct request and of a batch's line; a reasoning model's as OpenAI checks it (:mod:`.reasoning`)."""
    if not isinstance(body, dict):
        return Problem("We could not parse the JSON body of your request.")
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        return Problem("you must provide a model parameter", "model", "missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        return Problem("'messages' must be a non-empty array", "messages")
    if body.get("stream"):
        return Problem("stream=true is not supported by the pytest-medhelm test server", "stream")
    return reasoning_problem(body)
