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
import os
import time
from typing import Any

from pytest_medhelm.values import ChatRequest, Completion, ModelSpec

#: providers whose wire format is OpenAI's chat completions API
OPENAI_COMPATIBLE_PREFIXES = ("openai/", "hosted_vllm/", "local/")


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


def _messages(request: ChatRequest) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in request.messages]


#: what a keyless server (llama.cpp, a vLLM started without --api-key) is sent: OpenAI's SDK insists on a key
NO_KEY = "sk-no-key"


def api_key_for(spec: ModelSpec) -> str | None:
    """The key to send to ``spec``'s endpoint, or None to let litellm read the provider's own variable.

    Never one key for all (see :mod:`pytest_medhelm.models.endpoints`):

    * the variable ``spec.api_key_env`` names, when it names one (``--medhelm-api-key-env`` /
      ``--medhelm-jury-api-key-env``; checked to be set at start-up);
    * a ``hosted_vllm/`` model at a URL: ``HOSTED_VLLM_API_KEY`` (litellm's variable for that provider, which
      means that server), else a placeholder;
    * any other OpenAI-compatible model at a URL: a placeholder. ``OPENAI_API_KEY`` is OpenAI's key: it is not
      sent to someone else's server (litellm would send it there);
    * a model sent to a provider's public API: None, and litellm reads that provider's own variable
      (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...).
    """
    if spec.api_key_env:
        return os.environ.get(spec.api_key_env) or None
    if not spec.api_base:
        return None
    if spec.litellm_model.startswith("hosted_vllm/"):
        return os.environ.get("HOSTED_VLLM_API_KEY") or NO_KEY
    if spec.litellm_model.startswith(OPENAI_COMPATIBLE_PREFIXES):
        return NO_KEY
    return None  # another provider at a URL of its own (a proxy of it): litellm reads that provider's variable


def uses_openai_wire(spec: ModelSpec) -> bool:
    return bool(spec.api_base) and spec.name.startswith(OPENAI_COMPATIBLE_PREFIXES)


class OpenAIWire:
    """One aiohttp session for all requests to OpenAI-compatible endpoints of a run."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._session = None

    async def _get_session(self):
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self._limit, limit_per_host=0))
        return self._session

    async def send(self, spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
        import aiohttp

        session = await self._get_session()
        body: dict[str, Any] = {"model": spec.litellm_model.split("/", 1)[1], "messages": _messages(request),
                                "temperature": request.temperature, "max_tokens": request.max_tokens}
        if request.stop:
            body["stop"] = list(request.stop)
        if request.response_format:
            body["response_format"] = json.loads(request.response_format)
        headers = {}
        key = api_key_for(spec)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = _one_url(spec) + "/chat/completions"
        started = time.perf_counter()
        try:
            async with session.post(url, json=body, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise RequestFailed(_error_message(raw, response.status), response.status,
                                        _retry_after(response.headers), _retryable_status(response.status))
                try:
                    data = json.loads(raw)
                    text = data["choices"][0]["message"].get("content") or ""
                except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                    raise RequestFailed(f"malformed response body: {raw[:200]!r}", response.status) from None
        except TimeoutError:  # before OSError: TimeoutError is one, and its message is empty
            raise RequestFailed(f"no answer within {timeout:g} s (--medhelm-timeout)") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None
        usage = data.get("usage") or {}
        return Completion(text=text, tokens_in=int(usage.get("prompt_tokens") or 0),
                          tokens_out=int(usage.get("completion_tokens") or 0),
                          latency_s=time.perf_counter() - started, cost_usd=None,
                          finish_reason=data["choices"][0].get("finish_reason"))

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



async def send_litellm(spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    kwargs: dict[str, Any] = {"model": spec.litellm_model, "messages": _messages(request),
                              "temperature": request.temperature, "max_tokens": request.max_tokens,
                              "timeout": timeout, "num_retries": 0}
    if request.stop:
        kwargs["stop"] = list(request.stop)
    if request.response_format:
        kwargs["response_format"] = json.loads(request.response_format)
    if spec.api_base:
        kwargs["api_base"] = _one_url(spec)
    key = api_key_for(spec)
    if key:
        kwargs["api_key"] = key
    started = time.perf_counter()
    try:
        response = await litellm.acompletion(**kwargs)
    except Exception as exc:  # litellm maps every provider's failure onto its own exception classes
        status = getattr(exc, "status_code", None)
        headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None),
                                                                             "headers", None)
        message = getattr(exc, "message", None) or str(exc)
        raise RequestFailed(str(message), status if isinstance(status, int) else None, _retry_after(headers),
                            _retryable_status(status if isinstance(status, int) else None)) from None
    latency = time.perf_counter() - started
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    cost = None
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:  # unknown price: reported as unknown, never as 0
        cost = None
    return Completion(text=choice.message.content or "",
                      tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
                      tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
                      latency_s=latency, cost_usd=cost, finish_reason=getattr(choice, "finish_reason", None))
