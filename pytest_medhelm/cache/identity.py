"""Which endpoint a model's requests actually reach, and so what its answers are cached and priced as.

litellm sends ``openai/gpt-4o-mini`` to ``OPENAI_BASE_URL`` when that variable is set (``ANTHROPIC_API_BASE`` for
``anthropic/...``, ``HOSTED_VLLM_API_BASE``...), not to OpenAI. An answer from such a server is not OpenAI's: it
is cached under that endpoint (an answer is never served as another server's, not even after the variable is
gone), priced by the prices file only (never at the provider's rates), and the start-up line names the endpoint and
the variable it came from.

:func:`cache_identity` is the ONE place a model's cache identity is made; everything else asks it. Nothing heavy is
imported here, and litellm is never asked: the variables are the ones litellm reads, listed below.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_medhelm.values import ModelSpec, is_llama_cpp_model, redact_url

#: per litellm provider prefix, the environment variables litellm reads for its base URL, in litellm's order
#: (the first one set wins). A provider not listed is looked up as PROVIDER_API_BASE, then PROVIDER_BASE_URL.
PROVIDER_BASE_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
    "text-completion-openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
    "anthropic": ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
    "azure": ("AZURE_API_BASE",),
    "azure_ai": ("AZURE_AI_API_BASE",),
    "together_ai": ("TOGETHER_AI_API_BASE", "TOGETHERAI_API_BASE"),
    "fireworks_ai": ("FIREWORKS_AI_API_BASE", "FIREWORKS_API_BASE"),
    "huggingface": ("HUGGINGFACE_API_BASE", "HF_API_BASE"),
    "vertex_ai": ("VERTEXAI_API_BASE", "VERTEX_API_BASE"),
    "ollama_chat": ("OLLAMA_API_BASE",),
    "vllm": ("VLLM_API_BASE",),
}


@dataclass(frozen=True)
class Endpoint:
    """Where a model's requests go: ``url`` (None: the provider's public API, as litellm knows it) and where that
    URL came from (``source``: an option, or the environment variable litellm reads)."""

    url: str | None
    source: str | None = None

    @property
    def is_provider(self) -> bool:
        """The provider's own public API: its answers are priced at the provider's rates."""
        return self.url is None


def base_variables(litellm_model: str) -> tuple[str, ...]:
    """The environment variables that move ``litellm_model``'s provider to another URL, in litellm's order."""
    provider, sep, _rest = litellm_model.partition("/")
    if not sep:
        return ("OPENAI_BASE_URL", "OPENAI_API_BASE")  # a bare name: litellm takes it for OpenAI's
    if provider in PROVIDER_BASE_VARIABLES:
        return PROVIDER_BASE_VARIABLES[provider]
    upper = provider.upper().replace("-", "_")
    return (f"{upper}_API_BASE", f"{upper}_BASE_URL")


def endpoint_of(litellm_model: str, endpoint: str | None, *, source: str | None = None,
                environ: Mapping[str, str] = os.environ) -> Endpoint:
    """Where requests for ``litellm_model`` go: ``endpoint`` when the run gives one (an option: its name in
    ``source``), else the first of litellm's variables for the provider that is set, else the provider's API."""
    if endpoint:
        return Endpoint(endpoint, source)
    for name in base_variables(litellm_model):
        value = (environ.get(name) or "").strip()
        if value:
            return Endpoint(value, name)
    return Endpoint(None)


def cache_identity(name: str, endpoint: str | None, *, litellm_model: str | None = None,
                   environ: Mapping[str, str] = os.environ) -> str:
    """What a model's answers are cached under: ``name`` and the endpoint its requests actually reach.

    ``endpoint`` is the run's endpoint for the model: one URL, or the canonical identity of a group of replicas
    serving the same model (their sorted URLs, or a name), so that an answer serves any replica; None when the run
    gives none, and then litellm's environment decides (``OPENAI_BASE_URL`` for ``openai/...``). ``litellm_model``
    is the string sent to litellm (default ``name``). The provider's public API: ``name`` alone (the keys that
    existing caches hold); anywhere else: ``name@URL``."""
    where = endpoint_of(litellm_model or name, endpoint, environ=environ)
    # (a URL's credentials are not the endpoint's identity, and are never stored: http://***@host)
    return name if where.url is None else f"{name}@{redact_url(where.url)}"


def priced_as_provider(spec: ModelSpec) -> bool:
    """Whether ``spec``'s answers come from its provider's public API, and so may be priced at the provider's rates
    (litellm's table, litellm's reported cost). Any other endpoint (an option's URL, litellm's environment, a
    local server) is priced by the prices file only: a vLLM serving ``openai/gpt-4o-mini`` is not OpenAI's bill."""
    if is_llama_cpp_model(spec.name):
        return False
    return endpoint_of(spec.litellm_model, spec.api_base).is_provider
