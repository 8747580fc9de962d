"""The value types every layer of the package shares: what an instance is, what is asked of a model and what comes
back, and how a request fails. A leaf module: it imports nothing else of the package, so that any module may use
these types without reaching up (``lint-imports`` checks it).

* :class:`Instance` (one row of a benchmark) and :class:`Loaded` (a loader's instances, with what its filters
  removed);
* :class:`ModelSpec` (a model under test or a judge, and how to reach it), :class:`ChatRequest` (everything that
  changes an answer; its :meth:`~ChatRequest.cache_key` is the sha256 of its canonical JSON: the model's identity,
  never a local server's port or an API key), :class:`Completion` (an answer with its accounting);
* :class:`ModelError` and :class:`BudgetExhausted`: a request that ended without an answer, stored and passed
  between processes as structured values (:meth:`ModelError.to_json`), never parsed back from text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeGuard, overload

LOG = logging.getLogger("pytest_medhelm.catalogue")

#: what starts the name of a llama.cpp model (``local/<name or path.gguf>``): a GGUF file served by a llama.cpp
#: server the run starts on loopback (:mod:`pytest_medhelm.endpoints.llama`). Not a private network
#: (``--medhelm-local-only``, :mod:`pytest_medhelm.governance`), not the user's data files.
LLAMA_CPP_PREFIX = "local/"


def is_llama_cpp_model(name: str) -> bool:
    """Whether ``name`` is a llama.cpp model (``local/...``) that the run serves itself."""
    return name.startswith(LLAMA_CPP_PREFIX)


@dataclass(frozen=True)
class Instance:
    """One row of a benchmark.

    ``input`` is the scenario's input text (HELM's ``instance.input.text``: what judges see, without the adapter's
    instructions). ``choices`` are the option texts of a multiple-choice question in reference order and
    ``correct`` the index of the right one; ``references`` are the gold texts of a generation task.
    ``extra`` carries what a metric needs beyond that (MedCalc's category and limits, EHRSQL's gold query).
    """

    id: str
    input: str
    references: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    correct: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    benchmark: str = ""
    #: a benchmark run as several HELM runs averaged (MedDialog's subsets, CLEAR's conditions) names the run here
    subset: str = ""

    @property
    def expected(self) -> str:
        """The gold answer as a person reads it (a letter for multiple choice)."""
        if self.choices and self.correct is not None:
            return chr(ord("A") + self.correct)
        return self.references[0] if self.references else ""


class Loaded(list):
    """A loader's instances (a list, in HELM's order) plus ``removed``: reason → number of source records that a
    filter of the loader dropped, so that nothing is dropped silently.

    The plugin reports ``removed`` in ``--medhelm-list`` (``689 (1 filtered)``) and in the results JSON
    (``run.filtered``); :meth:`done` also logs it (logger ``pytest_medhelm.catalogue``). Reasons are short
    sentences saying what was removed and why (usually: because HELM removes it too).
    """

    def __init__(self, items: Iterable[Instance] = (), slug: str = "") -> None:
        super().__init__(items)
        self.slug = slug
        self.removed: dict[str, int] = {}

    def note_removed(self, reason: str, count: int = 1) -> None:
        """Count ``count`` source records removed for ``reason`` (a count of 0 records nothing)."""
        if count:
            self.removed[reason] = self.removed.get(reason, 0) + count

    def counts(self, reasons: Mapping[str, str]) -> dict[str, int]:
        """``removed`` under short keys, zeros included: ``reasons`` maps each key to its reason text."""
        return {key: self.removed.get(reason, 0) for key, reason in reasons.items()}

    def done(self) -> Loaded:
        """Log what was removed; return self."""
        for reason, count in self.removed.items():
            LOG.info("%s: %d record(s) removed: %s", self.slug or "benchmark", count, reason)
        return self


#: bump when the meaning of a cached entry changes
CACHE_FORMAT = 1


#: between the URLs of a replica group in ``ModelSpec.api_base`` (a URL given on the command line never holds one)
REPLICA_SEPARATOR = ","


def replica_group(urls: Iterable[str]) -> str:
    """The one canonical value of the endpoints serving one model: its URLs without trailing slashes, sorted and
    joined by ``,`` (a single URL is itself). It is the group's ``ModelSpec.api_base`` and so part of its cache
    identity: the model served, whichever replica answered and in whatever order the URLs were listed."""
    return REPLICA_SEPARATOR.join(sorted({url.strip().rstrip("/") for url in urls}))


#: the families of reasoning models, each sent its own parameters (:mod:`pytest_medhelm.sending.reasoning`)
REASONING_FAMILIES = ("openai", "anthropic", "gemini", "served")


@dataclass(frozen=True)
class Reasoning:
    """A model the run treats as a reasoning model, and the room it gets to think.

    ``family`` says what its requests carry (OpenAI's ``max_completion_tokens``, Anthropic's ``thinking``, a
    served reasoner's larger ``max_tokens``, Gemini's thinking budget); ``budget`` is the reasoning tokens allowed
    on top of each request's answer limit (0: none, the references' request); ``effort`` the ``reasoning_effort``
    asked ("" for none); ``source`` where the budget came from: ``"option"`` (``--medhelm-reasoning-budget``),
    ``"default"`` (the stated default) or ``"none"``."""

    family: str
    budget: int = 0
    effort: str = ""
    source: str = "none"

    def __post_init__(self) -> None:
        if self.family not in REASONING_FAMILIES:
            raise ValueError(f"reasoning family must be one of {REASONING_FAMILIES}, got {self.family!r}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 0:
            raise ValueError(f"a reasoning budget is a whole number >= 0, got {self.budget!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A model under test (or a judge) as the user named it, and how to reach it."""

    #: the name the user gave: "openai/gpt-4o-mini", "local/smollm2"
    name: str
    #: the litellm model string actually sent ("openai/smollm2" for a local llama.cpp server)
    litellm_model: str
    #: where requests go: one URL; for a model served by several endpoints (replicas), their :func:`replica_group`
    #: (the scheduler sends each request to one of them: :meth:`at`); None: the provider's public API
    api_base: str | None = None
    #: what identifies the model in cache keys; defaults to name + api_base
    identity: str = ""
    #: the NAME of the environment variable holding this endpoint's API key (never the key itself), from
    #: --medhelm-api-key-env / --medhelm-jury-api-key-env; None: the provider's own variable (litellm's convention)
    api_key_env: str | None = None
    #: how many requests the endpoint serves at once (a llama.cpp server we started: its slots); the scheduler
    #: never has more in flight to it. None: no limit of its own (the run's concurrency applies)
    slots: int | None = None
    #: how the run treats the model as a reasoning model (what its requests carry, :mod:`pytest_medhelm.sending.
    #: reasoning`); None: a plain model
    reasoning: Reasoning | None = None

    @property
    def cache_identity(self) -> str:
        # (a URL's credentials are not the endpoint's identity, and never stored: http://***@host)
        return self.identity or (f"{self.name}@{redact_url(self.api_base)}" if self.api_base else self.name)

    @property
    def urls(self) -> tuple[str, ...]:
        """The endpoint URLs a request may be sent to: one, several (replicas), none (a provider's public API)."""
        return tuple(self.api_base.split(REPLICA_SEPARATOR)) if self.api_base else ()

    @property
    def is_replica_group(self) -> bool:
        return len(self.urls) > 1

    def at(self, url: str) -> ModelSpec:
        """This model sent to one of its replicas; its cache identity stays the group's."""
        return replace(self, api_base=url, identity=self.cache_identity)


# (the patterns run on untrusted text, a provider's error message of any size: each is linear in it, no nested or
# overlapping repetition that could backtrack)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s@?#]+@")
#: a parameter of a URL's query or fragment (``?name=value``; ``,`` ends a value: it separates a model's replicas)
_URL_PARAMETER = re.compile(r"(?P<name>[?&;#](?P<key>[\w.-]{1,64})=)[^&#;\s\"'<>,]+")
#: a parameter name that says it carries a credential (Google's ``key``, an Azure SAS ``sig``, a gateway's
#: ``access_token``, a Redis URL's ``password``; not ``max_tokens`` nor ``author``)
_CREDENTIAL_NAME = re.compile(r"(?:key|token|secret|passw(?:or)?d|pwd|sig(?:nature)?|auth(?:orization)?"
                              r"|credentials?)$", re.IGNORECASE)


@overload
def redact_url(text: str) -> str: ...
@overload
def redact_url(text: None) -> None: ...


def redact_url(text: str | None) -> str | None:
    """``text`` with the credentials of every URL in it replaced (``http://user:pass@host/v1`` becomes
    ``http://***@host/v1``, ``https://host/v1?key=AIza...`` becomes ``https://host/v1?key=***``): an ``api_base``,
    ``--medhelm-cache-url`` or a provider's error message may carry them, and they must never reach the results,
    the cache's keys, the terminal or a log."""
    if not text:
        return text
    if "@" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + "***@", text)
    if "=" in text:
        text = _URL_PARAMETER.sub(lambda m: m["name"] + "***" if _CREDENTIAL_NAME.search(m["key"]) else m[0], text)
    return text


@dataclass(frozen=True)
class ChatRequest:
    model: str  # ModelSpec.cache_identity
    messages: tuple[tuple[str, str], ...]  # (role, content)
    max_tokens: int
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    #: HELM's num_completions index; always 0 for MedHELM, kept so several samples never share an entry
    sample: int = 0
    #: "answer" for the model under test, "judge:<rubric version>" for jury requests
    purpose: str = "answer"
    #: the OpenAI ``response_format`` object sent with the request, as canonical JSON ("" = none, HELM's plain
    #: request); it constrains the reply (a local judge's JSON schema), so it is part of the cache key
    response_format: str = ""
    #: reasoning tokens allowed on top of ``max_tokens`` (the answer's limit); 0: none (a plain model, or a
    #: reasoning model sent the references' request). What is sent for it depends on the model's family
    #: (:func:`pytest_medhelm.sending.reasoning.generation_parameters`)
    reasoning_budget: int = 0
    #: the ``reasoning_effort`` asked ("" = none)
    reasoning_effort: str = ""

    @classmethod
    def for_prompt(cls, model: ModelSpec, prompt: str, max_tokens: int, stop=(), **kw: Any) -> ChatRequest:
        # HELM sends the whole prompt as one user message, no system prompt
        return cls.for_messages(model, (("user", prompt),), max_tokens, stop, **kw)

    @classmethod
    def for_messages(cls, model: ModelSpec, messages: Iterable[tuple[str, str]], max_tokens: int, stop=(),
                     **kw: Any) -> ChatRequest:
        """A request to ``model``: its cache identity, and the room it gets to think when it is a reasoning model
        (every request of a run is made here, so that an answer's and a judge's alike carry it)."""
        reasoning = model.reasoning
        if reasoning is not None:
            kw.setdefault("reasoning_budget", reasoning.budget)
            kw.setdefault("reasoning_effort", reasoning.effort)
        return cls(model=model.cache_identity, messages=tuple(messages), max_tokens=max_tokens, stop=tuple(stop),
                   **kw)

    @property
    def max_output_tokens(self) -> int:
        """The most tokens a reply may hold, thinking included: what a budget reserves, what bounds a reply."""
        return self.max_tokens + self.reasoning_budget

    @property
    def prompt_text(self) -> str:
        return "\n".join(content for _role, content in self.messages)

    def cache_key(self) -> str:
        return self._cache_key

    @cached_property
    def _cache_key(self) -> str:  # computed once: the plan, the scheduler and the item all ask for it
        payload = {"v": CACHE_FORMAT, **self.to_json()}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = {"model": self.model, "messages": [list(m) for m in self.messages], "max_tokens": self.max_tokens,
                "temperature": self.temperature, "stop": list(self.stop), "sample": self.sample,
                "purpose": self.purpose}
        if self.response_format:  # only when set: the keys of unconstrained requests stay what they were
            data["response_format"] = self.response_format
        if self.reasoning_budget:  # (likewise: a plain model's keys stay what they were)
            data["reasoning_budget"] = self.reasoning_budget
        if self.reasoning_effort:
            data["reasoning_effort"] = self.reasoning_effort
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatRequest:
        return cls(model=data["model"], messages=tuple((role, content) for role, content in data["messages"]),
                   max_tokens=data["max_tokens"], temperature=data["temperature"], stop=tuple(data["stop"]),
                   sample=data["sample"], purpose=data["purpose"],
                   response_format=data.get("response_format", ""),
                   reasoning_budget=data.get("reasoning_budget", 0), reasoning_effort=data.get("reasoning_effort", ""))


@dataclass
class Completion:
    """A model's answer with its accounting. ``cached`` is True when it came from the cache in this run."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    finish_reason: str | None = None
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: False when the server's reply had no token counts (the counts are then 0 and mean nothing): a budget counts
    #: such a request at its reserved upper bound (pytest_medhelm/sending/replies.py). Not cached: only the
    #: request that was sent is accounted.
    usage_known: bool = True
    #: of ``tokens_out``, the tokens spent thinking (``usage.completion_tokens_details.reasoning_tokens``; they
    #: are output tokens, billed as such); None: the server did not say
    reasoning_tokens: int | None = None
    #: the model's thinking, kept apart from the answer: a ``reasoning_content`` (or ``reasoning``) field,
    #: Anthropic's thinking blocks, a leading ``<think>`` block removed from the content ("" for none)
    thinking: str = ""

    def to_cache(self) -> dict[str, Any]:
        data = {"text": self.text, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "latency_s": self.latency_s, "cost_usd": self.cost_usd, "finish_reason": self.finish_reason,
                "extra": self.extra}
        if self.reasoning_tokens is not None:  # (only when there: a plain model's entries stay what they were)
            data["reasoning_tokens"] = self.reasoning_tokens
        if self.thinking:
            data["thinking"] = self.thinking
        return data

    @property
    def ran_out(self) -> bool:
        """The token limit was used up before any answer was written (an empty answer, cut by the length): for a
        reasoning model, its thinking took the whole budget. A measurement (a miss with its reason), never a
        pass."""
        return self.finish_reason == "length" and not self.text.strip()

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> Completion:
        return cls(**data, cached=True)


#: characters a terminal acts on rather than shows: C0 controls (escape sequences, carriage returns, newlines that
#: would fake a line of pytest's output), DEL, C1 controls, and the bidirectional overrides that reorder what is shown
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep_breaks: bool = False) -> str:
    """``text`` from a server (an error message, a batch's id or error line) safe to print: every control character
    written as its escape (``\\x1b``, ``\\n``), so that it reaches the terminal, a CI log or the JUnit XML as text,
    never as a clear-screen, a colour, a link or a line of pytest's own. ``keep_breaks``: its line breaks kept as
    such (a miss's detail, printed on lines of its own), every other control character escaped."""
    if not _UNPRINTABLE.search(text):
        return text
    if keep_breaks:
        return "\n".join(printable(line) for line in text.split("\n"))
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


class ModelError(Exception):
    """A request failed for good (after retries): the provider's message, the model, and whether retrying helps.

    Stored and passed between processes as a structured value (:meth:`to_json`, :meth:`from_json`), never parsed
    back from its text."""

    kind = "model"

    def __init__(self, model: str, message: str, status: int | None = None, retryable: bool = False,
                 systematic: bool = False) -> None:
        self.model = model
        self.status = status
        self.retryable = retryable
        #: every request to this model fails alike (a wrong key, an unknown model, an endpoint that never answered)
        self.systematic = systematic
        self.provider_message = printable(message)  # (a server's text: printed, stored, reported)
        code = f" (HTTP {status})" if status else ""
        super().__init__(f"{model}{code}: {self.provider_message}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "message": self.provider_message, "status": self.status,
                "retryable": self.retryable, "systematic": self.systematic}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ModelError:
        if data.get("kind") == BudgetExhausted.kind:
            return BudgetExhausted(data["model"], data["message"])
        return ModelError(data["model"], data["message"], data.get("status"), bool(data.get("retryable")),
                          bool(data.get("systematic")))


class BudgetExhausted(ModelError):
    """A request the budget (``--medhelm-budget``) refused: it was not sent. Its items are skipped, not errors;
    ``str()`` is the skip reason."""

    kind = "budget"

    def __init__(self, model: str, message: str) -> None:
        super().__init__(model, message)
        self.args = (message,)

    def __str__(self) -> str:
        return self.provider_message


# The numbers believed from untrusted input (a reply, a batch line, a cache entry): held to these bounds so that no
# sum, product or JSON writing of the report stage meets an integer of thousands of digits or an infinity
# (pytest_medhelm/sending/replies.py checks replies with them, pytest_medhelm/cache/store.py the cache's entries).
#: the largest token count believed from a reply, a batch line or a cache entry (a billion: no model's context
#: comes near it; a larger count is a server's invention)
MAX_TOKEN_COUNT = 10**9
#: the largest cost believed for one call, in USD (a million: no single request costs that)
MAX_COST_USD = 1e6
#: the largest duration believed, in seconds (about 11.6 days: a batch may take its provider's day, and more)
MAX_SECONDS = 1e6


def count_ok(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a token count to believe: an integer (not a bool) from 0 to :data:`MAX_TOKEN_COUNT`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT


def float_ok(value: Any, upper: float) -> bool:
    """Whether ``value`` is a number to believe: finite, from 0 to ``upper`` (a cost, a duration)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    # (an int is compared as it is: math.isfinite of an integer of 309 digits raises OverflowError)
    return (isinstance(value, int) or math.isfinite(value)) and 0 <= value <= upper


# A reasoning model's thinking, kept apart from its answer (pytest_medhelm/sending/reasoning.py on a fresh reply,
# pytest_medhelm/cache/store.py on an answer cached before the thinking was split off).
_OPEN, _CLOSE = "<think>", "</think>"


def split_thinking(content: str) -> tuple[str, str]:
    """(answer, thinking) of a message's content: a leading ``<think>…</think>`` block (after blank space) is the
    thinking and the rest, less the blank space after the block, the answer; an unclosed block is all thinking
    (an empty answer, as HELM's rule gives); a ``</think>`` with no ``<think>`` before it ends a thinking that the
    chat template opened in the prompt. Content without either is all answer."""
    stripped = content.lstrip()
    if stripped.startswith(_OPEN):
        end = stripped.find(_CLOSE, len(_OPEN))
        if end < 0:
            return "", stripped[len(_OPEN):]
        return stripped[end + len(_CLOSE):].lstrip(), stripped[len(_OPEN):end]
    end = content.find(_CLOSE)
    if end >= 0 and _OPEN not in content[:end]:
        return content[end + len(_CLOSE):].lstrip(), content[:end]
    return content, ""
