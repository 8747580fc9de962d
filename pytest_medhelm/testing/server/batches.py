"""OpenAI's Files and Batches endpoints on the test server, as OpenAI documents them.

``POST /v1/files``
    multipart ``purpose=batch`` and ``file`` (JSONL); returns a File object (``id``, ``bytes``, ``purpose``...).
``GET /v1/files/{id}/content``
    the file's bytes (an input file, or a batch's output or error file).
``POST /v1/batches``
    ``{"input_file_id", "endpoint": "/v1/chat/completions", "completion_window": "24h"}``; returns a Batch object
    in ``validating``. A malformed input file (a line that is not JSON, a ``custom_id`` twice, a ``url`` other
    than the endpoint, a body without ``model`` or ``messages``) makes the batch ``failed`` with ``errors.data``.
``GET /v1/batches/{id}``
    the Batch object. Each GET is a poll: ``validating``, then ``in_progress`` with its ``request_counts``, and
    after ``polls`` polls (configurable) the batch ends: ``completed`` (an ``output_file_id``; an
    ``error_file_id`` when some lines failed), or, as configured, ``failed`` or ``expired`` (half of the lines
    answered, the rest in the error file with ``batch_expired``).
``POST /v1/batches/{id}/cancel``
    ``cancelled`` at once (the lines not answered are in the error file, code ``batch_cancelled``).

Lines are answered by the server's own answer policy (``answer``, ``rules``, ``script``) without counting as chat
requests: a batch run leaves ``/_stats``' ``count`` at 0. A line whose last user message contains a substring of
``fail_lines`` (``{substring: message}``) gets a 400 in the error file with that message, as a provider rejects one
request of a batch. With the server's ``api_key`` set, every call needs it.

Faults a provider (or a man in the middle) may bring, each a configuration key (``POST /_batches``):

``outcome: "in_progress"``
    a batch that never ends (every poll: ``in_progress``, 0 answered).
``content_failures: N``
    the next N downloads of a batch's output or error file answer 502 (then the file, as usual).
``status_padding: N``
    every ``GET /v1/batches/{id}`` reply carries N more bytes (``metadata.padding``), streamed in 1 MiB chunks
    without a Content-Length (the server never holds them); ``GET /_batches``' ``status_bytes_sent`` says how many
    bytes of such replies reached the socket before the client hung up. ``upload_padding: N``: the same for the
    File object ``POST /v1/files`` returns (counted in ``status_bytes_sent`` too).
``line_faults: {substring: fault}``
    the result line of each request whose last user message contains ``substring`` is, per ``fault``:
    ``duplicate`` (written twice, the second copy's answer ``DUPLICATE``), ``other_model`` (its reply names the
    model ``someone-else``), ``nested`` (its response body nested 20,000 lists deep, its ``custom_id`` readable),
    ``not_object`` (a JSON list instead of an object).
``foreign_lines: N``
    N more answer lines in the output file, for ``custom_id``s the batch did not hold.

Control plane (no key): ``GET /_batches`` (files uploaded, batches created, their ids, polls, every line's
``custom_id`` and body) and ``POST /_batches`` (``polls``, ``outcome``, ``fail_lines``, ``available``: false makes
``POST /v1/files`` a 404 like a server without a Batch API; the faults above; ``reset``: forget every file and
batch). :func:`batch_stats` and :func:`configure_batches` call them from any process.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pytest_medhelm.testing.server.behaviour import reply_for
from pytest_medhelm.testing.server.protocol import (
    CHAT_URL,
    chat_request_problem,
    error_body,
    error_response,
    last_user_text,
    refused,
)
from pytest_medhelm.testing.server.state import ServerState

OUTCOMES = ("completed", "failed", "expired", "in_progress")
LINE_FAULTS = ("duplicate", "other_model", "nested", "not_object")
NESTING = 20_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class BatchService:
    """The Files and Batches endpoints of one test server, answering lines by the chat server's own policy."""

    def __init__(self, state: ServerState) -> None:
        self.state = state  # the chat server's state: its answer policy and its key
        self._lock = threading.Lock()
        self.config: dict[str, Any] = {"polls": 2, "outcome": "completed", "fail_lines": {}, "available": True,
                                       "content_failures": 0, "status_padding": 0, "upload_padding": 0,
                                       "line_faults": {},
                                       "foreign_lines": 0}
        self._reset()

    def _reset(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []
        self.polls = 0
        self.lines: list[dict[str, Any]] = []
        self.status_bytes_sent = 0
        self.downloads_failed = 0

    def install(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._keyed(self._upload))
        app.router.add_get("/v1/files/{file_id}/content", self._keyed(self._content))
        app.router.add_post("/v1/batches", self._keyed(self._create))
        app.router.add_get("/v1/batches/{batch_id}", self._keyed(self._get))
        app.router.add_post("/v1/batches/{batch_id}/cancel", self._keyed(self._cancel))
        app.router.add_get("/_batches", self._stats)
        app.router.add_post("/_batches", self._configure)

    # ------------------------------------------------------------------ helpers
    def _keyed(self, handler: Handler) -> Handler:
        """``handler`` behind the server's key (the chat endpoint's 401 when it is missing or wrong)."""

        async def keyed(request: web.Request) -> web.StreamResponse:
            return error_response(401) if refused(request, self.state.api_key) else await handler(request)

        return keyed

    def _error(self, status: int, message: str) -> web.Response:
        return error_response(status, message)

    def _file(self, content: bytes, purpose: str, filename: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": _id("file"), "object": "file", "bytes": len(content),
                                 "created_at": int(time.time()), "filename": filename, "purpose": purpose,
                                 "content": content}
        self.files[entry["id"]] = entry
        return entry

    @staticmethod
    def _public(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if k not in ("content", "_lines", "_polls")}

    # ------------------------------------------------------------------ files
    async def _upload(self, request: web.Request) -> web.StreamResponse:
        if not self.config["available"]:
            return self._error(404, "Invalid URL (POST /v1/files)")
        try:
            form = await request.post()
        except Exception:  # noqa: BLE001 - not a multipart body: the client's error
            return self._error(400, "expected a multipart/form-data body with purpose and file")
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch" or upload is None or not hasattr(upload, "file"):
            return self._error(400, "expected purpose=batch and a file")
        content = upload.file.read()
        with self._lock:
            entry = self._file(content, "batch", getattr(upload, "filename", "batch.jsonl") or "batch.jsonl")
        if self.config["upload_padding"]:
            return await self._padded(request, self._public(entry), self.config["upload_padding"])
        return web.json_response(self._public(entry))

    async def _content(self, request: web.Request) -> web.Response:
        entry = self.files.get(request.match_info["file_id"])
        if entry is None:
            return self._error(404, "No such File object")
        if entry["purpose"] == "batch_output":
            with self._lock:
                failing = self.config["content_failures"] > 0
                if failing:
                    self.config["content_failures"] -= 1
                    self.downloads_failed += 1
            if failing:
                return self._error(502, "Bad gateway (the test server was told to fail this download)")
        return web.Response(body=entry["content"], content_type="application/octet-stream")

    # ------------------------------------------------------------------ batches
    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return self._error(400, "expected a JSON object")
        if body.get("endpoint") != CHAT_URL:
            return self._error(400, f"endpoint must be {CHAT_URL}")
        if body.get("completion_window") != "24h":
            return self._error(400, "completion_window must be 24h")
        input_file_id = body.get("input_file_id")
        source = self.files.get(input_file_id) if isinstance(input_file_id, str) else None
        if source is None:
            return self._error(400, f"No such File object: {body.get('input_file_id')}")
        lines, errors = self._read_input(source["content"])
        now = int(time.time())
        batch = {"id": _id("batch"), "object": "batch", "endpoint": CHAT_URL, "errors": None,
                 "input_file_id": source["id"], "completion_window": "24h", "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
                 "expires_at": now + 86400, "completed_at": None, "failed_at": None, "expired_at": None,
                 "cancelled_at": None, "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                 "metadata": body.get("metadata"), "_lines": lines, "_polls": 0}
        if errors:
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": errors})
        with self._lock:
            self.batches[batch["id"]] = batch
            self.created.append(batch["id"])
            self.lines.extend({"batch": batch["id"], "custom_id": line["custom_id"], "body": line["body"]}
                              for line in lines)
        return web.json_response(self._public(batch))

    @staticmethod
    def _read_input(content: bytes) -> tuple[list[dict], list[dict]]:
        lines: list[dict] = []
        errors: list[dict] = []
        seen: set[str] = set()
        for number, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                errors.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                               "line": number, "param": None})
                continue
            body = line.get("body") if isinstance(line, dict) else None
            custom_id = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(custom_id, str) or custom_id in seen:
                errors.append({"code": "duplicate_custom_id" if custom_id in seen else "missing_required_parameter",
                               "message": "custom_id must be a string unique within the batch", "line": number,
                               "param": "custom_id"})
            elif line.get("method") != "POST" or line.get("url") != CHAT_URL:
                errors.append({"code": "invalid_url", "message": f"method must be POST and url {CHAT_URL}",
                               "line": number, "param": "url"})
            elif (problem := chat_request_problem(body)) is not None:  # what a direct request would get a 400 for
                errors.append({"code": problem.code or "invalid_request", "message": problem.message,
                               "line": number, "param": problem.param or "body"})
            else:
                seen.add(custom_id)
                lines.append(line)
        return lines, errors

    async def _get(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return self._error(404, "No such Batch object")
        with self._lock:
            self.polls += 1
        if batch["status"] in ("validating", "in_progress"):
            batch["_polls"] += 1
            now = int(time.time())
            if batch["_polls"] >= self.config["polls"] and self.config["outcome"] != "in_progress":
                await self._finish(batch, self.config["outcome"])
            elif batch["status"] == "validating":
                batch.update(status="in_progress", in_progress_at=now)
        if self.config["status_padding"]:
            return await self._padded(request, self._public(batch), self.config["status_padding"])
        return web.json_response(self._public(batch))

    async def _padded(self, request: web.Request, batch: dict[str, Any], padding: int) -> web.StreamResponse:
        """``batch`` with ``padding`` bytes more in ``metadata.padding``, streamed (no Content-Length)."""
        head, tail = json.dumps({**batch, "metadata": {"padding": ""}}).encode("utf-8").split(b'"padding": ""')
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = b"x" * (1 << 20)
        try:
            await self._sent(response, head + b'"padding": "')
            for start in range(0, padding, len(chunk)):
                await self._sent(response, chunk[:padding - start])
            await self._sent(response, b'"' + tail)
            await response.write_eof()
        except (ConnectionError, RuntimeError):  # the client hung up (as it should, past its bound)
            pass
        return response

    async def _sent(self, response: web.StreamResponse, data: bytes) -> None:
        await response.write(data)
        with self._lock:
            self.status_bytes_sent += len(data)

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return self._error(404, "No such Batch object")
        if batch["status"] in ("validating", "in_progress"):
            await self._finish(batch, "cancelled")
        return web.json_response(self._public(batch))

    async def _finish(self, batch: dict[str, Any], outcome: str) -> None:
        """End ``batch``: answer its lines (all of them, half for expired, none for failed or cancelled)."""
        now = int(time.time())
        lines = batch["_lines"]
        if outcome == "failed":
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [
                {"code": "server_error", "message": "The batch failed: the test server was told to fail it.",
                 "line": None, "param": None}]})
            return
        answered = {"completed": len(lines), "expired": len(lines) // 2, "cancelled": 0}[outcome]
        cfg = self.state.answering()
        output, failed = [], []
        for index, line in enumerate(lines):
            body = line["body"]
            entry: dict[str, Any] = {"id": _id("batch_req"), "custom_id": line["custom_id"]}
            if index >= answered:
                code = "batch_expired" if outcome == "expired" else "batch_cancelled"
                failed.append({**entry, "response": None, "error": {
                    "code": code, "message": "This request could not be executed before the completion window "
                                             "expired." if outcome == "expired" else "The batch was cancelled."}})
                continue
            text = last_user_text(body)
            rejected = next((message for sub, message in self.config["fail_lines"].items() if sub in text), None)
            if rejected is not None:
                failed.append({**entry, "response": {"status_code": 400, "request_id": _id("req"),
                                                      "body": error_body(400, rejected)}, "error": None})
                continue
            answer = {**entry, "response": {"status_code": 200, "request_id": _id("req"),
                                            "body": await reply_for(cfg, body, text)}, "error": None}
            fault = next((f for sub, f in self.config["line_faults"].items() if sub in text), None)
            output.extend(_faulty(answer, fault))
        for n in range(self.config["foreign_lines"] if lines else 0):  # (answers to requests no one sent)
            output.append({"id": _id("batch_req"), "custom_id": f"foreign-{n}", "error": None, "response": {
                "status_code": 200, "request_id": _id("req"), "body": await reply_for(cfg, lines[0]["body"], "x")}})
        with self._lock:
            if output:
                content = b"".join(line if isinstance(line, bytes) else _jsonl([line]) for line in output)
                batch["output_file_id"] = self._file(content, "batch_output", "output.jsonl")["id"]
            if failed:
                batch["error_file_id"] = self._file(_jsonl(failed), "batch_output", "errors.jsonl")["id"]
        batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(failed)}
        batch.update(status=outcome, **{f"{outcome}_at": now})

    # ------------------------------------------------------------------ control plane
    async def _stats(self, request: web.Request) -> web.Response:
        with self._lock:
            return web.json_response({
                "files_uploaded": sum(1 for f in self.files.values() if f["purpose"] == "batch"),
                "batches_created": len(self.created), "batch_ids": list(self.created), "polls": self.polls,
                "statuses": {bid: b["status"] for bid, b in self.batches.items()},
                "lines": list(self.lines), "status_bytes_sent": self.status_bytes_sent,
                "downloads_failed": self.downloads_failed})

    async def _configure(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("POST /_batches takes a JSON object")
            config = dict(self.config)
            for key, value in changes.items():
                if key == "reset":
                    continue
                if key not in config:
                    raise ValueError(f"unknown batch option {key!r}; known: {sorted(config)}, reset")
                if key == "polls" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                    raise ValueError(f"polls must be an integer >= 1, got {value!r}")
                if key == "outcome" and value not in OUTCOMES:
                    raise ValueError(f"outcome must be one of {OUTCOMES}, got {value!r}")
                if key == "fail_lines" and not (isinstance(value, dict) and all(
                        isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
                    raise ValueError(f"fail_lines maps substrings to messages, got {value!r}")
                if key in ("content_failures", "status_padding", "upload_padding", "foreign_lines") and (
                        not isinstance(value, int) or isinstance(value, bool) or value < 0):
                    raise ValueError(f"{key} must be an integer >= 0, got {value!r}")
                if key == "line_faults" and not (isinstance(value, dict) and all(
                        isinstance(k, str) and v in LINE_FAULTS for k, v in value.items())):
                    raise ValueError(f"line_faults maps substrings to one of {LINE_FAULTS}, got {value!r}")
                config[key] = bool(value) if key == "available" else value
        except ValueError as exc:
            return self._error(400, f"bad batch configuration: {exc}")
        with self._lock:
            self.config = config
            if changes.get("reset"):
                self._reset()
        return web.json_response({k: v for k, v in config.items()})


def _faulty(answer: dict[str, Any], fault: str | None) -> list[dict[str, Any] | bytes]:
    """The output line(s) of ``answer`` with ``fault`` (:data:`LINE_FAULTS`): records, or raw bytes."""
    if fault == "duplicate":
        body = json.loads(json.dumps(answer["response"]["body"]))
        body["choices"][0]["message"]["content"] = "DUPLICATE"
        return [answer, {**answer, "id": _id("batch_req"), "response": {**answer["response"], "body": body}}]
    if fault == "other_model":
        body = {**answer["response"]["body"], "model": "someone-else"}
        return [{**answer, "response": {**answer["response"], "body": body}}]
    if fault == "nested":
        return [json.dumps({"id": answer["id"], "custom_id": answer["custom_id"]}).encode("utf-8")[:-1]
                + b', "response": {"status_code": 200, "body": ' + b"[" * NESTING + b"]" * NESTING + b"}}\n"]
    if fault == "not_object":
        return [json.dumps([answer]).encode("utf-8") + b"\n"]
    return [answer]


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode("utf-8") + b"\n" for r in records)


def _control(base_url: str, method: str, payload: Any = None) -> Any:
    root = base_url.rstrip("/").removesuffix("/v1")
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    request = urllib.request.Request(f"{root}/_batches", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def batch_stats(base_url: str) -> dict[str, Any]:
    """The batch endpoints' counters of the test server at ``base_url`` (its ``.../v1`` URL or its root)."""
    return _control(base_url, "GET")


def configure_batches(base_url: str, **config: Any) -> dict[str, Any]:
    """Set ``polls``, ``outcome``, ``fail_lines``, ``available``, the faults (``content_failures``,
    ``status_padding``, ``line_faults``, ``foreign_lines``; the module says each) or ``reset=True`` on the server at
    ``base_url``."""
    return _control(base_url, "POST", config)
