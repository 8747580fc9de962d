"""The benchmark catalogue: one module per benchmark, grouped by category, and the registry that finds them.

Built-in definitions live in ``pytest_medhelm/catalogue/<category>/<slug>.py`` and each exposes ``BENCHMARK``.
Other plugins add benchmarks through the ``pytest_medhelm_register_benchmarks`` hook.
"""

from __future__ import annotations

import importlib

from pytest_medhelm.catalogue.definition import Benchmark, Instance

__all__ = ["Benchmark", "Instance", "BUILTIN_MODULES", "Registry", "builtin_benchmarks"]

#: ``<category package>.<module>`` of every built-in benchmark, in the order of taxonomy.md's table
BUILTIN_MODULES: tuple[str, ...] = (
    "clinical_decision_support.medcalc_bench",
    "clinical_decision_support.medec",
    "clinical_decision_support.headqa",
    "clinical_decision_support.medbullets",
    "medical_research.pubmedqa",
)


def builtin_benchmarks() -> list[Benchmark]:
    return [importlib.import_module(f"{__name__}.{mod}").BENCHMARK for mod in BUILTIN_MODULES]


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
