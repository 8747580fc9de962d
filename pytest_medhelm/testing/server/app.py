"""The test server's HTTP handling: the aiohttp application, its chat and models endpoints, its control plane
(``/_stats``, ``/_requests``, ``/_config``, ``/_reset``, ``/_stop``) and how it goes down.

It runs in whichever thread owns its event loop (:mod:`.inprocess`, :mod:`.cli`). ``stop_after=N`` serves N chat
requests and, when request N+1 arrives, goes down like a crashed process: the listening socket closes and every
open connection, in-flight requests included, is dropped, so later requests get "connection refused". A stop at
any other moment does the same.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pytest_medhelm.testing.server.batches import BatchService
from pytest_medhelm.testing.server.behaviour import TRUNCATED_COMPLETION
from pytest_medhelm.testing.server.protocol import (
    error_response,
    key_fingerprint,
    last_user_text,
    loggable_headers,
    refused,
)
from pytest_medhelm.testing.server.state import ServerState
from pytest_medhelm.testing.server.wire import ANTHROPIC, OPENAI, Wire

HOST = "127.0.0.1"

# How long a stop waits for in-flight handlers before cancelling them. aiohttp treats 0 as "wait forever", and a
# stop is meant to look like a crash, so this is small but positive.
_SHUTDOWN_GRACE_S = 0.01


class LoopbackURLs:
    """The addresses of a test server listening on ``port`` of 127.0.0.1 (in this process or in a child)."""

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, without the ``/v1`` an OpenAI client wants."""
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what an OpenAI client or litellm takes as its base URL / api_base."""
        return f"{self.base_url}/v1"


class ServerCore:
    def __init__(self, state: ServerState) -> None:
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
        app.router.add_post("/v1/messages", self._messages)  # Anthropic's Messages API (.wire)
        app.router.add_post("/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/_stats", self._stats)
        app.router.add_get("/_requests", self._requests)
        app.router.add_get("/_config", self._get_config)
        app.router.add_post("/_config", self._post_config)
        app.router.add_post("/_reset", self._reset)
        app.router.add_post("/_stop", self._stop)
        BatchService(self.state).install(app)  # OpenAI's Files and Batches (--medhelm-batch)
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
        return await self._serve(request, OPENAI)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, ANTHROPIC)

    async def _serve(self, request: web.Request, wire: Wire) -> web.StreamResponse:
        self.state.enter()
        try:
            return await self._serve_inner(request, wire)
        finally:
            self.state.leave()

    async def _serve_inner(self, request: web.Request, wire: Wire) -> web.StreamResponse:
        state = self.state
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers, had_auth = loggable_headers(request.headers)
        record: dict[str, Any] = {
            "n": 0,
            "method": request.method,
            "path": request.path,
            "json": body,
            "headers": headers,
            "had_auth": had_auth,
            "auth_fingerprint": key_fingerprint(wire.key(request)),
            "api": wire.name,
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
        if wire.refused(request, cfg.api_key):
            return self._error(record, wire, 401)
        problem = wire.problem(body, request.headers)
        if problem is not None:
            return self._error(record, wire, 400, problem.message, param=problem.param, code=problem.code)
        assert isinstance(body, dict)  # (chat_request_problem checked it)

        text = last_user_text(body)
        delay = cfg.latency
        fault = state.take_fault(record, text)
        if fault is not None and fault.kind == "status":
            return self._error(record, wire, fault.status, fault.message, dict(fault.headers))
        if fault is not None and fault.kind == "disconnect":
            return self._disconnect(request, record)
        if fault is not None and fault.kind == "malformed":
            state.finish(record, 200)
            return web.Response(
                text=fault.body if fault.body is not None else TRUNCATED_COMPLETION,
                content_type="application/json",
            )
        if fault is not None and fault.kind == "timeout":
            delay = fault.seconds

        try:
            reply = await wire.reply(cfg, body, text)
        except Exception as exc:  # noqa: BLE001  # a broken script: shown to the test author, not a generic 500
            traceback.print_exc()
            return self._error(record, wire, 500, f"test server script raised {type(exc).__name__}: {exc}")
        if delay:
            await asyncio.sleep(delay)
            if request.transport is None or request.transport.is_closing():
                # the client gave up meanwhile (its timeout): nothing is sent in full, so nothing counts as answered
                state.finish(record, None)
                return web.Response(status=204)
        state.finish(record, 200, answered=True)
        return web.json_response(reply)

    def _error(self, record: dict, wire: Wire, status: int, message: str | None = None,
               headers: Mapping[str, str] | None = None, param: str | None = None,
               code: str | None = None) -> web.Response:
        self.state.finish(record, status)
        return wire.error(status, message, headers, param, code)

    def _disconnect(self, request: web.Request, record: dict) -> web.Response:
        self.state.finish(record, None)
        if request.transport is not None:
            request.transport.abort()
        # aiohttp silently discards a response for a closed transport.
        return web.Response(status=204)

    async def _models(self, request: web.Request) -> web.Response:
        if refused(request, self.state.api_key):
            return error_response(401)
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
            return error_response(400, f"bad test server configuration: {exc}")
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
