"""Figures a test module measured, written on the terminal past output capture."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def report_line(config: pytest.Config, text: str) -> None:
    """Write ``text`` on the terminal now, past output capture: the figures a module's tests measured, printed by
    a module-scoped fixture after its last test (shown without -s; not shown by xdist workers)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(text)


def figures_reported(figures: Counter, text: Callable[[Counter], str]) -> Any:
    """A module-scoped autouse fixture writing ``text(figures)`` with :func:`report_line` after the module's last
    test, when its tests counted anything; a module assigns it to a name of its own
    (``_report_figures = figures_reported(FIGURES, lambda f: ...)``), where pytest finds it."""

    @pytest.fixture(scope="module", autouse=True)
    def _report_figures(request: pytest.FixtureRequest) -> Iterator[None]:
        yield
        if figures:
            report_line(request.config, text(figures))

    return _report_figures
