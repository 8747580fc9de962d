"""OpenAI's Batch API, as a client: the input file, the batch, its status, its results; and the record of the
batches a run submitted, kept in the cache directory so that a later run collects them instead of paying twice.

The protocol (OpenAI's Files and Batches endpoints, which vLLM and several gateways speak too):

* ``POST {base}/files`` (multipart: ``purpose=batch``, ``file`` = a JSONL file, one request per line:
  ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": <the chat request's JSON>}``);
* ``POST {base}/batches`` ``{"input_file_id", "endpoint": "/v1/chat/completions", "completion_window": "24h"}``;
* ``GET {base}/batches/{id}``: ``status`` (validating, in_progress, finalizing, completed, failed, expired,
  cancelling, cancelled), ``request_counts`` ``{total, completed, failed}``, ``output_file_id``, ``error_file_id``,
  and for a failed batch ``errors.data[].message``;
* ``GET {base}/files/{id}/content``: the results as JSONL, one per request, in any order:
  ``{"custom_id", "response": {"status_code", "body"}, "error": null | {"code", "message"}}``.

The ``custom_id`` of a line is the request's cache key, so a batch's answers land in the cache exactly where a
direct run puts them (and a direct run and a batch run share answers). Everything a server sends is untrusted: a
line that cannot be read, or names a request the batch did not hold, is that line's error, never the run's.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pytest_medhelm.sending import replies
from pytest_medhelm.sending.reasoning import answer_of
from pytest_medhelm.sending.transport import RequestFailed, _error_message, _retry_after, _retryable_status
from pytest_medhelm.values import MAX_SECONDS, Completion, count_ok, float_ok, printable

CHAT_URL = "/v1/chat/completions"
#: OpenAI's limits per batch: 50,000 requests, an input file of 200 MB (kept under, with room for the multipart)
MAX_LINES = 50_000
MAX_BYTES = 190 * 1024 * 1024
#: bytes of a result line beyond its response body (ids, custom_id, status)
LINE_ENVELOPE_BYTES = 4096
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
KNOWN_STATUSES = TERMINAL | {"validating", "in_progress", "finalizing", "cancelling"}
#: statuses of ``POST /files`` that mean the server has no Batch API (its requests are then sent directly)
NO_BATCH_API = (404, 405, 501)
#: the largest reply read of ``POST /files``, ``POST /batches`` and ``GET /batches/{id}`` (a File or Batch object:
#: a few kB, its ``errors`` list included); a longer one is refused unread, past this many bytes
REPLY_MAX_BYTES = 4 * 1024 * 1024
#: the beginning of an error reply (HTTP >= 400) read for its message; the rest is not read
ERROR_REPLY_BYTES = 64 * 1024
#: a failed batch's error messages kept (the first ones), each at most 500 characters
MAX_ERRORS_SHOWN = 5
#: the provider's completion window, and the default of ``--medhelm-batch-timeout`` (seconds)
WINDOW_S = 24 * 3600.0
#: polls of a batch's status: every POLL_FIRST_S s, growing to POLL_MAX_S (the environment's POLL_ENV fixes it)
POLL_ENV = "MEDHELM_BATCH_POLL_S"
POLL_FIRST_S = 5.0
POLL_MAX_S = 60.0


def poll_intervals() -> Iterator[float]:
    """The seconds between two polls of a batch's status, one after the other."""
    fixed = os.environ.get(POLL_ENV, "").strip()
    try:
        interval = float(fixed) if fixed else None
    except ValueError:
        interval = None
    if interval is not None and interval > 0:
        while True:
            yield interval
    delay = POLL_FIRST_S
    while True:
        yield delay
        delay = min(POLL_MAX_S, delay * 1.5)


def batch_line(key: str, body: dict[str, Any]) -> bytes:
    """One line of a batch input file: the chat request ``body`` under its cache key."""
    return json.dumps({"custom_id": key, "method": "POST", "url": CHAT_URL, "body": body},
                      ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def chunks(lines: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
    """(key, line) pairs cut into batches within OpenAI's limits (requests and bytes per input file)."""
    out: list[list[tuple[str, bytes]]] = []
    size = 0
    for pair in lines:
        if not out or len(out[-1]) >= MAX_LINES or size + len(pair[1]) > MAX_BYTES:
            out.append([])
            size = 0
        out[-1].append(pair)
        size += len(pair[1])
    return out


class BadLine(ValueError):
    """A result line that cannot be read; the message says what was wrong (the key, when it could be read)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _choice(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError(f"the response body is {type(body).__name__}, not a chat completion object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the response body has no choices")
    if not isinstance(choices[0].get("message"), dict):
        raise ValueError("the response body's first choice has no message")
    return choices[0]


@dataclass(frozen=True)
class LineError:
    """A request the batch did not answer: the provider's message, and the HTTP status it gave (if any)."""

    message: str
    status: int | None = None


_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,512})"')


def _key_in(raw: bytes | str, expected: Iterable[str] | set[str]) -> str | None:
    """The one key of ``expected`` a line that cannot be parsed names as its ``custom_id``, if exactly one: that
    line's error then goes to its own item (it is never an answer)."""
    found = {m.group(1).decode("utf-8", "replace")
             for m in _CUSTOM_ID.finditer(raw if isinstance(raw, bytes) else raw.encode("utf-8", "replace"))}
    keys = [k for k in found if k in expected]
    return keys[0] if len(keys) == 1 else None


def same_model(replied: str, asked: str) -> bool:
    """Whether a reply's ``model`` is the one asked for: the same name, or a dated snapshot of it as OpenAI names
    the model that answered (``gpt-4o-mini`` -> ``gpt-4o-mini-2024-07-18``, ``gpt-4`` -> ``gpt-4-0613``)."""
    return replied == asked or re.fullmatch(re.escape(asked) + r"-\d{4}(-\d{2}-\d{2})?", replied) is not None


def parse_result_line(raw: bytes | str, expected: Iterable[str] | set[str],
                      model: str | None = None) -> tuple[str, Completion | LineError]:
    """A line of a batch's output or error file: (its request's key, the answer or the provider's error).

    Raises :class:`BadLine` for a line that is not such a result, that names a request the batch did not hold
    (``expected``: the keys it held), or whose reply names a model other than ``model`` (the name the batch's
    requests asked for, :func:`same_model`; a reply that names none is taken)."""
    try:
        data = json.loads(raw)
    except RecursionError:  # (nested deeper than the parser goes: this line's error, never the batch's)
        raise BadLine("a result line is nested too deeply to be read (not an answer)", _key_in(raw, expected)) \
            from None
    except (ValueError, UnicodeDecodeError):
        raise BadLine(f"a result line is not JSON: {bytes(raw[:120]) if isinstance(raw, bytes) else raw[:120]!r}") \
            from None
    if not isinstance(data, dict):
        raise BadLine(f"a result line is {type(data).__name__}, not an object")
    key = data.get("custom_id")
    if not isinstance(key, str) or key not in expected:
        raise BadLine(f"a result line names a request this batch did not hold: custom_id {str(key)[:80]!r}")
    error, response = data.get("error"), data.get("response")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return key, LineError(str(message or code or error)[:2000])
    if not isinstance(response, dict):
        raise BadLine("the result line has neither a response nor an error", key)
    status, body = response.get("status_code"), response.get("body")
    if not isinstance(status, int) or isinstance(status, bool):
        raise BadLine(f"the result line's status_code is {status!r}, not a number", key)
    if status >= 400:
        err = body.get("error") if isinstance(body, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
        return key, LineError(str(message or body or f"HTTP {status}")[:2000], status)
    try:  # the checks of a direct reply (pytest_medhelm.sending.replies): a batch's answer is no less untrusted
        choice = _choice(body)
        message = choice["message"]
        usage = body.get("usage") if isinstance(body, dict) else None
        answer, thinking = answer_of(replies.reply_text(message.get("content")), replies.reply_thinking(message))
        counts = replies.reply_usage(usage)
        reasoning_tokens = replies.reply_reasoning_tokens(usage)
    except (ValueError, RecursionError) as exc:  # (MalformedReply is one)
        why = exc if isinstance(exc, ValueError) else "it is nested too deeply to be read"
        raise BadLine(f"the result line's response is not a chat completion: {why}", key) from None
    replied = body.get("model") if isinstance(body, dict) else None
    if model is not None and replied is not None and not (isinstance(replied, str) and same_model(replied, model)):
        raise BadLine(f"the result line answers for model {str(replied)[:80]!r}, not {model!r}, the model of this "
                      "batch's requests: refused (not an answer)", key)
    finish = choice.get("finish_reason")
    return key, Completion(text=answer, tokens_in=counts.tokens_in, tokens_out=counts.tokens_out, cost_usd=None,
                           finish_reason=finish if isinstance(finish, str) else None, usage_known=counts.known,
                           reasoning_tokens=reasoning_tokens, thinking=thinking)


class ResultLines:
    """The lines of a batch's output and error files, read into one result per request key.

    Each line is :func:`parse_result_line`'d and held to its request's bound (``limits``, by key; ``largest`` for
    a key without one). A ``custom_id`` on more than one line is refused for every line of it: its item gets an error
    naming the duplicate, not a pick of one. A line that names no request of the batch is said (``notes``)."""

    def __init__(self, batch_id: str, expected: set[str], limits: dict[str, int], largest: int,
                 model: str | None = None) -> None:
        self.batch_id, self.expected, self.limits, self.largest, self.model = batch_id, expected, limits, largest, model
        self.results: dict[str, Completion | LineError | BadLine] = {}
        self.lines: dict[str, int] = {}  # lines seen per key
        self.notes: list[str] = []

    def add(self, content: bytes) -> None:
        """Every line of one results file."""
        for raw in content.splitlines():
            if raw.strip():
                self.add_line(raw)

    def add_line(self, raw: bytes) -> None:
        result: Completion | LineError | BadLine
        try:
            key, result = parse_result_line(raw, self.expected, self.model)
        except BadLine as exc:
            if exc.key is None:
                self._note(f"medhelm batch {self.batch_id}: {exc}")
                return
            key, result = exc.key, exc
        bound = self.limits.get(key, self.largest)
        if len(raw) > bound:  # (the bound of a direct reply, pytest_medhelm.sending.replies)
            result = BadLine(f"malformed reply: the result line is {len(raw):,} bytes, over the {bound:,} its "
                             "request's max_tokens allow: not an answer", key)
        seen = self.lines[key] = self.lines.get(key, 0) + 1
        if seen > 1:
            result = BadLine(f"its custom_id is on {seen} lines of the batch's results (a duplicate): refused, no "
                             "line of it is taken as its answer", key)
            if seen == 2:
                self._note(f"medhelm batch {self.batch_id}: custom_id {key[:16]}… is on more than one result line "
                           "(a duplicate): refused, its item is an error")
        self.results[key] = result

    def _note(self, text: str) -> None:
        if len(self.notes) < 20 and text not in self.notes:  # (a server's flood of bad lines is not a flood of notes)
            self.notes.append(text)


#: what a batch's or a file's id may hold
_ID = re.compile(r"[\w.:-]{1,200}", re.ASCII)


def _timestamp(value: Any) -> float | None:
    """A time the server gave (seconds since the epoch), or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(counts: dict[str, Any], name: str) -> int:
    value = counts.get(name)
    return value if count_ok(value) else 0


@dataclass(frozen=True)
class BatchState:
    """What ``GET /batches/{id}`` said, validated."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[str, ...] = ()
    #: seconds from its creation to its completion, as the server counts them (None: not said)
    took_s: float | None = None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @staticmethod
    def of(data: Any) -> BatchState:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
            raise RequestFailed(f"the batch object has no id: {str(data)[:200]!r}", retryable=False)
        if not _ID.fullmatch(data["id"]):  # (it goes into URLs, file names and every line that names the batch)
            raise RequestFailed(f"the batch object's id {data['id'][:80]!r} is not an id", retryable=False)
        status = data.get("status")
        if not isinstance(status, str) or status not in KNOWN_STATUSES:
            raise RequestFailed(f"batch {data['id'][:80]}: unknown status {str(status)[:40]!r}")
        raw_counts, raw_errors = data.get("request_counts"), data.get("errors")
        counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else {}
        errors: dict[str, Any] = raw_errors if isinstance(raw_errors, dict) else {}
        listed: list[Any] = errors["data"] if isinstance(errors.get("data"), list) else []
        messages = tuple(printable(str(e.get("message") or e.get("code"))[:500])  # (the first few: each item's
                         for e in listed[:MAX_ERRORS_SHOWN] if isinstance(e, dict))  # error says them)
        created, finished = _timestamp(data.get("created_at")), _timestamp(data.get("completed_at"))
        took = finished - created if created is not None and finished is not None else None
        took = took if float_ok(took, MAX_SECONDS) else None  # (a time a server invented: not said)

        def file_id(name: str) -> str | None:
            value = data.get(name)
            return value if isinstance(value, str) and _ID.fullmatch(value) else None

        return BatchState(id=data["id"], status=status, total=_count(counts, "total"),
                          completed=_count(counts, "completed"), failed=_count(counts, "failed"),
                          output_file_id=file_id("output_file_id"), error_file_id=file_id("error_file_id"),
                          errors=messages, took_s=took)


def reply_json(raw: bytes, url: str) -> Any:
    """A File or Batch object's JSON (then :meth:`BatchState.of`); anything else, nesting too deep for the parser
    included, is a :class:`RequestFailed` naming ``url`` (a poll that gets one polls again, a few times)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise RequestFailed(f"malformed response body from {url}: {raw[:200]!r}") from None


class OpenAIBatches:
    """The four calls, on one aiohttp session; each raises :class:`RequestFailed` (status, Retry-After)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._session: Any = None

    async def _request(self, method: str, url: str, key: str | None, limit: int = REPLY_MAX_BYTES,
                       what: str = "a File or Batch object", **kwargs: Any) -> bytes:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            async with self._session.request(method, url, headers=headers,
                                             timeout=aiohttp.ClientTimeout(total=self.timeout), **kwargs) as response:
                raw = await read_bounded(response, limit, f"{method} {url}", what)
                if response.status >= 400:
                    raise RequestFailed(_error_message(raw, response.status), response.status,
                                        _retry_after(response.headers), _retryable_status(response.status))
                return raw
        except TimeoutError:
            raise RequestFailed(f"no answer within {self.timeout:g} s (--medhelm-timeout)") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None

    async def _json(self, method: str, url: str, key: str | None, **kwargs: Any) -> Any:
        return reply_json(await self._request(method, url, key, **kwargs), url)

    async def upload(self, base: str, key: str | None, content: bytes) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content, filename="medhelm-batch.jsonl", content_type="application/jsonl")
        data = await self._json("POST", f"{base}/files", key, data=form)
        file_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(file_id, str) or not file_id:
            raise RequestFailed(f"the uploaded file has no id: {str(data)[:200]!r}", retryable=False)
        return file_id

    async def create(self, base: str, key: str | None, input_file_id: str) -> BatchState:
        body = {"input_file_id": input_file_id, "endpoint": CHAT_URL, "completion_window": "24h",
                "metadata": {"description": "pytest-medhelm"}}
        return BatchState.of(await self._json("POST", f"{base}/batches", key, json=body))

    async def get(self, base: str, key: str | None, batch_id: str) -> BatchState:
        return BatchState.of(await self._json("GET", f"{base}/batches/{batch_id}", key))

    async def content(self, base: str, key: str | None, file_id: str, limit: int) -> bytes:
        """A results file, refused once past ``limit`` bytes (:func:`results_limit`)."""
        return await self._request("GET", f"{base}/files/{file_id}/content", key, limit=limit,
                                   what="a results file, the most its requests' max_tokens allow")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


#: a finished batch's results stored per transaction
STORE_CHUNK = 500


def store_all(cache: Any, stored: list[Any]) -> dict[str, Exception]:
    """A batch's answers and errors into the cache, under the keys a direct run uses (on a thread: a batch of
    50,000 lines, or a cache whose lock is held, does not hold the loop), a transaction per
    :data:`STORE_CHUNK` entries; the exception that kept each answer that could not be stored, by its key. A
    transaction that fails is written again one entry at a time (as AnswerWriter does), so that one answer that
    cannot be stored is that answer's error only; an error that cannot be stored still reaches its item
    through the sender."""
    refused: dict[str, Exception] = {}
    for start in range(0, len(stored), STORE_CHUNK):
        chunk = stored[start:start + STORE_CHUNK]
        try:
            cache.put_many(chunk)
        except Exception:  # noqa: BLE001 - which entry it was is found by writing them one by one
            for one in chunk:
                try:
                    cache.put_many([one])
                except Exception as exc:  # noqa: BLE001 - e.g. the cache's lock timed out: this answer's error
                    if isinstance(one.result, Completion):
                        refused[one.key] = exc
    return refused


def line_limit(max_tokens: int) -> int:
    """The longest result line accepted for a request of ``max_tokens``: a direct reply's bound
    (:func:`~pytest_medhelm.sending.replies.max_reply_bytes`) plus the line's own envelope."""
    return replies.max_reply_bytes(max_tokens) + LINE_ENVELOPE_BYTES


def results_limit(max_tokens: Iterable[int]) -> int:
    """The largest results file accepted for a batch of requests of these ``max_tokens``: every line at its bound."""
    return sum(line_limit(n) for n in max_tokens) + LINE_ENVELOPE_BYTES


async def read_bounded(response: Any, limit: int, call: str, what: str) -> bytes:
    """The body of ``response``, in chunks, refused (not retried) as soon as it passes ``limit`` bytes (or says
    it will, by its Content-Length): a server's reply never fills the memory. An error reply (HTTP >= 400): its
    first :data:`ERROR_REPLY_BYTES` only, for its message. ``call`` and ``what`` name the reply in the message."""
    error = response.status >= 400
    declared = response.content_length
    if not error and declared is not None and declared > limit:
        raise _too_large(f"its Content-Length says {declared:,}", limit, call, what)
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if error and size >= ERROR_REPLY_BYTES:
            chunks.append(chunk[:ERROR_REPLY_BYTES - (size - len(chunk))])
            break
        if size > limit:
            raise _too_large(f"{size:,} read when refused", limit, call, what)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: str, limit: int, call: str, what: str) -> RequestFailed:
    return RequestFailed(f"the reply of {call} is over {limit:,} bytes, the bound of {what}: not read ({size})",
                         retryable=False)


# ----------------------------------------------------------------------------------------------------------------
