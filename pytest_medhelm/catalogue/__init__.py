"""The benchmark catalogue: one module per benchmark, grouped by category, and the registry that finds them.

Built-in definitions live in ``pytest_medhelm/catalogue/<category>/<slug>.py`` and each exposes ``BENCHMARK``; the
suite runs each one from ``benchmarks/<category>/test_<slug>.py`` (CONTRIBUTING.md, "Adding a benchmark").
Other plugins add benchmarks through the ``pytest_medhelm_register_benchmarks`` hook.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.taxonomy import CATEGORIES
from pytest_medhelm.values import Instance

if TYPE_CHECKING:
    import pluggy

__all__ = ["Benchmark", "Instance", "CATEGORY_PACKAGES", "Registry", "builtin_benchmarks"]

#: category packages, one per category of the taxonomy, in the paper's order; each module in them that defines
#: ``BENCHMARK`` is a built-in benchmark
CATEGORY_PACKAGES: tuple[str, ...] = tuple(category.slug for category in CATEGORIES)


def builtin_modules() -> list[str]:
    """Dotted names of the built-in benchmark modules: every module of a category package (sorted by name)."""
    import pkgutil

    names = []
    for package in CATEGORY_PACKAGES:
        pkg = importlib.import_module(f"{__name__}.{package}")
        names += [f"{pkg.__name__}.{m.name}" for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)
                  if not m.name.startswith("_")]
    return names


def builtin_benchmarks() -> list[Benchmark]:
    benchmarks = []
    for name in builtin_modules():
        module = importlib.import_module(name)
        if hasattr(module, "BENCHMARK"):
            benchmarks.append(module.BENCHMARK)
    return benchmarks


class Registry:
    """Benchmarks by slug. Registering a slug twice is an error unless ``replace=True`` (a plugin overriding one)."""

    def __init__(self) -> None:
        self._by_slug: dict[str, Benchmark] = {}

    def register(self, benchmark: Benchmark, replace: bool = False) -> None:
        if benchmark.slug in self._by_slug and not replace:
            raise ValueError(f"benchmark {benchmark.slug!r} is registered twice")
        self._by_slug[benchmark.slug] = benchmark

    def get(self, slug: str) -> Benchmark:
        try:
            return self._by_slug[slug]
        except KeyError:
            known = ", ".join(sorted(self._by_slug))
            raise KeyError(f"unknown benchmark {slug!r}; known: {known}") from None

    def __contains__(self, slug: object) -> bool:
        return slug in self._by_slug

    def __iter__(self):
        return iter(self._by_slug.values())

    def __len__(self) -> int:
        return len(self._by_slug)

    def slugs(self) -> list[str]:
        return list(self._by_slug)


def build_registry(hook: pluggy.HookRelay | None = None) -> Registry:
    """The built-in benchmarks, plus those other plugins register through ``hook`` (a pytest hook relay)."""
    registry = Registry()
    for bench in builtin_benchmarks():
        registry.register(bench)
    if hook is not None:
        hook.pytest_medhelm_register_benchmarks(registry=registry)
    return registry
