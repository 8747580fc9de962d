"""The registry of benchmarks (pytest_medhelm/catalogue/__init__.py): a built-in benchmark's module is imported when
the benchmark is first asked for, so that a process imports only the definitions it runs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from pytest_medhelm.catalogue import Registry, build_registry, builtin_benchmarks, builtin_modules

#: a definition module: HeadQA's definition under another slug
DEFINITION = """
import dataclasses

from pytest_medhelm.catalogue.clinical_decision_support.headqa import BENCHMARK as HEADQA

BENCHMARK = dataclasses.replace(HEADQA, slug={slug!r})
"""


def test_a_module_is_registered_by_name_and_imported_only_when_its_benchmark_is_asked_for():
    registry = Registry()
    registry.register_module("no_such_package.clinical_decision_support.ghost")
    # known, counted, placed in its category: all without importing anything
    assert "ghost" in registry and registry.slugs() == ["ghost"] and len(registry) == 1
    assert registry.category_of("ghost") == "clinical_decision_support"
    assert "no_such_package" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="no_such_package"):
        registry.get("ghost")


def test_a_module_defining_another_slug_or_none_is_refused_naming_it(tmp_path: Path, monkeypatch):
    (tmp_path / "elsewhere.py").write_text(DEFINITION.format(slug="not_elsewhere"))
    (tmp_path / "empty.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry()
    registry.register_module("elsewhere")
    registry.register_module("empty")
    for slug in ("elsewhere", "empty"):
        with pytest.raises(ValueError, match=rf"^{slug} must define BENCHMARK, .* name '{slug}'"):
            registry.get(slug)


def test_the_order_of_registration_holds_through_loading_and_replacing(tmp_path: Path, monkeypatch):
    (tmp_path / "first.py").write_text(DEFINITION.format(slug="first"))
    (tmp_path / "second.py").write_text(DEFINITION.format(slug="second"))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry()
    registry.register_module("first")
    registry.register_module("second")
    second = registry.get("second")  # (loaded out of order)
    with pytest.raises(ValueError, match="'first' is registered twice"):
        registry.register(dataclasses.replace(second, slug="first"))
    with pytest.raises(ValueError, match="'second' is registered twice"):
        registry.register_module("elsewhere.second")
    replacement = dataclasses.replace(second, slug="first", name="a plugin's first")
    registry.register(replacement, replace=True)  # (a plugin overriding a built-in: in the built-in's place)
    assert [bench.slug for bench in registry] == ["first", "second"]
    assert registry.get("first") is replacement


def test_the_built_in_registry_holds_every_definition_in_its_category():
    registry = build_registry()
    slugs = [module.rpartition(".")[2] for module in builtin_modules()]
    assert registry.slugs() == slugs
    categories = [registry.category_of(slug) for slug in slugs]  # (read from the modules' packages)
    assert [bench.slug for bench in registry] == slugs == [bench.slug for bench in builtin_benchmarks()]
    assert categories == [registry.category_of(slug) for slug in slugs] == [b.category for b in registry]
