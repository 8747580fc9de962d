"""A provider's public-API key goes to that provider's API only (issue 30, item 9).

litellm reads a provider's key from that provider's variable (``ANTHROPIC_API_KEY``, ``TOGETHERAI_API_KEY``, ...)
whatever URL the request goes to. A model of such a provider sent to a URL that is not the provider's own API (a
gateway, a proxy, a colleague's server, a typo) would carry that key there. By default the run refuses it at
start-up (:func:`pytest_medhelm.endpoints.resolve.foreign_key_problems`, a usage error) unless the key variable for
that URL is named (``--medhelm-api-key-env`` / ``--medhelm-jury-api-key-env``), and the sending side never lets
litellm read the provider's variable for such a URL (:func:`pytest_medhelm.endpoints.wire.api_key_for`).

``openai/`` and ``hosted_vllm/`` models at a URL are not here: they never get ``OPENAI_API_KEY`` (a placeholder, or
``HOSTED_VLLM_API_KEY``, litellm's variable for a vLLM server). Providers not listed (``ollama/``, ``bedrock/``,
``vertex_ai/``, ...) keep litellm's own handling; the start-up lines say which key each URL gets.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pytest_medhelm.values import REPLICA_SEPARATOR

#: per provider: the variable litellm reads its key from, and the hosts of the provider's own API (a host listed
#: with a leading dot matches every host under it: Azure's resources are the user's own subdomains)
PROVIDER_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "anthropic": ("ANTHROPIC_API_KEY", ("api.anthropic.com",)),
    "gemini": ("GEMINI_API_KEY", ("generativelanguage.googleapis.com",)),
    "mistral": ("MISTRAL_API_KEY", ("api.mistral.ai",)),
    "groq": ("GROQ_API_KEY", ("api.groq.com",)),
    "deepseek": ("DEEPSEEK_API_KEY", ("api.deepseek.com",)),
    "openrouter": ("OPENROUTER_API_KEY", ("openrouter.ai",)),
    "together_ai": ("TOGETHERAI_API_KEY", ("api.together.xyz", "api.together.ai")),
    "cohere": ("COHERE_API_KEY", ("api.cohere.ai", "api.cohere.com")),
    "xai": ("XAI_API_KEY", ("api.x.ai",)),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", ("api.fireworks.ai",)),
    "perplexity": ("PERPLEXITYAI_API_KEY", ("api.perplexity.ai",)),
    "deepinfra": ("DEEPINFRA_API_KEY", ("api.deepinfra.com",)),
    "cerebras": ("CEREBRAS_API_KEY", ("api.cerebras.ai",)),
    "azure": ("AZURE_API_KEY", (".openai.azure.com", ".cognitiveservices.azure.com")),
}


def provider_key(litellm_model: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(provider, its key variable, its API's hosts) for a model of a provider listed above, else None."""
    provider = litellm_model.partition("/")[0]
    entry = PROVIDER_KEYS.get(provider)
    return None if entry is None else (provider, entry[0], entry[1])


def is_providers_url(hosts: tuple[str, ...], url: str) -> bool:
    """Whether ``url`` is on one of ``hosts`` over https (the provider's own API)."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return False
    if parts.scheme != "https" or not host:
        return False
    return any(host.endswith(h) if h.startswith(".") else host == h for h in hosts)


def foreign_provider_key(litellm_model: str, url: str | None) -> tuple[str, str] | None:
    """(provider, key variable) when litellm would send a provider's public-API key to ``url``, which is not that
    provider's own API; None otherwise (no URL, the provider's own URL, a provider not listed)."""
    found = provider_key(litellm_model)
    if found is None or not url:
        return None
    provider, variable, hosts = found
    if all(is_providers_url(hosts, one) for one in url.split(REPLICA_SEPARATOR)):  # (replicas: each must be)
        return None
    return provider, variable
