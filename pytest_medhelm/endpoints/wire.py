"""How a model is reached: over OpenAI's chat completions wire straight to a URL, or through litellm; and which key
goes with its requests (never one key for all)."""

from __future__ import annotations

import os

from pytest_medhelm.endpoints.provider_keys import foreign_provider_key
from pytest_medhelm.values import LLAMA_CPP_PREFIX, ModelSpec

#: providers whose wire format is OpenAI's chat completions API
OPENAI_COMPATIBLE_PREFIXES = ("openai/", "hosted_vllm/", LLAMA_CPP_PREFIX)


#: what a keyless server (llama.cpp, a vLLM started without --api-key) is sent: OpenAI's SDK insists on a key
NO_KEY = "sk-no-key"


def api_key_for(spec: ModelSpec) -> str | None:
    """The key to send to ``spec``'s endpoint, or None to let litellm read the provider's own variable.

    Never one key for all (see :mod:`pytest_medhelm.endpoints.resolve`):

    * the variable ``spec.api_key_env`` names, when it names one (``--medhelm-api-key-env`` /
      ``--medhelm-jury-api-key-env``; checked to be set at start-up);
    * a ``hosted_vllm/`` model at a URL: ``HOSTED_VLLM_API_KEY`` (litellm's variable for that provider, which
      means that server), else a placeholder;
    * any other OpenAI-compatible model at a URL: a placeholder. ``OPENAI_API_KEY`` is OpenAI's key: it is not
      sent to someone else's server (litellm would send it there);
    * a model sent to a provider's public API: None, and litellm reads that provider's own variable
      (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...);
    * a provider's model at a URL that is not its API (:mod:`pytest_medhelm.endpoints.provider_keys`): a placeholder,
      never the provider's key (a run refuses it at start-up; a plugin's spec may still get here).
    """
    if spec.api_key_env:
        return os.environ.get(spec.api_key_env) or None
    if not spec.api_base:
        return None
    if spec.litellm_model.startswith("hosted_vllm/"):
        return os.environ.get("HOSTED_VLLM_API_KEY") or NO_KEY
    if spec.litellm_model.startswith(OPENAI_COMPATIBLE_PREFIXES):
        return NO_KEY
    if foreign_provider_key(spec.litellm_model, spec.api_base) is not None:
        return NO_KEY  # a provider's public-API key never goes to a URL not its API (refused at start-up too)
    return None  # another provider at its own API's URL: litellm reads that provider's variable


def uses_openai_wire(spec: ModelSpec) -> bool:
    return bool(spec.api_base) and spec.name.startswith(OPENAI_COMPATIBLE_PREFIXES)
