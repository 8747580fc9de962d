"""Prompt tokens counted offline: the dry run's estimate and the budget's upper bounds use the same count.

A prompt is counted as the one user message it is sent as, with OpenAI's tokenizers (tiktoken, its encoding files
the copies bundled in the litellm package, so nothing is downloaded): the text's tokens plus the 7 tokens of the
chat format around one user message (3 for the message, 1 for its role, 3 priming the reply), as
``litellm.token_counter`` counts them. Importing litellm costs a process 3-7 s of CPU, in a dry run and in every
xdist worker of a budgeted run; tiktoken's two encodings load in about 0.4 s. (litellm 1.110 encodes a text in pieces of
1,024 characters, which splits a token at some of their borders: on 30,000 characters of the shared benchmark data
it counted 0.3-0.4 % more than the text has. This count is the whole text's.)

The encoding is the one the model uses where that is known: ``o200k_base`` for OpenAI's GPT-4o, GPT-4.1, GPT-5,
gpt-oss and o-series families (tiktoken's table, names of later releases, litellm's price table for listed OpenAI
chat models), ``cl100k_base`` for everything else (older OpenAI models of other encodings included). Other
providers' models (Llama, Claude, Qwen, ...) are thus counted with ``cl100k_base``, an approximation (typically
within 10-20 % of the model's own tokenizer), as litellm counts them offline. tests/test_tokens.py checks the choice
against litellm's over every model of its price table. Without tiktoken's files, ``ceil(len(text) / 4)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

#: the tokens of the chat format around the one user message a prompt is sent as: 3 per message, 1 for the role
#: ("user"), 3 that prime the reply (OpenAI's cookbook; litellm.token_counter counts the same)
CHAT_FORMAT_TOKENS = 7

#: OpenAI names of releases after tiktoken's table: gpt-5 and later, the o-series (o1, o3, o4-mini, ...)
_LATER_OPENAI_RELEASE = re.compile(r"(?:gpt-(?:[5-9]|[1-9]\d+)|o[1-9]\d*)(?:[.-]|$)")
#: counts kept for prompts counted again (the dry run's judge prompts, one per judge) before the cache starts over
_CACHED_COUNTS = 4096
#: the modes of litellm's price table under which a listed OpenAI model is a chat model
_CHAT_MODES = ("chat", "responses")


def _tiktoken_encoding(name: str) -> str | None:
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None


def _listed_openai_chat_model(table: Mapping[str, Any], model: str, name: str) -> bool:
    """Whether litellm's price table lists ``model`` (or its deployment ``name``) as an OpenAI or Azure OpenAI chat
    model (an Azure entry counts when it is a GPT, or reads PDFs as OpenAI's models do)."""
    for key in (model, name, f"azure/{name}"):
        entry = table.get(key)
        if not isinstance(entry, Mapping) or entry.get("mode") not in _CHAT_MODES:
            continue
        provider = entry.get("litellm_provider")
        if provider == "openai" or (provider == "azure"
                                    and (name.startswith("gpt-") or entry.get("supports_pdf_input") is True)):
            return True
    return False


def encoding_name(model: str, table: Mapping[str, Any] | None = None) -> str:
    """``o200k_base`` or ``cl100k_base``: the encoding a prompt to ``model`` (a litellm model string) is counted
    with. ``table``: litellm's price table (default: :func:`pytest_medhelm.thirdparty.litellm_price_table`)."""
    name = model.rsplit("/", 1)[-1]  # the deployment's name, without provider and region prefixes
    if name.startswith("ft:"):  # a fine-tune: its base model's ("ft:gpt-4o-mini:org::id")
        name = name.split(":")[1]
    known = _tiktoken_encoding(name)
    if known is not None:  # (gpt-oss's o200k_harmony is o200k_base with the special tokens of its chat format)
        return "o200k_base" if known in ("o200k_base", "o200k_harmony") else "cl100k_base"
    if _LATER_OPENAI_RELEASE.match(name):
        return "o200k_base"
    if table is None:
        from pytest_medhelm.thirdparty import litellm_price_table

        table = litellm_price_table()
    if _listed_openai_chat_model(table, model, name):
        return "o200k_base"  # an OpenAI chat model newer than tiktoken's table: one of the o200k_base generation
    return "cl100k_base"


class TokenCounter:
    """Counts prompt tokens offline, the recent counts cached per (encoding, prompt)."""

    def __init__(self) -> None:
        self.method = "tiktoken"
        self._encodings: dict[str, Any] = {}
        self._by_model: dict[str, str] = {}
        self._cache: dict[tuple[str, str], int] = {}
        try:
            import tiktoken

            from pytest_medhelm.thirdparty import bundled_tiktoken_files

            # both encodings loaded now from litellm's bundled files (offline), so that counting later, on any
            # thread, never needs TIKTOKEN_CACHE_DIR
            with bundled_tiktoken_files():
                for encoding in ("cl100k_base", "o200k_base"):
                    self._encodings[encoding] = tiktoken.get_encoding(encoding)
        except Exception:  # noqa: BLE001 - tiktoken is a dependency; a broken install or no files: an estimate
            self.method = "chars/4"
            self._encodings = {}

    def encoding_for(self, model: str) -> str:
        chosen = self._by_model.get(model)
        if chosen is None:
            try:
                chosen = encoding_name(model)
            except Exception:  # noqa: BLE001 - an odd model string or price table: counted as most models are
                chosen = "cl100k_base"
            self._by_model[model] = chosen
        return chosen

    @staticmethod
    def approximate(text: str) -> int:
        return math.ceil(len(text) / 4)

    def __call__(self, model: str, text: str) -> int:
        if not self._encodings:
            return self.approximate(text)
        key = (self.encoding_for(model), text)
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= _CACHED_COUNTS:  # (a budget counts each prompt once: not every prompt kept)
                self._cache.clear()
            encoded = self._encodings[key[0]].encode(text, disallowed_special=())
            cached = self._cache[key] = len(encoded) + CHAT_FORMAT_TOKENS
        return cached
