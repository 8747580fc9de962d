"""Prompt tokens counted offline: the dry run's estimate and the budget's upper bounds use the same count.

``litellm.token_counter`` with OpenAI's tokenizers bundled in litellm; litellm's download of a Hugging Face
tokenizer (tried even offline) is switched off while counting, so those models are counted with ``cl100k_base``,
an approximation. Without litellm, ``ceil(len(text) / 4)``.
"""

from __future__ import annotations

import math
from typing import Any

#: providers whose model names litellm's counter only recognises without the prefix
_OPENAI_PREFIXES = ("openai/", "azure/", "text-completion-openai/")


class TokenCounter:
    """Counts prompt tokens offline, one cached count per (counting model, prompt)."""

    def __init__(self) -> None:
        self.method = "litellm"
        self._litellm: Any = None
        self._cache: dict[tuple[str, str], int] = {}
        try:
            from pytest_medhelm.thirdparty import bundled_tiktoken_files, import_litellm

            self._litellm = import_litellm()
            # the encodings litellm counts with, loaded now from its bundled files (offline), so that counting
            # later, on any thread, never needs TIKTOKEN_CACHE_DIR
            import tiktoken

            with bundled_tiktoken_files():
                for name in ("cl100k_base", "o200k_base"):
                    tiktoken.get_encoding(name)
        except Exception:  # noqa: BLE001  # pragma: no cover - litellm is a dependency; a broken install gets an estimate
            self.method = "chars/4"

    @staticmethod
    def counting_model(model: str) -> str:
        for prefix in _OPENAI_PREFIXES:
            if model.startswith(prefix):
                return model[len(prefix):]
        return model

    @staticmethod
    def approximate(text: str) -> int:
        return math.ceil(len(text) / 4)

    def __call__(self, model: str, text: str) -> int:
        key = (self.counting_model(model), text)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        count = None
        if self._litellm is not None:
            litellm = self._litellm
            before = getattr(litellm, "disable_hf_tokenizer_download", False)
            litellm.disable_hf_tokenizer_download = True  # never fetch a tokenizer from the Hub
            try:
                count = int(litellm.token_counter(model=key[0], messages=[{"role": "user", "content": text}]))
            except Exception:  # noqa: BLE001 - a model litellm cannot count for: the chars/4 estimate below
                count = None
            finally:
                litellm.disable_hf_tokenizer_download = before
        if count is None:
            self.method = "chars/4"
            count = self.approximate(text)
        self._cache[key] = count
        return count
