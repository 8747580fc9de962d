"""A scriptable OpenAI-compatible chat-completions server for tests and benchmarks.

The plugin talks to models through litellm over HTTP, so the honest way to test retries, timeouts, rate limits,
concurrency and caching is a real HTTP server on loopback whose behaviour the test controls. This module is that
server, built on ``aiohttp.web``. It only ever binds ``127.0.0.1``.

Endpoints
---------
``POST /v1/chat/completions`` and ``POST /chat/completions``
    OpenAI ``chat.completion`` responses (see ``completion_body``). ``stream=true`` is refused with a 400.
``GET /v1/models`` and ``GET /models``
    The configured model ids (``models=``). The model of a chat request is echoed, never checked.
``GET /health``
    ``{"status": "ok"}``; never needs an API key.
``/v1/files`` and ``/v1/batches``
    OpenAI's Batch API (:mod:`pytest_medhelm.testing.batches`); its lines never count as chat requests.
``GET /_stats``, ``GET /_requests``, ``GET|POST /_config``, ``POST /_reset``, ``POST /_stop``
    The control plane, so that a process other than the one that started the server (a pytester run, an xdist
    worker) can read counters and reconfigure it. It never needs an API key.

Answers
-------
For each valid request, the first of these that gives an answer wins: ``script(request_json)`` (may be async, may
return ``None`` to fall through); ``rules``, substring of the last user message → answer, first match in order;
the constant ``answer`` (default ``"A"``). The reply is sent after ``latency`` seconds (``asyncio.sleep``, so
concurrent requests overlap rather than queue).

Token usage is counted as whitespace-separated words (``str.split()``), at least 1 for a non-empty text:
``prompt_tokens`` sums this over the text of every request message, ``completion_tokens`` counts the answer.

Faults
------
``faults`` is a queue consumed in arrival order by valid, authorised chat requests (a 401 or a 400 consumes
nothing); once it is empty, requests are answered normally. Each fault is a tuple (or JSON list):

``("status", code[, headers[, message]])``
    An error response with OpenAI's ``{"error": {"message", "type", "param", "code"}}`` body, e.g.
    ``("status", 429, {"Retry-After": "1"})``.
``("timeout", seconds)``
    Hold the request for ``seconds`` (instead of ``latency``), then answer normally: a client whose timeout is
    shorter sees a timeout.
``("malformed"[, body])``
    A 200 with ``Content-Type: application/json`` whose body is not JSON (a truncated completion by default).
``("disconnect",)``
    Close the connection without sending any response.
``("ok",)``
    Answer normally; a placeholder so that a plan can say "fail, succeed, fail".

``reply_shape`` changes how every normal answer is sent (a server that bends the protocol): ``"standard"``
(default); ``"content_parts"``, ``content`` as a list of text parts (one per word, joined they are the answer);
``"no_usage"``, no ``usage`` object; ``"negative_usage"``, counts of -1000; ``"content_object"``, ``content`` as a
JSON object (not an answer).

``fail_matching={"substring": fault}`` applies ``fault`` to every request whose last user message contains the
substring, after the queue. ``stop_after=N`` serves N chat requests and, when request N+1 arrives, goes down like
a crashed process: the listening socket closes and every open connection, in-flight requests included, is dropped,
so later requests get "connection refused". ``stop()`` does the same at any moment.

With ``api_key`` set, a chat or models request whose ``Authorization: Bearer`` token differs gets OpenAI's 401
("Incorrect API key provided", code ``invalid_api_key``); the key is never echoed.

Two ways to run it
------------------
In-process, in a background thread::

    with running_server(answer="B", latency=0.05) as server:
        client = OpenAI(base_url=server.url, api_key="x")      # server.url == "http://127.0.0.1:PORT/v1"
        ...
        assert server.count == 3 and server.requests[0]["json"]["model"] == "m"

As a subprocess, readable from any process::

    with start_subprocess_server(answer="A", latency=0.1, faults=[("status", 500)]) as server:
        pytester.runpytest(f"--medhelm-api-base={server.url}", ...)
        assert server.stats()["count"] == 10

or from a shell: ``python -m pytest_medhelm.testing.server --port 0 --answer A --latency 0.1 --port-file PATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

from aiohttp import web

__all__ = [
    "HOST",
    "ChatServer",
    "Fault",
    "SubprocessServer",
    "completion_body",
    "count_tokens",
    "error_body",
    "key_fingerprint",
    "main",
    "running_server",
    "start_subprocess_server",
]

HOST = "127.0.0.1"
DEFAULT_ANSWER = "A"
DEFAULT_MODELS = ("test-model",)

Script = Callable[[dict], str | None | Awaitable[str | None]]
AnswerSpec = Union[str, Mapping[str, str], Script]

# Headers that carry credentials: their values are never logged, only the fact that one was present, so that
# tests can assert "the key was sent" without the key ever sitting in a log that a report might print.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})

# How long a stop waits for in-flight handlers before cancelling them. aiohttp treats 0 as "wait forever", and a
# stop is meant to look like a crash, so this is small but positive.
_SHUTDOWN_GRACE_S = 0.01

_CONFIG_KEYS = frozenset(
    {"answer", "rules", "script", "latency", "faults", "add_faults", "fail_matching", "api_key", "models",
     "stop_after", "log_requests", "reply_shape"}
)
#: the values of ``reply_shape`` (see the module's docstring)
REPLY_SHAPES = ("standard", "content_parts", "no_usage", "negative_usage", "content_object")


# --------------------------------------------------------------------------------------------------------------
# Request text, tokens and response bodies
# --------------------------------------------------------------------------------------------------------------


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


def _shaped(body: dict, shape: str) -> dict:
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
    return body


def completion_body(model: str, answer: str, messages: Sequence[Any] = ()) -> dict:
    """An OpenAI ``chat.completion`` object answering ``messages`` with ``answer``."""
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


def error_body(status: int, message: str | None = None) -> dict:
    """OpenAI's error object for an HTTP ``status``; ``message`` overrides the default text."""
    default_type = "server_error" if status >= 500 else "invalid_request_error"
    err_type, code, default_message = _ERRORS.get(status, (default_type, None, f"HTTP {status}."))
    return {"error": {"message": message or default_message, "type": err_type, "param": None, "code": code}}


def _error_response(status: int, message: str | None = None, headers: Mapping[str, str] | None = None):
    return web.json_response(error_body(status, message), status=status, headers=dict(headers or {}))


# --------------------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------------------

_TRUNCATED_COMPLETION = '{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [{"index": 0, "mess'


@dataclass(frozen=True)
class Fault:
    """One planned misbehaviour; build it with ``Fault.parse`` from a tuple, a JSON list or a dict."""

    kind: str  # "status" | "timeout" | "malformed" | "disconnect" | "ok"
    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    message: str | None = None
    seconds: float = 0.0
    body: str | None = None

    KINDS = ("status", "timeout", "malformed", "disconnect", "ok")

    @classmethod
    def parse(cls, spec: Fault | Sequence[Any] | Mapping[str, Any]) -> Fault:
        # Validate eagerly: a typo in a fault plan should fail where the test configures it, not show up as a
        # puzzling success later.
        if isinstance(spec, Fault):
            return spec
        if isinstance(spec, Mapping):
            spec = dict(spec)
            kind = spec.pop("kind", None)
            args: list[Any] = []
            order = {"status": ("status", "headers", "message"), "timeout": ("seconds",), "malformed": ("body",)}
            for name in order.get(kind, ()):
                if name in spec:
                    args.append(spec.pop(name))
            if spec:
                raise ValueError(f"unknown fault fields {sorted(spec)} for kind {kind!r}")
            spec = [kind, *args]
        if isinstance(spec, str) or not isinstance(spec, Sequence) or not spec:
            raise ValueError(f"a fault is a tuple like ('status', 500), got {spec!r}")
        kind, *args = spec
        if kind == "status":
            if not 1 <= len(args) <= 3:
                raise ValueError(f"('status', code[, headers[, message]]) expected, got {spec!r}")
            code = args[0]
            if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
                raise ValueError(f"fault status must be an HTTP error code 400-599, got {code!r}")
            headers = args[1] if len(args) > 1 and args[1] is not None else {}
            if not isinstance(headers, Mapping):
                raise ValueError(f"fault headers must be a mapping, got {headers!r}")
            message = args[2] if len(args) > 2 else None
            if message is not None and not isinstance(message, str):
                raise ValueError(f"fault message must be a string, got {message!r}")
            return cls("status", status=code, headers=tuple((str(k), str(v)) for k, v in headers.items()),
                       message=message)
        if kind == "timeout":
            if len(args) != 1 or not _is_number(args[0]) or args[0] < 0:
                raise ValueError(f"('timeout', seconds) expected, got {spec!r}")
            return cls("timeout", seconds=float(args[0]))
        if kind == "malformed":
            if len(args) > 1 or (args and not isinstance(args[0], str)):
                raise ValueError(f"('malformed'[, body]) expected, got {spec!r}")
            return cls("malformed", body=args[0] if args else None)
        if kind in ("disconnect", "ok"):
            if args:
                raise ValueError(f"({kind!r},) takes no arguments, got {spec!r}")
            return cls(kind)
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(cls.KINDS)}")

    def to_json(self) -> list:
        if self.kind == "status":
            return ["status", self.status, dict(self.headers), self.message]
        if self.kind == "timeout":
            return ["timeout", self.seconds]
        if self.kind == "malformed":
            return ["malformed"] if self.body is None else ["malformed", self.body]
        return [self.kind]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------------------------
# Configuration and counters, shared between the event-loop thread and the test thread
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answering:
    """What a request needs from the configuration, snapshotted at arrival so a concurrent reconfigure is atomic."""

    answer: str
    rules: tuple[tuple[str, str], ...]
    script: Script | None
    latency: float
    api_key: str | None
    stop_after: int | None
    reply_shape: str = "standard"


def _load_script(path: str) -> Script:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"script import path must look like 'package.module:function', got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"script {path!r} is not callable")
    return obj


def _parse_rules(rules: Any) -> tuple[tuple[str, str], ...]:
    if rules is None:
        return ()
    items = rules.items() if isinstance(rules, Mapping) else rules
    try:
        parsed = tuple((k, v) for k, v in items)
    except (TypeError, ValueError):
        raise ValueError(f"rules must be a mapping or pairs of substring -> answer, got {rules!r}") from None
    for k, v in parsed:
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"rules map strings to strings, got {k!r} -> {v!r}")
    return parsed


def _validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check and normalise configuration keys; raises ValueError/TypeError and changes nothing."""
    unknown = set(config) - _CONFIG_KEYS
    if unknown:
        raise TypeError(f"unknown test server option(s) {sorted(unknown)}; known: {sorted(_CONFIG_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key == "answer":
            if not isinstance(value, str):
                raise ValueError(f"answer must be a string, got {value!r}")
        elif key == "rules":
            value = _parse_rules(value)
        elif key == "script":
            if isinstance(value, str):
                value = _load_script(value)
            elif value is not None and not callable(value):
                raise ValueError(f"script must be a callable or 'module:function', got {value!r}")
        elif key == "latency":
            if not _is_number(value) or value < 0:
                raise ValueError(f"latency must be a number of seconds >= 0, got {value!r}")
            value = float(value)
        elif key in ("faults", "add_faults"):
            value = [Fault.parse(f) for f in (value or ())]
        elif key == "fail_matching":
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(f"fail_matching maps substring -> fault, got {value!r}")
            value = tuple((str(k), Fault.parse(f)) for k, f in (value or {}).items())
        elif key == "api_key":
            if value is not None and not isinstance(value, str):
                raise ValueError("api_key must be a string or None")
        elif key == "models":
            if isinstance(value, str) or not value or not all(isinstance(m, str) for m in value):
                raise ValueError(f"models must be a non-empty list of strings, got {value!r}")
            value = tuple(value)
        elif key == "stop_after":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"stop_after must be an integer >= 0 or None, got {value!r}")
        elif key == "log_requests":
            value = bool(value)
        elif key == "reply_shape":
            if value not in REPLY_SHAPES:
                raise ValueError(f"reply_shape must be one of {', '.join(REPLY_SHAPES)}, got {value!r}")
        out[key] = value
    return out


class _State:
    """Configuration, fault queue, counters and request log behind one lock.

    The event loop thread writes and the test thread reads (or reconfigures) concurrently; every access goes
    through ``_lock`` and readers get copies.
    """

    def __init__(self, **config: Any) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._answer = DEFAULT_ANSWER
        self._rules: tuple[tuple[str, str], ...] = ()
        self._script: Script | None = None
        self._latency = 0.0
        self._faults: deque[Fault] = deque()
        self._fail_matching: tuple[tuple[str, Fault], ...] = ()
        self._api_key: str | None = None
        self._models: tuple[str, ...] = DEFAULT_MODELS
        self._stop_after: int | None = None
        self._log_requests = True
        self._reply_shape = "standard"
        self.stopping = False
        self._reset_counters()
        self.configure(**config)

    def _reset_counters(self) -> None:
        self._count = 0
        self._answered = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._by_status: dict[str, int] = {}
        self._log: list[dict] = []

    # -- configuration -----------------------------------------------------------------------------------------

    def configure(self, **config: Any) -> None:
        values = _validate(config)
        with self._lock:
            for key, value in values.items():
                if key == "faults":
                    self._faults = deque(value)
                elif key == "add_faults":
                    self._faults.extend(value)
                else:
                    setattr(self, f"_{key}", value)

    def set_answer(self, answer: AnswerSpec) -> None:
        # One argument covering the three ways to script answers keeps tests short; each form replaces the
        # previous policy entirely so that "what answers now" never depends on earlier calls.
        if isinstance(answer, str):
            self.configure(answer=answer, rules=(), script=None)
        elif isinstance(answer, Mapping):
            self.configure(rules=answer, script=None)
        elif callable(answer):
            self.configure(script=answer)
        else:
            raise ValueError(f"set_answer takes a string, a mapping or a callable, got {answer!r}")

    def describe(self) -> dict:
        with self._lock:
            script = self._script
            return {
                "answer": self._answer,
                "rules": [list(r) for r in self._rules],
                "script": None if script is None else getattr(script, "__qualname__", repr(script)),
                "latency": self._latency,
                "faults": [f.to_json() for f in self._faults],
                "fail_matching": {k: f.to_json() for k, f in self._fail_matching},
                "api_key_set": self._api_key is not None,
                "models": list(self._models),
                "stop_after": self._stop_after,
                "log_requests": self._log_requests,
                "reply_shape": self._reply_shape,
            }

    @property
    def models(self) -> tuple[str, ...]:
        with self._lock:
            return self._models

    @property
    def api_key(self) -> str | None:
        with self._lock:
            return self._api_key

    # -- per-request bookkeeping (event loop thread) -----------------------------------------------------------

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def arrive(self, record: dict) -> tuple[int, _Answering]:
        """Count and log a chat request; returns its 1-based arrival number and the configuration to apply."""
        with self._lock:
            self._count += 1
            record["n"] = self._count
            if self._log_requests:
                self._log.append(record)
            self._arrived.notify_all()
            return self._count, _Answering(
                self._answer, self._rules, self._script, self._latency, self._api_key, self._stop_after,
                self._reply_shape,
            )

    def answering(self) -> _Answering:
        """The answer policy now, without counting a chat request (the batch endpoints answer their lines so)."""
        with self._lock:
            return _Answering(
                self._answer, self._rules, self._script, self._latency, self._api_key, self._stop_after
            )

    def take_fault(self, record: dict, text: str) -> Fault | None:
        """The fault for this request, if any, noted in its record at once (a held request shows it)."""
        with self._lock:
            fault = None
            if self._faults:
                fault = self._faults.popleft()
            else:
                for substring, candidate in self._fail_matching:
                    if substring in text:
                        fault = candidate
                        break
            if fault is not None and fault.kind != "ok":
                record["fault"] = fault.kind
            return fault

    def finish(self, record: dict, status: int | None, fault: str | None = None, answered: bool = False) -> None:
        with self._lock:
            record["status"] = status
            if fault is not None:
                record["fault"] = fault
            key = "disconnect" if status is None else str(status)
            self._by_status[key] = self._by_status.get(key, 0) + 1
            if answered:
                self._answered += 1

    # -- reading (any thread) ----------------------------------------------------------------------------------

    def requests(self) -> list[dict]:
        with self._lock:
            # Shallow copies: the server only ever updates top-level keys of a record after logging it.
            return [dict(r) for r in self._log]

    def stats(self) -> dict:
        with self._lock:
            return {
                "count": self._count,
                "answered": self._answered,
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "by_status": dict(self._by_status),
                "faults_pending": len(self._faults),
                "stopping": self.stopping,
            }

    def count(self) -> int:
        with self._lock:
            return self._count

    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def reset(self) -> None:
        """Zero the counters and the request log; configuration and pending faults stay."""
        with self._lock:
            in_flight = self._in_flight
            self._reset_counters()
            # Requests still being served will call leave(); keep the gauge consistent with them.
            self._in_flight = in_flight

    def wait_for_requests(self, n: int, timeout: float) -> None:
        with self._lock:
            if not self._arrived.wait_for(lambda: self._count >= n, timeout):
                raise TimeoutError(f"test server saw {self._count} chat requests, expected {n} within {timeout}s")


# --------------------------------------------------------------------------------------------------------------
# The aiohttp application (runs in whichever thread owns its event loop)
# --------------------------------------------------------------------------------------------------------------


def _loggable_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], bool]:
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
    import hashlib

    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class _ServerCore:
    def __init__(self, state: _State) -> None:
        self.state = state
        self.port: int | None = None
        # Set once the socket is closed and every connection dropped; a threading.Event so the test thread can
        # wait on it without touching the loop.
        self.stopped = threading.Event()
        self._stopped_async: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._shutdown_task: asyncio.Task | None = None

    def _make_app(self) -> web.Application:
        # A generous body limit: long clinical notes are the point of MedHELM.
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/_stats", self._stats)
        app.router.add_get("/_requests", self._requests)
        app.router.add_get("/_config", self._get_config)
        app.router.add_post("/_config", self._post_config)
        app.router.add_post("/_reset", self._reset)
        app.router.add_post("/_stop", self._stop)
        from pytest_medhelm.testing.batches import BatchService

        BatchService(self, sys.modules[__name__]).install(app)  # OpenAI's Files and Batches (--medhelm-batch)
        return app

    async def start(self, port: int = 0) -> int:
        self._stopped_async = asyncio.Event()
        # No access log: at thousands of requests per second it costs more than the server itself.
        self._runner = web.AppRunner(self._make_app(), access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, port, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self.port

    def request_shutdown(self) -> asyncio.Task:
        """Start stopping (idempotent). Call on the loop thread. Stopping cancels in-flight handlers, so a handler
        that waits for it must shield the task."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.get_running_loop().create_task(self._shutdown())
        return self._shutdown_task

    async def _shutdown(self) -> None:
        with self.state._lock:
            self.state.stopping = True
        try:
            if self._runner is not None:
                # Closes the listening socket first, then every connection after a very short grace.
                await self._runner.cleanup()
        finally:
            self.stopped.set()
            if self._stopped_async is not None:
                self._stopped_async.set()

    async def wait_stopped(self) -> None:
        assert self._stopped_async is not None
        await self._stopped_async.wait()

    # -- handlers ----------------------------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.state.enter()
        try:
            return await self._chat_inner(request)
        finally:
            self.state.leave()

    async def _chat_inner(self, request: web.Request) -> web.StreamResponse:
        state = self.state
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers, had_auth = _loggable_headers(request.headers)
        record: dict[str, Any] = {
            "n": 0,
            "method": request.method,
            "path": request.path,
            "json": body,
            "headers": headers,
            "had_auth": had_auth,
            "auth_fingerprint": key_fingerprint(_bearer(request)),
            "received_at": time.time(),
            "status": None,
            "fault": None,
        }
        if body is None:
            record["raw_body"] = raw[:10_000].decode("utf-8", "replace")
        n, cfg = state.arrive(record)

        if cfg.stop_after is not None and n > cfg.stop_after:
            state.finish(record, None, "stopped")
            # Wait for the stop instead of dropping this connection at once: the stop closes the listening socket
            # before it drops connections, so by the time this client sees the disconnect, a new connection is
            # refused. The stop cancels this handler, hence the shield.
            await asyncio.shield(self.request_shutdown())
            return web.Response(status=204)  # not reached: the stop cancels this handler
        if cfg.api_key is not None and _bearer(request) != cfg.api_key:
            return self._error(record, 401)
        if not isinstance(body, dict):
            return self._error(record, 400, "We could not parse the JSON body of your request.")
        model, messages = body.get("model"), body.get("messages")
        if not isinstance(model, str) or not model:
            return self._error(record, 400, "you must provide a model parameter")
        if not isinstance(messages, list) or not messages:
            return self._error(record, 400, "'messages' must be a non-empty array")
        if body.get("stream"):
            return self._error(record, 400, "stream=true is not supported by the pytest-medhelm test server")

        text = last_user_text(body)
        delay = cfg.latency
        fault = state.take_fault(record, text)
        if fault is not None and fault.kind == "status":
            return self._error(record, fault.status, fault.message, dict(fault.headers))
        if fault is not None and fault.kind == "disconnect":
            return self._disconnect(request, record)
        if fault is not None and fault.kind == "malformed":
            state.finish(record, 200)
            return web.Response(
                text=fault.body if fault.body is not None else _TRUNCATED_COMPLETION,
                content_type="application/json",
            )
        if fault is not None and fault.kind == "timeout":
            delay = fault.seconds

        try:
            answer = await self._answer(cfg, body, text)
        except Exception as exc:
            # Surface a broken script to the test author rather than hiding it behind a generic 500.
            traceback.print_exc()
            return self._error(record, 500, f"test server script raised {type(exc).__name__}: {exc}")
        if delay:
            await asyncio.sleep(delay)
            if request.transport is None or request.transport.is_closing():
                # the client gave up meanwhile (its timeout): nothing is sent in full, so nothing counts as answered
                state.finish(record, None)
                return web.Response(status=204)
        state.finish(record, 200, answered=True)
        return web.json_response(_shaped(completion_body(model, answer, messages), cfg.reply_shape))

    async def _answer(self, cfg: _Answering, body: dict, text: str) -> str:
        if cfg.script is not None:
            result = cfg.script(body)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                if not isinstance(result, str):
                    raise TypeError(f"script must return a string or None, got {type(result).__name__}")
                return result
        for substring, answer in cfg.rules:
            if substring in text:
                return answer
        return cfg.answer

    def _error(self, record: dict, status: int, message: str | None = None,
               headers: Mapping[str, str] | None = None) -> web.Response:
        self.state.finish(record, status)
        return _error_response(status, message, headers)

    def _disconnect(self, request: web.Request, record: dict) -> web.Response:
        self.state.finish(record, None)
        if request.transport is not None:
            request.transport.abort()
        # aiohttp silently discards a response for a closed transport.
        return web.Response(status=204)

    async def _models(self, request: web.Request) -> web.Response:
        api_key = self.state.api_key
        if api_key is not None and _bearer(request) != api_key:
            return _error_response(401)
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "pytest-medhelm"}
                for m in self.state.models]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({**self.state.stats(), "port": self.port})

    async def _requests(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.state.requests()})

    async def _get_config(self, request: web.Request) -> web.Response:
        return web.json_response(self.state.describe())

    async def _post_config(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("POST /_config takes a JSON object of options")
            self.state.configure(**changes)
        except (ValueError, TypeError, ImportError, AttributeError) as exc:
            return _error_response(400, f"bad test server configuration: {exc}")
        return web.json_response(self.state.describe())

    async def _reset(self, request: web.Request) -> web.Response:
        self.state.reset()
        return web.json_response(self.state.stats())

    async def _stop(self, request: web.Request) -> web.StreamResponse:
        # Send the reply completely before stopping, since stopping drops every connection, this one included.
        response = web.json_response({"stopping": True})
        await response.prepare(request)
        await response.write_eof()
        self.request_shutdown()
        return response


# --------------------------------------------------------------------------------------------------------------
# In-process server: an event loop in a daemon thread
# --------------------------------------------------------------------------------------------------------------


class ChatServer:
    """The test server running in a background thread of this process.

    Prefer ``running_server(**config)``; ``ChatServer(**config).start()`` / ``.stop()`` is the long form. Every
    method is safe to call from any thread while requests are being served.
    """

    def __init__(self, **config: Any) -> None:
        self._state = _State(**config)
        self._core = _ServerCore(self._state)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._startup_error: BaseException | None = None

    def start(self, timeout: float = 10.0) -> ChatServer:
        if self._thread is not None:
            raise RuntimeError("this test server was already started")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="medhelm-test-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the test server did not start within {timeout}s")
        if self._startup_error is not None:
            raise RuntimeError(f"the test server failed to start: {self._startup_error!r}") from self._startup_error
        return self

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                loop.run_until_complete(self._core.start(0))
            except BaseException as exc:  # reported to start(), in the test thread
                self._startup_error = exc
                return
            finally:
                ready.set()
            loop.run_until_complete(self._core.wait_stopped())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listening socket and drop every connection, in-flight requests included (idempotent).

        Counters and the request log stay readable afterwards. Connections attempted after this returns are
        refused.
        """
        thread, loop = self._thread, self._loop
        if thread is None or loop is None or self._startup_error is not None:
            return
        if threading.current_thread() is thread:
            # Called from a script on the loop thread: cannot wait for ourselves.
            self._core.request_shutdown()
            return
        if not self._core.stopped.is_set():
            # call_soon_threadsafe rather than run_coroutine_threadsafe: if the loop is already winding down
            # (the server stopped itself), nothing is left half-scheduled.
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(self._core.request_shutdown)
        if not self._core.stopped.wait(timeout):
            raise RuntimeError(f"the test server did not stop within {timeout}s")
        thread.join(timeout)

    def __enter__(self) -> ChatServer:
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._core.port is None:
            raise RuntimeError("the test server is not started")
        return self._core.port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, without the ``/v1`` an OpenAI client wants."""
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what an OpenAI client or litellm takes as its base URL / api_base."""
        return f"{self.base_url}/v1"

    @property
    def stopped(self) -> bool:
        """True once a stop (``stop()``, ``stop_after``, ``POST /_stop``) has fully completed."""
        return self._core.stopped.is_set()

    def wait_stopped(self, timeout: float = 10.0) -> None:
        """Block until the server has stopped by itself (``stop_after``, ``POST /_stop``); TimeoutError otherwise."""
        if not self._core.stopped.wait(timeout):
            raise TimeoutError(f"the test server did not stop within {timeout}s")

    # -- observation -------------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict]:
        """A snapshot of the received chat requests, in arrival order.

        Each record: ``n`` (1-based arrival number), ``method``, ``path``, ``json`` (the parsed body, or None and
        ``raw_body``), ``headers`` (credential headers removed), ``had_auth`` (whether one was present),
        ``auth_fingerprint`` (:func:`key_fingerprint` of the bearer token, None without one), ``received_at``, ``status`` (the HTTP status sent, None for a dropped connection or still in flight) and
        ``fault`` (the fault applied, or None).
        """
        return self._state.requests()

    @property
    def count(self) -> int:
        """Chat requests received (whatever happened to them)."""
        return self._state.count()

    @property
    def max_in_flight(self) -> int:
        """The most chat requests the server was handling at the same time."""
        return self._state.max_in_flight()

    def stats(self) -> dict:
        """The same dictionary as ``GET /_stats``: count, answered, in_flight, max_in_flight, by_status, ..."""
        return {**self._state.stats(), "port": self._core.port}

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> None:
        """Block until at least ``n`` chat requests have arrived; TimeoutError otherwise."""
        self._state.wait_for_requests(n, timeout)

    # -- control -----------------------------------------------------------------------------------------------

    def configure(self, **config: Any) -> dict:
        """Change any option at runtime (answer, rules, script, latency, faults (replaces the queue), add_faults,
        fail_matching, api_key, models, stop_after, log_requests); returns the resulting configuration."""
        self._state.configure(**config)
        return self._state.describe()

    def set_answer(self, answer: AnswerSpec) -> None:
        """Replace the answering policy: a string (constant answer), a mapping (substring of the last user
        message -> answer; the constant answer stays the fallback) or a callable ``(request_json) -> str | None``."""
        self._state.set_answer(answer)

    def add_faults(self, *faults: Any) -> None:
        """Append faults to the queue, e.g. ``add_faults(("status", 429, {"Retry-After": "1"}), ("disconnect",))``."""
        self._state.configure(add_faults=faults)

    def reset(self) -> None:
        """Zero the counters and the request log (configuration and pending faults stay)."""
        self._state.reset()


@contextlib.contextmanager
def running_server(**config: Any) -> Iterator[ChatServer]:
    """Run a ``ChatServer`` on a free loopback port for the duration of the ``with`` block."""
    server = ChatServer(**config).start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------------------------
# Subprocess server
# --------------------------------------------------------------------------------------------------------------


def _config_to_json(config: Mapping[str, Any]) -> dict:
    out = dict(config)
    for key in ("faults", "add_faults"):
        if key in out:
            out[key] = [Fault.parse(f).to_json() for f in out[key] or ()]
    if out.get("fail_matching") is not None:
        out["fail_matching"] = {k: Fault.parse(f).to_json() for k, f in out["fail_matching"].items()}
    if out.get("rules") is not None:
        out["rules"] = [list(pair) for pair in _parse_rules(out["rules"])]
    if "models" in out:
        out["models"] = list(out["models"])
    if callable(out.get("script")):
        raise TypeError(
            "a subprocess server cannot take a Python callable; pass an import path, script='package.module:function'"
        )
    return out


class SubprocessServer:
    """Handle on a test server running in a child process (from ``start_subprocess_server``).

    Observation and control go over HTTP (``/_stats``, ``/_config``...), so the same numbers are visible to any
    process. The child also exits when this process dies, because it watches its stdin pipe.
    """

    def __init__(self, process: subprocess.Popen, workdir: str, port_file: Path, log_path: Path, log_file) -> None:
        self.process = process
        self._workdir = workdir
        self._port_file = port_file
        self._log_path = log_path
        self._log_file = log_file
        self._port: int | None = None
        self._output: str | None = None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the test server exited with status {self.process.returncode} before listening:\n{self.output()}"
                )
            try:
                text = self._port_file.read_text().strip()
            except FileNotFoundError:
                text = ""
            if text:
                self._port = int(text)
                return
            time.sleep(0.01)
        raise RuntimeError(f"the test server did not start within {timeout}s:\n{self.output()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the test server is not ready")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"{self.base_url}/v1"

    def output(self) -> str:
        """What the child wrote to stdout/stderr so far (script tracebacks, startup errors)."""
        if self._output is not None:
            return self._output
        try:
            return self._log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _call(self, method: str, path: str, payload: Any = None, timeout: float = 10.0) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise RuntimeError(f"test server {method} {path} failed with {exc.code}: {detail}") from None

    def stats(self) -> dict:
        """``GET /_stats``: count, answered, in_flight, max_in_flight, by_status, faults_pending, stopping, port."""
        return self._call("GET", "/_stats")

    @property
    def count(self) -> int:
        """Chat requests received (one HTTP round trip)."""
        return self.stats()["count"]

    @property
    def max_in_flight(self) -> int:
        return self.stats()["max_in_flight"]

    @property
    def requests(self) -> list[dict]:
        """The request log, as ``ChatServer.requests`` (one HTTP round trip)."""
        return self._call("GET", "/_requests")["requests"]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while (count := self.count) < n:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"test server saw {count} chat requests, expected {n} within {timeout}s")
            time.sleep(0.01)

    def configure(self, **config: Any) -> dict:
        """``POST /_config``; same options as ``ChatServer.configure`` except that ``script`` is an import path."""
        return self._call("POST", "/_config", _config_to_json(config))

    def set_answer(self, answer: str | Mapping[str, str]) -> None:
        if isinstance(answer, str):
            self.configure(answer=answer, rules=[], script=None)
        elif isinstance(answer, Mapping):
            self.configure(rules=answer, script=None)
        else:
            raise ValueError("a subprocess server takes a string or a mapping; use configure(script='mod:func')")

    def add_faults(self, *faults: Any) -> None:
        self.configure(add_faults=faults)

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate the child (killing it if it lingers) and clean up; idempotent. Returns its exit status."""
        process = self.process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if self._output is None:
            self._output = self.output()
            self._log_file.close()
            shutil.rmtree(self._workdir, ignore_errors=True)
        return process.returncode

    def __enter__(self) -> SubprocessServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_subprocess_server(
    *, port: int = 0, startup_timeout: float = 15.0, env: Mapping[str, str] | None = None, **config: Any
) -> SubprocessServer:
    """Start ``python -m pytest_medhelm.testing.server`` and return once it listens.

    ``config`` takes the options of ``ChatServer`` (``script`` as a ``'package.module:function'`` import path).
    The child is always reaped by ``stop()`` / the ``with`` block, and exits on its own if this process dies.
    """
    checkable = {k: v for k, v in config.items() if k != "script"}
    _validate(checkable)  # fail here, with a traceback in the test, rather than in the child
    config_json = json.dumps(_config_to_json(config))

    workdir = tempfile.mkdtemp(prefix="medhelm-test-server-")
    port_file = Path(workdir, "port")
    log_path = Path(workdir, "server.log")
    child_env = dict(os.environ if env is None else env)
    # Make the package importable in the child even from an uninstalled checkout.
    package_root = str(Path(__file__).resolve().parents[2])
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child_env.get("PYTHONPATH")) if p)
    command = [
        sys.executable, "-m", "pytest_medhelm.testing.server",
        "--port", str(port), "--port-file", str(port_file), "--watch-stdin", "--config", config_json,
    ]
    log_file = open(log_path, "wb")  # a file, not a pipe: nobody reads a pipe, and a full one would block the child
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
                                   env=child_env)
    except BaseException:
        log_file.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    handle = SubprocessServer(process, workdir, port_file, log_path, log_file)
    try:
        handle._wait_ready(startup_timeout)
    except BaseException:
        handle.stop()
        raise
    return handle


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------


def _write_port_file(path: str, port: int) -> None:
    # Write then rename, so that a reader polling the file never sees a partial number.
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def _watch_stdin(loop: asyncio.AbstractEventLoop, core: _ServerCore) -> None:
    # The parent holds our stdin pipe; EOF means it closed it or died, and an orphaned server must not linger.
    # os.read on the raw descriptor, not sys.stdin: a daemon thread blocked holding sys.stdin's lock would make
    # interpreter shutdown abort.
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    with contextlib.suppress(RuntimeError):  # loop already closed
        loop.call_soon_threadsafe(core.request_shutdown)


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def _parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict]:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_medhelm.testing.server",
        description="Scriptable OpenAI-compatible chat-completions test server (loopback only).",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF (parent gone)")
    parser.add_argument("--config", type=_json_arg, default={}, help="JSON object of options (flags override it)")
    parser.add_argument("--answer", help=f"constant answer (default {DEFAULT_ANSWER!r})")
    parser.add_argument("--latency", type=float, help="seconds before each answer")
    parser.add_argument("--rules", type=_json_arg, help='JSON {"substring": "answer", ...}')
    parser.add_argument("--faults", type=_json_arg, help='JSON [["status", 429, {"Retry-After": "1"}], ...]')
    parser.add_argument("--fail-matching", type=_json_arg, help='JSON {"substring": ["status", 500], ...}')
    parser.add_argument("--script", help="answer with package.module:function(request_json) -> str | None")
    parser.add_argument("--api-key", help="require this bearer token")
    parser.add_argument("--model", action="append", dest="models", help="a model id for /v1/models (repeatable)")
    parser.add_argument("--stop-after", type=int, help="serve N chat requests, then go down")
    parser.add_argument("--reply-shape", choices=REPLY_SHAPES, help="bend every answer (content parts, no usage, ...)")
    args = parser.parse_args(argv)
    if not isinstance(args.config, dict):
        parser.error("--config must be a JSON object")
    config = dict(args.config)
    for key in ("answer", "latency", "rules", "faults", "fail_matching", "script", "api_key", "models",
                "stop_after", "reply_shape"):
        value = getattr(args, key)
        if value is not None:
            config[key] = value
    try:
        _validate(config)
    except (ValueError, TypeError, ImportError, AttributeError) as exc:
        parser.error(str(exc))
    return args, config


async def _serve(args: argparse.Namespace, config: dict) -> None:
    core = _ServerCore(_State(**config))
    port = await core.start(args.port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
            loop.add_signal_handler(sig, core.request_shutdown)
    if args.watch_stdin:
        threading.Thread(target=_watch_stdin, args=(loop, core), daemon=True).start()
    if args.port_file:
        _write_port_file(args.port_file, port)
    print(f"pytest-medhelm test server listening on http://{HOST}:{port}/v1", file=sys.stderr, flush=True)
    await core.wait_stopped()


def main(argv: Sequence[str] | None = None) -> int:
    args, config = _parse_args(argv)
    asyncio.run(_serve(args, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
