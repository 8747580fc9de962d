"""Hooks that other plugins and conftest files can implement to extend pytest-medhelm."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_medhelm_register_benchmarks(registry: Any) -> None:
    """Add benchmarks: call ``registry.register(Benchmark(...))``. Called once per process, after the built-ins."""


@pytest.hookspec
def pytest_medhelm_summary_rows(results: dict, config: pytest.Config, fmt: str) -> list[tuple[str, str]] | None:
    """Return extra ``(title, text)`` sections after the built-in tables: ``fmt`` is ``"terminal"`` (plain text
    for the terminal summary) or ``"markdown"`` (the text is a Markdown section for ``--medhelm-markdown``)."""


@pytest.hookspec
def pytest_medhelm_results(results: dict, config: pytest.Config) -> None:
    """Inspect or extend the results dict (the JSON contract) before it is written.

    Called after the thresholds were evaluated into ``results["gates"]``; a plugin may append gates of its own
    (dicts with at least ``spec``, ``model``, ``value`` and ``passed``): any gate that did not pass fails the run."""


@pytest.hookspec(firstresult=True)
def pytest_medhelm_model_spec(name: str, api_base: str | None, config: pytest.Config, role: str) -> Any:
    """Resolve a ``--medhelm-model`` (``role`` "model") or ``--medhelm-jury`` (``role`` "judge") string to a
    ``ModelSpec`` (first non-None result wins). ``api_base`` is the role's default endpoint.

    The built-in implementation (:func:`pytest_medhelm.endpoints.hook.pytest_medhelm_model_spec`, a plugin of its
    own) handles every litellm string, ``local/...`` llama.cpp models, per-model endpoints and the roles' key
    variables."""
