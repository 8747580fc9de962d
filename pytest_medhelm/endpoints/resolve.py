"""Where each model under test and each judge is sent, and with which key.

One resolution from a model string to a :class:`ModelSpec`, with explicit parameters:

* ``local/...``: the llama.cpp server this plugin starts on 127.0.0.1 (its URL is known once it runs); no key;
* otherwise the model's own endpoint (``--medhelm-endpoint MODEL=URL``, ini ``medhelm_endpoints``; several URLs,
  ``MODEL=URL1,URL2``, are replicas of the model, see :mod:`pytest_medhelm.sending.replicas`), else its role's
  default: ``--medhelm-api-base`` for the models under test, ``--medhelm-jury-api-base`` for the judges, else none
  (litellm sends it to the provider's public API).

Keys, never one for all: a model sent to a URL gets the key in the environment variable its role names
(``--medhelm-api-key-env NAME`` for the models under test, ``--medhelm-jury-api-key-env NAME`` for the judges); the
option carries the variable's name, never the key, so the key is in no option, no report, no cache entry. A model
sent to a provider's public API gets that provider's own variable, read by litellm (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ``TOGETHERAI_API_KEY``...): a key meant for a hospital's endpoint never reaches OpenAI, and
OpenAI's key never reaches the hospital's endpoint (see :func:`pytest_medhelm.endpoints.wire.api_key_for`).

Nothing heavy is imported here. litellm is imported (lazily, through
:func:`pytest_medhelm.thirdparty.import_litellm`) only by :func:`route_problem`, and only for a model whose
provider prefix is not one of the common ones listed below.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

from pytest_medhelm.values import ModelSpec, is_llama_cpp_model, redact_url

Role = Literal["model", "judge"]


class EndpointOptions(Protocol):
    """What resolution reads of the run configuration (:class:`pytest_medhelm.config.RunConfig` has these)."""

    @property
    def api_base(self) -> str | None: ...

    @property
    def jury_api_base(self) -> str | None: ...

    @property
    def api_key_env(self) -> str | None: ...

    @property
    def jury_api_key_env(self) -> str | None: ...

    @property
    def endpoint_map(self) -> Mapping[str, str]: ...


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
        from pytest_medhelm.endpoints.llama import gguf

        # the URL is known once the server runs (the session's endpoint()); the identity never depends on it
        return ModelSpec(name=name, litellm_model=f"openai/{gguf.served_model_name(name)}", api_base=None,
                         identity=gguf.cache_identity(name))
    from pytest_medhelm.cache.identity import cache_identity

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
    from pytest_medhelm.endpoints.wire import uses_openai_wire

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
    from pytest_medhelm.cache.identity import endpoint_of

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
    if not any(is_local_spec(m) for m in models):
        return []
    return [f"medhelm: judge {j.name} → {destination(j)} (no endpoint given; open-ended benchmarks only)"
            for j in judges if not j.api_base and not is_llama_cpp_model(j.name)]


def foreign_key_problems(specs: Sequence[ModelSpec], role: Role, endpoints: Mapping[str, str]) -> list[str]:
    """A model of a provider (``anthropic/...``, ``together_ai/...``) sent to a URL that is not that provider's
    own API, with no key variable named for its role: litellm would send the provider's public-API key
    (``ANTHROPIC_API_KEY``) there. The usage errors' texts (issue 30, item 9), naming the model, the URL, where the
    URL came from and the option that names the key the URL should get."""
    from pytest_medhelm.endpoints.provider_keys import foreign_provider_key

    base_option, key_option = ROLE_OPTIONS[role]
    problems = []
    for spec in specs:
        if not spec.api_base or spec.api_key_env:
            continue
        found = foreign_provider_key(spec.litellm_model, spec.api_base)
        if found is None:
            continue
        provider, variable = found
        source = "--medhelm-endpoint" if spec.name in endpoints else base_option
        problems.append(f"{role} {spec.name} at {redact_url(spec.api_base)} ({source}): that URL is not {provider}'s "
                        f"API, and litellm would send it {provider}'s key ({variable}); name the variable holding the "
                        f"key for that URL with {key_option} NAME ({key_option} {variable} to send {provider}'s key "
                        "there after all)")
    return problems


def key_lines(models: Sequence[ModelSpec], judges: Sequence[ModelSpec]) -> list[str]:
    """At start-up: which key each URL gets (one line per URL and key), for the models and judges sent to a URL.
    The lines name variables, never a key."""
    from pytest_medhelm.endpoints.provider_keys import foreign_provider_key, provider_key
    from pytest_medhelm.endpoints.wire import OPENAI_COMPATIBLE_PREFIXES

    said: dict[tuple[str, str], list[str]] = {}
    for role, specs in (("model", models), ("judge", judges)):
        for spec in specs:
            if not spec.api_base or is_llama_cpp_model(spec.name):
                continue
            if spec.api_key_env:
                what = f"the key in {spec.api_key_env} ({ROLE_OPTIONS[role][1]})"
            elif spec.litellm_model.startswith("hosted_vllm/"):
                what = ("the key in HOSTED_VLLM_API_KEY" if os.environ.get("HOSTED_VLLM_API_KEY")
                        else "no key (a placeholder)")
            elif spec.litellm_model.startswith(OPENAI_COMPATIBLE_PREFIXES):
                what = "no key (a placeholder; OPENAI_API_KEY is OpenAI's, never sent elsewhere)"
            elif foreign_provider_key(spec.litellm_model, spec.api_base) is not None:
                what = "no key (a placeholder: the provider's key is not sent to a URL that is not its API)"
            else:
                found = provider_key(spec.litellm_model)
                provider = spec.litellm_model.partition("/")[0]
                what = (f"the key in {found[1]} ({provider}'s own API)" if found is not None
                        else f"the key litellm reads for {provider}, if any")
            said.setdefault((redact_url(spec.api_base), what), []).append(f"{role} {spec.name}")
    return [f"medhelm key: {url} gets {what} ({', '.join(users)})" for (url, what), users in said.items()]


def spec_for(rc: EndpointOptions, name: str, role: Role) -> ModelSpec:
    """``name`` resolved as the run configuration ``rc`` says: its role's default endpoint and key variable, and
    its own endpoint when ``--medhelm-endpoint`` names one (the built-in ``pytest_medhelm_model_spec``)."""
    judge = role == "judge"
    return resolve_spec(name, role=role, api_base=rc.jury_api_base if judge else rc.api_base,
                        endpoints=rc.endpoint_map, api_key_env=rc.jury_api_key_env if judge else rc.api_key_env)
