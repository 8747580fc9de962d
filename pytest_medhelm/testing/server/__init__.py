"""A scriptable OpenAI-compatible chat-completions server for tests and benchmarks.

The plugin talks to models through litellm over HTTP, so the honest way to test retries, timeouts, rate limits,
concurrency and caching is a real HTTP server on loopback whose behaviour the test controls. This package is that
server, built on ``aiohttp.web``. It only ever binds ``127.0.0.1``.

Endpoints
---------
``POST /v1/chat/completions`` and ``POST /chat/completions``
    OpenAI ``chat.completion`` responses (:mod:`.protocol`). ``stream=true`` is refused with a 400.
``POST /v1/messages`` and ``POST /messages``
    Anthropic's Messages API (:mod:`.wire`), with extended thinking, where litellm sends an ``anthropic/...``
    model's request at an ``api_base``; the same answers, faults, counters and request log (``api``: ``"anthropic"``).
``GET /v1/models`` and ``GET /models``
    The configured model ids (``models=``). The model of a chat request is echoed, never checked.
``GET /health``
    ``{"status": "ok"}``; never needs an API key.
``/v1/files`` and ``/v1/batches``
    OpenAI's Batch API (:mod:`.batches`); its lines are answered as chat requests are, never counted as ones.
``GET /_stats``, ``GET /_requests``, ``GET|POST /_config``, ``POST /_reset``, ``POST /_stop``
    The control plane, so that a process other than the one that started the server (a pytester run, an xdist
    worker) can read counters and reconfigure it. It never needs an API key.

With ``api_key`` set, a chat or models request whose ``Authorization: Bearer`` token differs gets OpenAI's 401
("Incorrect API key provided", code ``invalid_api_key``), a Messages request whose ``x-api-key`` differs Anthropic's
401 (``authentication_error``); the key is never echoed.

Reasoning models (:mod:`.reasoning`): a request for a model named ``o<digit>...`` or ``gpt-5...`` (after any
``provider/``) is checked as OpenAI checks it, and ``reasoning_tokens``, ``reasoning_shape`` and ``thinking_text``
make every reply think out of its token limit.

The modules, by concern
-----------------------
* :mod:`.protocol`: OpenAI's wire format (bodies, errors, token counts, ``reply_shape``, the bearer token);
* :mod:`.reasoning`: reasoning models (OpenAI's checks of their requests, reasoning tokens, the thinking's shapes);
* :mod:`.wire`: the two chat protocols (OpenAI's, Anthropic's) behind the one request handler;
* :mod:`.behaviour`: the answer policy (``answer``, ``rules``, ``script``) and the planned faults;
* :mod:`.state`: configuration, counters and the request log, shared between threads;
* :mod:`.app`: the HTTP handling and how the server goes down (``stop_after``, ``/_stop``);
* :mod:`.batches`: OpenAI's Files and Batches endpoints;
* :mod:`.inprocess`: ``running_server`` / ``ChatServer``, in a background thread of this process;
* :mod:`.subprocess_server`: ``start_subprocess_server``, a child process readable from any process;
* :mod:`.cli`: ``python -m pytest_medhelm.testing.server --port 0 --answer A --latency 0.1 --port-file PATH``.
"""

from __future__ import annotations

from pytest_medhelm.testing.server.app import HOST
from pytest_medhelm.testing.server.batches import batch_stats, configure_batches
from pytest_medhelm.testing.server.behaviour import DEFAULT_ANSWER, DEFAULT_MODELS, Fault
from pytest_medhelm.testing.server.cli import main
from pytest_medhelm.testing.server.inprocess import ChatServer, running_server
from pytest_medhelm.testing.server.protocol import (
                                                    REPLY_SHAPES,
                                                    completion_body,
                                                    count_tokens,
                                                    error_body,
                                                    key_fingerprint,
                                                    last_user_text,
                                                    message_text,
)
from pytest_medhelm.testing.server.subprocess_server import SubprocessServer, start_subprocess_server

__all__ = [
    "DEFAULT_ANSWER",
    "DEFAULT_MODELS",
    "HOST",
    "REPLY_SHAPES",
    "ChatServer",
    "Fault",
    "SubprocessServer",
    "batch_stats",
    "completion_body",
    "configure_batches",
    "count_tokens",
    "error_body",
    "key_fingerprint",
    "last_user_text",
    "main",
    "message_text",
    "running_server",
    "start_subprocess_server",
]
