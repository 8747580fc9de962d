"""Sending one chat request to a model: through litellm, or straight to an OpenAI-compatible endpoint.

litellm speaks to every provider, but it costs about 3 s to import and 5-7 ms of CPU per call here, and its httpx
pool slows down with many queued requests. When the model is an OpenAI-compatible endpoint that we reach by URL
(``--medhelm-api-base`` with an ``openai/``, ``hosted_vllm/`` model, or a ``local/`` llama.cpp server), the same
request goes over one shared aiohttp session instead: same JSON body, same answer, a fraction of the CPU.
Everything else (``anthropic/...``, ``gemini/...``, ``openai/...`` without a base URL) goes through litellm.

Both raise :class:`RequestFailed` carrying the HTTP status and the server's ``Retry-After`` so that the scheduler
can decide whether and when to retry.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from pytest_medhelm.endpoints.wire import api_key_for
from pytest_medhelm.sending.reasoning import answer_of, stops_after, wire_request
from pytest_medhelm.sending.replies import (
    MalformedReply,
    believed_cost,
    max_reply_bytes,
    reply_reasoning_tokens,
    reply_text,
    reply_thinking,
    reply_usage,
    too_large,
)
from pytest_medhelm.values import ChatRequest, Completion, ModelSpec

if TYPE_CHECKING:
    import aiohttp


class RequestFailed(Exception):
    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None,
                 retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def _retryable_status(status: int | None) -> bool:
    # 408 timeout, 409 conflict, 429 rate limit, 5xx server trouble; 4xx otherwise means the request is wrong
    return status is None or status in (408, 409, 429) or status >= 500


def chat_body(spec: ModelSpec, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of ``request`` to an OpenAI-compatible endpoint (sent as is, or as a line of a batch)."""
    return wire_request(spec, request, spec.litellm_model.split("/", 1)[1])


def completion_of(spec: ModelSpec, request: ChatRequest, content: Any, message: Any, usage: Any,
                  finish_reason: Any, latency_s: float, cost_usd: float | None) -> Completion:
    """A reply's :class:`Completion`: its answer (the thinking split off, the stop sequences the model was not sent
    applied), its thinking and its accounting; raises MalformedReply for a reply that cannot be one. The one
    reading of a reply's message, for the direct wire, litellm and a batch's lines."""
    answer, thinking = answer_of(reply_text(content), reply_thinking(message), stops_after(spec, request))
    counts = reply_usage(usage)
    return Completion(text=answer, tokens_in=counts.tokens_in, tokens_out=counts.tokens_out, latency_s=latency_s,
                      cost_usd=cost_usd, finish_reason=finish_reason if isinstance(finish_reason, str) else None,
                      usage_known=counts.known, reasoning_tokens=reply_reasoning_tokens(usage), thinking=thinking)


class OpenAIWire:
    """One aiohttp session for all requests to OpenAI-compatible endpoints of a run."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None  # made on the first send, inside the loop

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self._limit, limit_per_host=0))
        return self._session

    async def send(self, spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
        import aiohttp

        session = await self._get_session()
        body = chat_body(spec, request)
        headers = {}
        key = api_key_for(spec)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = _one_url(spec) + "/chat/completions"
        started = time.perf_counter()
        bound = max_reply_bytes(request.max_output_tokens)
        try:
            async with session.post(url, json=body, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                raw = await _read_bounded(response, bound, request.max_output_tokens)
                if response.status >= 400:
                    raise RequestFailed(_error_message(raw, response.status), response.status,
                                        _retry_after(response.headers), _retryable_status(response.status))
                try:
                    data = json.loads(raw)
                    message = data["choices"][0]["message"]
                    content = message.get("content")
                    finish_reason = data["choices"][0].get("finish_reason")
                except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
                    raise RequestFailed(f"malformed response body: {raw[:200]!r}", response.status) from None
                try:
                    return completion_of(spec, request, content, message, data.get("usage"), finish_reason,
                                         time.perf_counter() - started, None)
                except MalformedReply as exc:
                    raise RequestFailed(exc.reason, response.status, retryable=False) from None
        except TimeoutError:  # before OSError: TimeoutError is one, and its message is empty
            raise RequestFailed(f"no answer within {timeout:g} s (--medhelm-timeout)") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _one_url(spec: ModelSpec) -> str:
    """The URL a request to ``spec`` goes to. A replica group is never sent to as such: the scheduler picks one of
    its replicas for each try (``ModelSpec.at``); anything else sending it would post to a list of URLs."""
    if spec.is_replica_group:
        raise ValueError(f"{spec.name}: a request goes to one of the replicas {', '.join(spec.urls)}, not to all")
    return str(spec.api_base).rstrip("/")


async def _read_bounded(response: Any, bound: int, max_tokens: int) -> bytes:
    """The body, refused (a malformed reply, not retried) as soon as it passes ``bound`` bytes: a server that
    ignores max_tokens cannot fill the memory or the cache."""
    declared = response.content_length
    if response.status < 400 and declared is not None and declared > bound:
        raise RequestFailed(too_large(declared, max_tokens).reason, response.status, retryable=False)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > bound:
            if response.status >= 400:  # an error page: its beginning says enough
                break
            raise RequestFailed(too_large(size, max_tokens).reason, response.status, retryable=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _error_message(raw: bytes, status: int) -> str:
    try:
        data = json.loads(raw)
        err = data.get("error", data)
        message = err.get("message") if isinstance(err, dict) else str(err)
        if message:
            return str(message)
    except (ValueError, AttributeError):
        pass
    return raw[:300].decode("utf-8", "replace") or f"HTTP {status}"


class LitellmTransport:
    """Every model not reached over :class:`OpenAIWire`: through litellm (imported on the first send)."""

    async def send(self, spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
        return await send_litellm(spec, request, timeout)


async def send_litellm(spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    kwargs = {**wire_request(spec, request, spec.litellm_model), "timeout": timeout, "num_retries": 0}
    if spec.api_base:
        kwargs["api_base"] = _one_url(spec)
    key = api_key_for(spec)
    if key:
        kwargs["api_key"] = key
    started = time.perf_counter()
    try:
        response = await litellm.acompletion(**kwargs)
    except Exception as exc:  # noqa: BLE001 - litellm maps every provider's failure onto its own exception classes
        status = getattr(exc, "status_code", None)
        headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None),
                                                                             "headers", None)
        message = getattr(exc, "message", None) or str(exc)
        raise RequestFailed(str(message), status if isinstance(status, int) else None, _retry_after(headers),
                            _retryable_status(status if isinstance(status, int) else None)) from None
    latency = time.perf_counter() - started
    try:
        choice = response.choices[0]
        completion = completion_of(spec, request, choice.message.content, choice.message,
                                   getattr(response, "usage", None), getattr(choice, "finish_reason", None),
                                   latency, None)
    except MalformedReply as exc:
        raise RequestFailed(exc.reason, 200, retryable=False) from None
    except (AttributeError, IndexError, TypeError) as exc:
        raise RequestFailed(f"malformed reply: {type(exc).__name__}: {exc}", 200) from None
    size = len(completion.text.encode("utf-8", "replace")) + len(completion.thinking.encode("utf-8", "replace"))
    if size > max_reply_bytes(request.max_output_tokens):
        raise RequestFailed(too_large(size, request.max_output_tokens).reason, 200, retryable=False)
    cost = None
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - unknown price: reported as unknown, never as 0
        cost = None
    completion.cost_usd = believed_cost(cost)  # a price computed from counts a server invented is no price
    return completion
