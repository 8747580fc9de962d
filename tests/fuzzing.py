"""How many inputs a property test (Hypothesis) tries: all of them in the whole suite (CI's ``pytest -n 3``), a
tenth in the fast tier (``pytest -m "not e2e"``), the loop a developer runs in a minute. The properties are the same
in both; the whole suite is where their full counts are proved, as the e2e tier is where whole real runs are."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

#: the fast tier tries this share of each property's inputs (at least MIN_EXAMPLES)
FAST_TIER_SHARE = 10
MIN_EXAMPLES = 50

_share = 1


def choose_budget(config: pytest.Config) -> None:
    """The fast tier when the run deselects the e2e tier by its marker (``-m "not e2e"``, as the README says);
    called by tests/conftest.py before the test modules are imported (their decorators read the budget)."""
    global _share
    _share = FAST_TIER_SHARE if (config.option.markexpr or "").split() == ["not", "e2e"] else 1


def examples(full: int) -> int:
    """The inputs to try of a property whose whole-suite count is ``full``."""
    return full if _share == 1 else max(MIN_EXAMPLES, full // _share)


def fuzz(full: int, **options: Any) -> settings:
    """Hypothesis settings of a property: ``examples(full)`` inputs, no deadline (a loaded machine), and ``options``."""
    return settings(max_examples=examples(full), deadline=None, **options)
