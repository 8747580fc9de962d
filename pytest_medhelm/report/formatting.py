"""How a number is printed in every table (terminal, Markdown, HTML, the comparison's): one place, one rule."""

from __future__ import annotations

import math
from typing import Any


def fixed(value: Any, digits: int = 3, missing: str = "-", sign: bool = False) -> str:
    """``value`` with ``digits`` decimals (``+`` before a positive one with ``sign``); ``missing`` when there is
    no number (None, NaN, an infinity, anything that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return missing
    return f"{value:{'+' if sign else ''}.{digits}f}"


def p_value(p: float | None) -> str:
    """A p-value: three decimals, or two significant digits below 0.001."""
    if p is None:
        return "-"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
