"""What an item records about itself, for the report: answer, accounting, score.

The model fixture and the assertions write into the running item's record; the plugin attaches the record to the
item's report (``report.medhelm``), which xdist carries to the controlling process like any report attribute.
"""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

RECORD = pytest.StashKey[dict]()
#: the item whose test body is running (set by the plugin around setup and call)
CURRENT_ITEM: contextvars.ContextVar[pytest.Item | None] = contextvars.ContextVar("medhelm_item", default=None)


class Missed(AssertionError):
    """The model's answer scored below the metric's pass mark: a measurement, not a failure (unless --medhelm-strict)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def record_for(item: pytest.Item | None = None) -> dict[str, Any]:
    """The record of ``item`` (default: the running item), created on first use."""
    item = item or CURRENT_ITEM.get()
    if item is None:
        raise RuntimeError("pytest-medhelm: no medhelm item is running (assertions work inside a medhelm test)")
    record = item.stash.get(RECORD, None)
    if record is None:
        record = item.stash[RECORD] = {}
    return record
