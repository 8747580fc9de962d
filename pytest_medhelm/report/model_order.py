"""The one order of a run's models in every report (the terminal's tables, the files, the HTML)."""

from __future__ import annotations

from collections.abc import Iterable


def ordered_models(named: Iterable[str], seen: Iterable[str | None]) -> list[str]:
    """The models the run names, in its order, then any other model ``seen`` in its rows, sorted."""
    first = list(named)
    return first + sorted({model for model in seen if model is not None} - set(first))
