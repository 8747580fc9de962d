"""Where each model under test and each judge is sent, and with which key.

One resolution from a model string to a :class:`ModelSpec`, with explicit parameters:

* ``local/...``: the llama.cpp server this plugin starts on 127.0.0.1 (its URL is known once it runs); no key;
* otherwise the model's own endpoint (``--medhelm-endpoint MODEL=URL``, ini ``medhelm_endpoints``; several URLs,
  ``MODEL=URL1,URL2``, are replicas of the model, see :mod:`pytest_medhelm.models.replicas`), else its role's
  default: ``--medhelm-api-base`` for the models under test, ``--medhelm-jury-api-base`` for the judges, else none
  (litellm sends it to the provider's public API).

Keys, never one for all: a model sent to a URL gets the key in the environment variable its role names
(``--medhelm-api-key-env NAME`` for the models under test, ``--medhelm-jury-api-key-env NAME`` for the judges); the
option carries the variable's name, never the key, so the key is in no option, no report, no cache entry. A model
sent to a provider's public API gets that provider's own variable, read by litellm (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ``TOGETHERAI_API_KEY``...): a key meant for a hospital's endpoint never reaches OpenAI, and
OpenAI's key never reaches the hospital's endpoint (see :func:`pytest_medhelm.models.transport.api_key_for`).

Nothing heavy is imported here. litellm is imported (lazily, through
:func:`pytest_medhelm.thirdparty.import_litellm`) only by :func:`route_problem`, and only for a model whose
provider prefix is not one of the common ones listed below.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal
from collections.abc import Iterable, Mapping, Sequence

from pytest_medhelm.values import ModelSpec, is_llama_cpp_model, redact_url

Role = Literal["model", "judge"]

#: providers of the usual litellm strings: routable without importing litellm (3 s) to ask it
KNOWN_PROVIDERS = frozenset({
    "openai", "hosted_vllm", "anthropic", "together_ai", "gemini", "vertex_ai", "bedrock", "azure", "azure_ai",
    "ollama", "ollama_chat", "groq", "mistral", "deepseek", "fireworks_ai", "openrouter", "huggingface", "xai",
    "cohere", "databricks", "sagemaker", "watsonx", "perplexity", "deepinfra", "anyscale", "cerebras", "nvidia_nim",
    "lm_studio", "llamafile", "vllm", "text-completion-openai", "custom_openai",
})

#: how a start-up line names a provider's public API
PROVIDER_NAMES = {
    "openai": "OpenAI's public API", "anthropic": "Anthropic's public API",
    "together_ai": "Together AI's public API", "gemini": "Google's Gemini API", "vertex_ai": "Google Vertex AI",
    "bedrock": "AWS Bedrock", "azure": "Azure OpenAI", "groq": "Groq's public API", "mistral": "Mistral's public API",
    "deepseek": "DeepSeek's public API", "openrouter": "OpenRouter's public API",
}

ROLE_OPTIONS: dict[str, tuple[str, str]] = {  # role -> (its api base option, its key variable option)
    "model": ("--medhelm-api-base", "--medhelm-api-key-env"),
    "judge": ("--medhelm-jury-api-base", "--medhelm-jury-api-key-env"),
}


def resolve_spec(name: str, *, role: Role, api_base: str | None, endpoints: Mapping[str, str],
                 api_key_env: str | None) -> ModelSpec:
    """``name`` as a ModelSpec: its URL (own endpoint, else ``api_base``: the role's default), the NAME of the
    variable holding its key (``api_key_env``, the role's, only for a model sent to a URL) and its cache identity.

    ``role`` is "model" (under test) or "judge"; ``endpoints`` maps model names to their own URLs."""
    if role not in ROLE_OPTIONS:
        raise ValueError(f"role must be 'model' or 'judge', got {role!r}")
    if is_llama_cpp_model(name):
        from pytest_medhelm.models.llama import gguf

        # the URL is known once the server runs (the session's endpoint()); the identity never depends on it
        return ModelSpec(name=name, litellm_model=f"openai/{gguf.served_model_name(name)}", api_base=None,
                         identity=gguf.cache_identity(name))
    from pytest_medhelm.models.identity import cache_identity

    url = endpoints.get(name) or api_base
    # the endpoint actually used, litellm's environment included (OPENAI_BASE_URL...): one function decides
    return ModelSpec(name=name, litellm_model=name, api_base=url, api_key_env=api_key_env if url else None,
                     identity=cache_identity(name, url))


# ----------------------------------------------------------------------------------------------------------------
# checks at start-up (each returns the usage error's text, or None)


def endpoint_problems(endpoints: Sequence[tuple[str, str]], *, source: str, models: Iterable[str],
                      judges: Iterable[str], strict_names: bool) -> list[str]:
    """What is wrong with the ``(MODEL, URL)`` pairs given in ``source`` (the option or ini key, for the message).

    A model given two different URLs, an endpoint for a ``local/...`` model (the plugin serves those), and, when
    ``strict_names`` (the command line), a name that is neither a model under test nor a judge (a typo would
    otherwise send that model to its default endpoint or a public provider)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    known = set(models) | set(judges)
    for name, url in endpoints:
        where = f"{source} '{name}={url}'"
        if is_llama_cpp_model(name):
            problems.append(f"{where}: local/... models are served by the llama.cpp server the plugin starts; "
                            "give no endpoint for them (or name the model openai/NAME to use a server of your own)")
        elif name in seen and seen[name] != url:
            problems.append(f"{where}: {name} already has the endpoint {seen[name]}; give all its URLs at once, "
                            f"'{name}=URL1,URL2' (replicas of one model)")
        elif strict_names and name not in known:
            problems.append(f"{where}: {name!r} is neither a model under test (--medhelm-model) nor a judge "
                            f"(--medhelm-jury); known: {', '.join(sorted(known)) or 'none'}")
        seen.setdefault(name, url)
    return problems


def key_problem(role: Role, api_key_env: str | None, specs: Iterable[ModelSpec], source: str,
                environ: Mapping[str, str] = os.environ) -> str | None:
    """A named key variable that is unset (or empty) while a model of ``role`` would send it. ``source`` is the
    option or ini key it came from. The variable's value is never part of the message."""
    if not api_key_env:
        return None
    users = [s.name for s in specs if s.api_key_env == api_key_env]
    if users and not environ.get(api_key_env):
        if not _CONVENTIONAL_ENV_NAME.fullmatch(api_key_env) or sum(c.isdigit() for c in api_key_env) > 8:
            # an unset name that does not look like one (hf_..., a hex string) may be the key itself: not repeated
            return (f"{source}: no environment variable of the name given is set, and the name ({len(api_key_env)} "
                    "characters, not repeated here) looks like an API key rather than the NAME of the variable "
                    f"holding one (e.g. MY_ENDPOINT_API_KEY); it is the key variable of {', '.join(users)}")
        return (f"{source} {api_key_env}: the environment variable {api_key_env} is not set (or empty); it holds the "
                f"API key sent to the endpoint of {', '.join(users)}")
    return None


#: a variable name as people write them (MY_ENDPOINT_API_KEY): repeated in messages; anything else may be a key
_CONVENTIONAL_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def route_problem(spec: ModelSpec, source: str) -> str | None:
    """Why litellm cannot route ``spec`` (``--medhelm-model stub-a``: no provider), said once at start-up rather
    than as a provider paragraph on every item; None when it can. ``source`` names the option it came from.

    ``local/...`` and the OpenAI-compatible models sent to a URL never reach litellm; a model whose provider prefix
    is a common one needs no check; anything else asks litellm's own ``get_llm_provider`` (importing litellm)."""
    from pytest_medhelm.models.transport import uses_openai_wire

    if is_llama_cpp_model(spec.name) or uses_openai_wire(spec):
        return None
    provider, sep, _rest = spec.litellm_model.partition("/")
    if sep and provider in KNOWN_PROVIDERS:
        return None
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    try:
        litellm.get_llm_provider(spec.litellm_model, api_base=spec.api_base)
    except Exception as exc:  # noqa: BLE001 - litellm's BadRequestError: "LLM Provider NOT provided ..."
        why = str(getattr(exc, "message", "") or exc).split("\n", 1)[0]
        why = why.removeprefix("litellm.BadRequestError: ").split(". ", 1)[0]
        return (f"{source} {spec.name!r}: litellm cannot route this model string ({why}); expected PROVIDER/MODEL: "
                "a provider's model (openai/gpt-4o-mini, anthropic/claude-3-7-sonnet-20250219, ...); for an "
                f"OpenAI-compatible server, openai/{spec.name} with --medhelm-api-base URL or --medhelm-endpoint "
                f"'openai/{spec.name}=URL'; or local/smollm2 (a llama.cpp server the plugin starts)")
    return None


# ----------------------------------------------------------------------------------------------------------------
# where requests go, said at start-up


def destination(spec: ModelSpec) -> str:
    """Where ``spec``'s requests go, in words."""
    if is_llama_cpp_model(spec.name):
        return "a llama.cpp server the plugin starts on 127.0.0.1"
    if spec.is_replica_group:
        return f"{len(spec.urls)} replicas, each request to the least busy: {', '.join(spec.urls)}"
    if spec.api_base:
        return redact_url(spec.api_base)
    from pytest_medhelm.models.identity import endpoint_of

    moved = endpoint_of(spec.litellm_model, None)
    if moved.url is not None:  # litellm's environment sends it elsewhere
        return f"{redact_url(moved.url)} ({moved.source})"
    provider, sep, _rest = spec.litellm_model.partition("/")
    if not sep:
        return "the public API of the provider litellm picks for this name"
    return PROVIDER_NAMES.get(provider, f"{provider}'s public API (through litellm)")


def is_local_spec(spec: ModelSpec) -> bool:
    """Served on this machine or a private network (``governance``'s definition, no DNS query)."""
    from pytest_medhelm.governance import endpoint_problem

    return endpoint_problem(spec) is None


def startup_lines(models: Sequence[ModelSpec], judges: Sequence[ModelSpec]) -> list[str]:
    """One line per judge that goes to a provider's public API although a model under test is local: a user who
    keeps the model on their network must not find out from a bill (or an audit) that the judges did not."""
    lines = []
    if any(is_local_spec(m) for m in models):
        lines = [f"medhelm: judge {j.name} → {destination(j)} (no endpoint given; open-ended benchmarks only)"
                 for j in judges if not j.api_base and not is_llama_cpp_model(j.name)]
    return lines + provider_key_lines(judges, "judge")


#: the variable litellm reads a provider's key from, for the providers people put behind a URL of their own
PROVIDER_KEY_VARIABLES = {
    "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY", "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY", "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY", "azure": "AZURE_API_KEY", "cohere": "COHERE_API_KEY",
}


def provider_key_lines(specs: Sequence[ModelSpec], role: Role) -> list[str]:
    """One line per model of a provider (not an OpenAI-compatible one) sent to a URL with no key variable named:
    litellm then sends that provider's own key (``ANTHROPIC_API_KEY``, ...) to the URL, which may not be the
    provider's (a gateway, a proxy, a typo): said before the first request, with the option that names another."""
    from pytest_medhelm.models.transport import OPENAI_COMPATIBLE_PREFIXES

    option = ROLE_OPTIONS[role][1]
    lines = []
    for spec in specs:
        if not spec.api_base or spec.api_key_env or spec.litellm_model.startswith(OPENAI_COMPATIBLE_PREFIXES):
            continue
        provider = spec.litellm_model.partition("/")[0]
        variable = PROVIDER_KEY_VARIABLES.get(provider, f"the variable litellm reads for {provider}")
        lines.append(f"medhelm: {role} {spec.name} → {destination(spec)} is sent {provider}'s own API key "
                     f"({variable}) by litellm; to send another key there, name its variable with {option}")
    return lines


def spec_for(rc: Any, name: str, role: Role) -> ModelSpec:
    """``name`` resolved as the run configuration ``rc`` says: its role's default endpoint and key variable, and
    its own endpoint when ``--medhelm-endpoint`` names one (the built-in ``pytest_medhelm_model_spec``)."""
    judge = role == "judge"
    return resolve_spec(name, role=role, api_base=rc.jury_api_base if judge else rc.api_base,
                        endpoints=rc.endpoint_map, api_key_env=rc.jury_api_key_env if judge else rc.api_key_env)
