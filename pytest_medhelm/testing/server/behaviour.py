"""What the test server does with a chat request: its answer policy and its planned faults, and the options that
set them (checked where they are given: a typo fails in the test that configures it).

Answers
-------
For each valid request, the first of these that gives an answer wins: ``script(request_json)`` (may be async, may
return ``None`` to fall through); ``rules``, substring of the last user message → answer, first match in order;
the constant ``answer`` (default ``"A"``). The reply is sent after ``latency`` seconds (``asyncio.sleep``, so
concurrent requests overlap rather than queue). A script that returns a dict instead of a string controls the
whole reply: the dict is sent as the response body as it is (a ``chat.completion`` at the chat endpoint, a
Messages reply at Anthropic's, a batch line's ``response.body``), with no ``reply_shape`` or thinking applied.

Reasoning
---------
``reasoning_tokens`` (int >= 0, default 0), ``reasoning_shape`` (``"hidden"``, ``"reasoning_content"``,
``"reasoning"``, ``"inline"``, ``"null_content"``; default ``"hidden"``) and ``thinking_text`` (default ``""``: one
``hmm`` per reasoning token) make each reply think before it answers, out of the request's token limit, as
:mod:`.reasoning` describes; Anthropic's Messages API (:mod:`.wire`) spends them too, at most its
``thinking.budget_tokens``.

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

``fail_matching={"substring": fault}`` applies ``fault`` to every request whose last user message contains the
substring, after the queue. ``stop_after=N`` serves N chat requests and, when request N+1 arrives, goes down like
a crashed process (:mod:`.app`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_medhelm.testing.server.protocol import REPLY_SHAPES, completion_body, count_tokens, shaped
from pytest_medhelm.testing.server.reasoning import Thinking, think, thinking_config

DEFAULT_ANSWER = "A"
DEFAULT_MODELS = ("test-model",)

#: what a script returns: an answer, a whole reply body (a dict), or None to fall through to the rules
ScriptResult = str | dict[str, Any] | None
Script = Callable[[dict], ScriptResult | Awaitable[ScriptResult]]
AnswerSpec = str | Mapping[str, str] | Script

CONFIG_KEYS = frozenset(
    {"answer", "rules", "script", "latency", "faults", "add_faults", "fail_matching", "api_key", "models",
     "stop_after", "log_requests", "reply_shape", "reasoning_tokens", "reasoning_shape", "thinking_text"}
)

TRUNCATED_COMPLETION = '{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [{"index": 0, "mess'


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


@dataclass(frozen=True)
class Answering:
    """What a request needs from the configuration, snapshotted at arrival so a concurrent reconfigure is atomic."""

    answer: str
    rules: tuple[tuple[str, str], ...]
    script: Script | None
    latency: float
    api_key: str | None
    stop_after: int | None
    reply_shape: str = "standard"
    #: how a reply thinks before it answers (:mod:`.reasoning`)
    thinking: Thinking = Thinking()


def load_script(path: str) -> Script:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"script import path must look like 'package.module:function', got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"script {path!r} is not callable")
    return obj


def parse_rules(rules: Any) -> tuple[tuple[str, str], ...]:
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


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check and normalise configuration keys; raises ValueError/TypeError and changes nothing."""
    unknown = set(config) - CONFIG_KEYS
    if unknown:
        raise TypeError(f"unknown test server option(s) {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key == "answer":
            if not isinstance(value, str):
                raise ValueError(f"answer must be a string, got {value!r}")
        elif key == "rules":
            value = parse_rules(value)
        elif key == "script":
            if isinstance(value, str):
                value = load_script(value)
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
        elif key in ("reasoning_tokens", "reasoning_shape", "thinking_text"):
            value = thinking_config(key, value)
        elif key == "reply_shape":
            if value not in REPLY_SHAPES:
                raise ValueError(f"reply_shape must be one of {', '.join(REPLY_SHAPES)}, got {value!r}")
        out[key] = value
    return out


async def answer_for(cfg: Answering, body: dict, text: str) -> str | dict[str, Any]:
    """The answer to the request ``body`` (whose last user message is ``text``) under the policy ``cfg``: a string,
    or the dict a script returned (the whole reply, sent as it is)."""
    if cfg.script is not None:
        result = cfg.script(body)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            if not isinstance(result, (str, dict)):
                raise TypeError(f"script must return a string, a dict (the whole reply) or None, got "
                                f"{type(result).__name__}")
            return result
    for substring, answer in cfg.rules:
        if substring in text:
            return answer
    return cfg.answer


async def reply_for(cfg: Answering, body: dict, text: str) -> dict:
    """The ``chat.completion`` answering a valid request ``body``: a direct one or a batch's line."""
    answer = await answer_for(cfg, body, text)
    if isinstance(answer, dict):
        return answer
    thought = None
    if cfg.thinking.tokens or cfg.thinking.shape != "hidden":
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        thought = think(cfg.thinking, answer, limit, count_tokens)
    return shaped(completion_body(body["model"], answer, body["messages"], thought, cfg.thinking.shape),
                  cfg.reply_shape)
