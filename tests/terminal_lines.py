"""Figures a test module measured, written on the terminal past output capture."""

from __future__ import annotations

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
