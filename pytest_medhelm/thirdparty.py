"""The heavy third-party libraries, imported in one place each, with their process-wide side effects scoped.

pytest-medhelm runs inside the user's pytest process: an environment variable it needs while a library loads is set
only for that moment, only when the user has not set it, and put back afterwards. Nothing here is imported at
plugin load; each function imports on first use. litellm's bundled files (its price table, tiktoken's encodings) are
read from its package without importing it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: set for litellm's import only, and only when the user has not set them: LITELLM_LOCAL_MODEL_COST_MAP makes it
#: read its bundled price table instead of fetching one from the internet at import (the only time it reads it);
#: its tokenizer module (imported lazily by litellm, here at once) points TIKTOKEN_CACHE_DIR at its bundled
#: tokenizers, unconditionally. Both are put back as they
#: were once litellm is in: the user's process (their tests, tiktoken calls of their own) sees no change.
_LITELLM_IMPORT_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
_RESTORED_AFTER_IMPORT = ("LITELLM_LOCAL_MODEL_COST_MAP", "TIKTOKEN_CACHE_DIR")


def import_litellm() -> Any:
    """litellm, imported without fetching anything and without leaving environment variables changed."""
    if "litellm" not in sys.modules:
        saved = {name: os.environ.get(name) for name in _RESTORED_AFTER_IMPORT}
        for name, value in _LITELLM_IMPORT_ENV.items():
            os.environ.setdefault(name, value)
        try:
            import litellm

            # imported lazily by litellm on its first token count, this module points TIKTOKEN_CACHE_DIR at
            # litellm's bundled files for good: imported here, inside the window that puts the variable back
            import litellm.litellm_core_utils.default_encoding
        finally:
            for name, original in saved.items():
                if original is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = original
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def _litellm_tokenizer_dir() -> str | None:
    """The directory where litellm ships tiktoken's BPE files (found without importing litellm, which is slow)."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "litellm_core_utils", "tokenizers")
    return folder if os.path.isdir(folder) else None


@contextlib.contextmanager
def bundled_tiktoken_files() -> Iterator[None]:
    """While loading tiktoken encodings: ``TIKTOKEN_CACHE_DIR`` at litellm's bundled copies (offline), unless the
    user chose a folder; then put back as it was.

    tiktoken reads the variable only while it loads an encoding (it keeps what it loaded), so it is set for that
    moment alone rather than for the user's whole process. Load encodings within this block, once, before any
    thread needs them (setting a variable of the process while other threads run is itself a race)."""
    if os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR"):
        yield
        return
    bundled = _litellm_tokenizer_dir()
    if bundled is None:
        yield
        return
    os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        yield
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)


_TABLE: dict[str, Any] | None = None


def bundled_price_table() -> dict[str, Any] | None:
    """The price table shipped inside the litellm package, read without importing litellm (None if absent)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("litellm")
        if spec is None or not spec.origin:
            return None
        with open(Path(spec.origin).parent / "model_prices_and_context_window_backup.json", encoding="utf-8") as fh:
            table = json.load(fh)
    except (OSError, ValueError, ImportError):
        return None
    return table if isinstance(table, dict) else None


def litellm_price_table() -> Mapping[str, Any]:
    """litellm's local price table: ``litellm.model_cost`` if litellm is imported, else its bundled JSON file."""
    global _TABLE
    if "litellm" in sys.modules and isinstance(getattr(sys.modules["litellm"], "model_cost", None), dict):
        return sys.modules["litellm"].model_cost
    if _TABLE is None:
        table = bundled_price_table()
        if table is None:
            try:
                table = dict(import_litellm().model_cost)
            except Exception:  # noqa: BLE001 - no (working) litellm: every price is unknown unless the file gives it
                table = {}
        _TABLE = table
    return _TABLE
