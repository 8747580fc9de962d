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
    from collections.abc import Iterator

    import pluggy

__all__ = ["Benchmark", "Instance", "CATEGORY_PACKAGES", "Registry", "builtin_benchmarks"]

#: category packages, one per category of the taxonomy, in the paper's order; each module in them (but those whose
#: names start with "_") defines one built-in benchmark as ``BENCHMARK``, its slug the module's name
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
    """Every built-in benchmark, each one's module imported."""
    return [_defined_in(name, name.rpartition(".")[2]) for name in builtin_modules()]


class Registry:
    """Benchmarks by slug, in the order they were registered. Registering a slug twice is an error unless
    ``replace=True`` (a plugin overriding one).

    A built-in benchmark is registered by its module's name, which is its slug, and its module is imported when the
    benchmark is first asked for: a process imports the definitions of the benchmarks it collects and runs (a
    worker of a run of one benchmark of the suite, one module; a run of the user's own benchmarks, none), not every
    built-in one (about a millisecond each, at every start)."""

    def __init__(self) -> None:
        #: a benchmark, or the dotted name of the module that defines it, not imported yet
        self._entries: dict[str, Benchmark | str] = {}

    def register(self, benchmark: Benchmark, replace: bool = False) -> None:
        if benchmark.slug in self._entries and not replace:
            raise ValueError(f"benchmark {benchmark.slug!r} is registered twice")
        self._entries[benchmark.slug] = benchmark

    def register_module(self, module: str) -> None:
        """The benchmark that ``module`` defines as ``BENCHMARK``, whose slug is the module's last name."""
        slug = module.rpartition(".")[2]
        if slug in self._entries:
            raise ValueError(f"benchmark {slug!r} is registered twice")
        self._entries[slug] = module

    def get(self, slug: str) -> Benchmark:
        try:
            entry = self._entries[slug]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise KeyError(f"unknown benchmark {slug!r}; known: {known}") from None
        if isinstance(entry, str):
            entry = self._entries[slug] = _defined_in(entry, slug)
        return entry

    def __contains__(self, slug: object) -> bool:
        return slug in self._entries

    def __iter__(self) -> Iterator[Benchmark]:
        return iter([self.get(slug) for slug in list(self._entries)])

    def __len__(self) -> int:
        return len(self._entries)

    def slugs(self) -> list[str]:
        return list(self._entries)

    def category_of(self, slug: str) -> str:
        """A benchmark's category slug; a built-in's without importing its module (its category package's name,
        which tests/catalogue/test_suite_modules.py holds to its definition's category)."""
        entry = self._entries.get(slug)
        if isinstance(entry, str):
            parent, _, package = entry.rpartition(".")[0].rpartition(".")
            if parent == __name__ and package in CATEGORY_PACKAGES:
                return package
        return self.get(slug).category


def _defined_in(module: str, slug: str) -> Benchmark:
    benchmark = getattr(importlib.import_module(module), "BENCHMARK", None)
    if not isinstance(benchmark, Benchmark) or benchmark.slug != slug:
        raise ValueError(f"{module} must define BENCHMARK, a Benchmark whose slug is its module's name {slug!r}")
    return benchmark


def build_registry(hook: pluggy.HookRelay | None = None) -> Registry:
    """The built-in benchmarks (their modules imported when first asked for), plus those other plugins register
    through ``hook`` (a pytest hook relay)."""
    registry = Registry()
    for module in builtin_modules():
        registry.register_module(module)
    if hook is not None:
        hook.pytest_medhelm_register_benchmarks(registry=registry)
    return registry
