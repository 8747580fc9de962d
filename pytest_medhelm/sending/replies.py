"""A server's reply is untrusted input: what makes one a :class:`~pytest_medhelm.values.Completion`.

Checked before anything is cached (a reply that fails a check is a malformed reply: its request fails with the
reason, is never cached, and a run with a budget counts it at its reserved upper bound, since the provider may
have charged for it):

* **Size.** The body may be at most :func:`max_reply_bytes` of the request's ``max_tokens``:
  ``REPLY_OVERHEAD_BYTES`` (64 KiB: the JSON envelope, ids, usage, logprobs a server adds unasked) plus
  ``MAX_BYTES_PER_TOKEN`` (32) bytes per token asked for. A token is about 4 characters of English, so 32 bytes
  leaves room for long tokens and JSON escapes; only a server that ignores
  ``max_tokens`` exceeds it. ``max_tokens=5``: 64 KiB + 160 bytes; 4,096 (HELM's judges): 192 KiB. The body is
  read in chunks and dropped as soon as it passes the bound: a 50 MB reply is never held in memory.
* **Content.** ``choices[0].message.content`` is a string, or a list of text parts (``{"type": "text", "text":
  "..."}``, some servers send that) joined in order; ``null`` is an empty answer. Any other value (a number, a
  dict, a part that is not text) is malformed.
* **Usage.** ``usage.prompt_tokens`` and ``usage.completion_tokens`` are integers from 0 to ``MAX_TOKEN_COUNT``
  (10^9) when present; a negative, fractional, boolean, textual or absurd count (``1e308``, an integer of 4,000
  digits), or a ``usage`` that is not an object, is malformed. Absent usage (or an
  absent count) is allowed but unknown: ``Completion.usage_known`` is False, its counts are 0, and a budget then
  counts the request at its reserved upper bound (never at $0).
* **Thinking.** A reasoning model's ``reasoning_content`` or ``reasoning`` field (vLLM, SGLang, llama.cpp,
  DeepSeek's API) is a string or null, Anthropic's thinking blocks (through litellm) are objects with a string
  ``thinking``; ``usage.completion_tokens_details.reasoning_tokens`` is an integer >= 0 when present. Anything else
  is malformed. The size bound above counts the request's reasoning budget as tokens asked for
  (:attr:`~pytest_medhelm.values.ChatRequest.max_output_tokens`): a reply of a model given room to think may be as
  long as that room.
* **Numbers.** Every number a reply, a batch line or a cache entry brings is held to the bounds here
  (:func:`bounded_count`, :func:`bounded_float`; :func:`count_ok` and :func:`float_ok` for the cache's checks), so
  that no sum, product or JSON writing of the report stage meets an integer of thousands of digits or an infinity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_medhelm.values import MAX_COST_USD, MAX_TOKEN_COUNT, float_ok

__all__ = ["MAX_BYTES_PER_TOKEN", "REPLY_OVERHEAD_BYTES",
           "MalformedReply", "Usage", "believed_cost", "bounded_count", "bounded_float",
           "max_reply_bytes", "reply_reasoning_tokens", "reply_text", "reply_thinking", "reply_usage"]

#: bytes of reply body allowed per token of ``max_tokens`` (see the module's docstring for why 32)
MAX_BYTES_PER_TOKEN = 32
#: bytes allowed whatever ``max_tokens`` (the JSON envelope, ids, usage, extras a server adds)
REPLY_OVERHEAD_BYTES = 64 * 1024


class MalformedReply(ValueError):
    """A reply that cannot be an answer; ``reason`` says what was wrong (it becomes the item's error)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def max_reply_bytes(max_tokens: int | None) -> int:
    """The largest reply body accepted for a request of ``max_tokens`` tokens."""
    tokens = max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0 else 0
    return REPLY_OVERHEAD_BYTES + MAX_BYTES_PER_TOKEN * tokens


def too_large(size: int, max_tokens: int | None) -> MalformedReply:
    return MalformedReply(f"malformed reply: body over {max_reply_bytes(max_tokens):,} bytes (the bound for "
                          f"max_tokens={max_tokens}; got {size:,} so far): not an answer")


def reply_text(content: Any) -> str:
    """The answer's text from a message's ``content``: a string, text parts joined, or "" for null."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
                continue
            kind = part.get("type") if isinstance(part, dict) else None
            text = part.get("text") if isinstance(part, dict) else None
            if kind not in (None, "text", "output_text") or not isinstance(text, str):
                raise MalformedReply(f"malformed reply: content part {index} is not text "
                                     f"({_short(part)}); expected a string or text parts")
            texts.append(text)
        return "".join(texts)
    raise MalformedReply(f"malformed reply: content is {type(content).__name__} ({_short(content)}); "
                         "expected a string or a list of text parts")


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int
    #: False when the server did not say (the counts are then 0 and mean nothing)
    known: bool


def bounded_count(value: Any, name: str) -> int | None:
    """A token count a server sent (``name`` says where, for the message): None when absent, else an integer from
    0 to :data:`MAX_TOKEN_COUNT` (an integral float such as ``12.0`` is taken as its integer); anything else raises
    :class:`MalformedReply`."""
    if value is None:
        return None
    expected = f"expected an integer from 0 to {MAX_TOKEN_COUNT:,}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedReply(f"malformed reply: usage.{name} is {_short(value)}; {expected}")
    if isinstance(value, float) and not value.is_integer():
        raise MalformedReply(f"malformed reply: usage.{name} is {value!r}; {expected}")
    if not 0 <= value <= MAX_TOKEN_COUNT:
        raise MalformedReply(f"malformed reply: usage.{name} is {_short(value)}; {expected}")
    return int(value)


def bounded_float(value: Any, name: str, upper: float) -> float | None:
    """A cost or a duration a server sent: None when absent, else a finite number from 0 to ``upper``; anything
    else raises :class:`MalformedReply` naming ``name``."""
    if value is None:
        return None
    if not float_ok(value, upper):
        raise MalformedReply(f"malformed reply: {name} is {_short(value)}; expected a finite number from 0 to "
                             f"{upper:,g}")
    return float(value)


def believed_cost(value: Any) -> float | None:
    """A cost computed from what a server said (litellm's price of its usage): the number, or None (unknown, never
    $0) when it is not a finite number from 0 to :data:`MAX_COST_USD`."""
    return float(value) if float_ok(value, MAX_COST_USD) else None


def _count(value: Any, name: str) -> int | None:
    return bounded_count(value, name)


def reply_usage(usage: Any) -> Usage:
    """Token counts from a reply's ``usage`` (a dict or an object with the attributes)."""
    if usage is None:
        return Usage(0, 0, known=False)
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    elif isinstance(usage, (str, bytes, int, float, list, tuple)):
        raise MalformedReply(f"malformed reply: usage is {_short(usage)}; expected an object")
    else:  # litellm's Usage
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    tokens_in, tokens_out = _count(prompt, "prompt_tokens"), _count(completion, "completion_tokens")
    return Usage(tokens_in or 0, tokens_out or 0, known=tokens_in is not None and tokens_out is not None)


#: the fields of a message that carry a served reasoner's thinking (vLLM >= 0.11 says ``reasoning``; vLLM before,
#: SGLang, llama.cpp and DeepSeek's API ``reasoning_content``)
THINKING_FIELDS = ("reasoning_content", "reasoning")


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def reply_thinking(message: Any) -> list[str]:
    """The thinking a reply's message carries apart from its content: each reasoning field's text, else the text
    of Anthropic's thinking blocks (as litellm hands them over); ``message`` a dict or litellm's Message."""
    texts: list[str] = []
    for name in THINKING_FIELDS:
        value = _field(message, name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise MalformedReply(f"malformed reply: message.{name} is {_short(value)}; expected a string")
        if value not in texts:  # (litellm may give one text under both names)
            texts.append(value)
    if texts:
        return texts
    blocks = _field(message, "thinking_blocks")
    if blocks is None:
        return texts
    if not isinstance(blocks, list):
        raise MalformedReply(f"malformed reply: thinking_blocks is {_short(blocks)}; expected a list")
    for index, block in enumerate(blocks):
        text = _field(block, "thinking")
        kind = _field(block, "type")
        if kind == "redacted_thinking":
            continue  # (encrypted: nothing to read, and its tokens are counted by the usage)
        if not isinstance(text, str):
            raise MalformedReply(f"malformed reply: thinking block {index} is {_short(block)}; expected an "
                                 "object with a string 'thinking'")
        texts.append(text)
    return texts


def reply_reasoning_tokens(usage: Any) -> int | None:
    """``usage.completion_tokens_details.reasoning_tokens``: an integer >= 0, or None when the server did not
    say."""
    if usage is None:
        return None
    details = _field(usage, "completion_tokens_details")
    if details is None:
        return None
    if isinstance(details, (str, bytes, int, float, list, tuple)):
        raise MalformedReply(f"malformed reply: usage.completion_tokens_details is {_short(details)}; expected an "
                             "object")
    tokens = _count(_field(details, "reasoning_tokens"), "completion_tokens_details.reasoning_tokens")
    completion = _field(usage, "completion_tokens")
    if tokens is not None and isinstance(completion, int) and not isinstance(completion, bool) and tokens > completion:
        raise MalformedReply(f"malformed reply: usage.completion_tokens_details.reasoning_tokens is {tokens:,}, more "
                             f"than the completion_tokens ({completion:,}) it is a part of")
    return tokens


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        # (repr of an integer of more than 4,300 digits raises, and a few hundred digits say nothing)
        try:
            return f"an integer of {len(str(abs(value))):,} digits"
        except ValueError:
            return "an integer of more than 4,300 digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
