"""The registry of benchmarks (pytest_medhelm/catalogue/__init__.py): a built-in benchmark's module is imported when
the benchmark is first asked for, so that a process imports only the definitions it collects."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

import pytest_medhelm.catalogue as catalogue
from pytest_medhelm.catalogue import Registry, build_registry, builtin_benchmarks, builtin_modules

#: a definition module: HeadQA's definition under another slug
DEFINITION = """
import dataclasses

from pytest_medhelm.catalogue.clinical_decision_support.headqa import BENCHMARK as HEADQA

BENCHMARK = dataclasses.replace(HEADQA, slug={slug!r})
"""


@pytest.fixture
def modules(tmp_path: Path, monkeypatch):
    """Writes definition modules (name -> source) importable by name, and drops them from sys.modules after."""

    def write(**sources: str) -> None:
        for name, source in sources.items():
            (tmp_path / f"{name}.py").write_text(source)
            monkeypatch.delitem(sys.modules, name, raising=False)  # (put back as it was: absent)

    monkeypatch.syspath_prepend(str(tmp_path))
    return write


def test_the_built_ins_are_registered_without_importing_one_and_each_is_imported_when_asked_for(monkeypatch):
    count = len(builtin_modules())
    imported = []
    real_import = catalogue.importlib.import_module
    monkeypatch.setattr(catalogue.importlib, "import_module", lambda name: imported.append(name) or real_import(name))
    registry = build_registry()
    packages = [f"pytest_medhelm.catalogue.{package}" for package in catalogue.CATEGORY_PACKAGES]
    assert imported == packages  # (listed from the category packages: no definition read)
    assert len(registry) == count and "pubmedqa" in registry
    assert registry.category_of("pubmedqa") == "medical_research" and imported == packages
    assert registry.get("pubmedqa").slug == "pubmedqa"
    assert imported == [*packages, "pytest_medhelm.catalogue.medical_research.pubmedqa"]


def test_a_definition_is_imported_only_when_asked_for_and_a_missing_one_fails_then():
    registry = Registry()
    registry.register_module("pytest_medhelm.catalogue.clinical_decision_support.ghost")
    assert "ghost" in registry and registry.slugs() == ["ghost"] and len(registry) == 1
    assert registry.category_of("ghost") == "clinical_decision_support"  # (from the package: nothing imported)
    with pytest.raises(ModuleNotFoundError, match="ghost"):
        registry.get("ghost")


def test_outside_the_category_packages_the_category_is_the_definitions(modules):
    modules(medhelm_test_placed=DEFINITION.format(slug="medhelm_test_placed"))
    registry = Registry()
    registry.register_module("medhelm_test_placed")  # (not one of ours: its package says nothing)
    assert registry.category_of("medhelm_test_placed") == "clinical_decision_support"  # HeadQA's, read from it
    assert "medhelm_test_placed" in sys.modules


def test_a_module_defining_another_slug_or_none_is_refused_naming_it(modules):
    modules(medhelm_test_elsewhere=DEFINITION.format(slug="not_elsewhere"), medhelm_test_empty="")
    registry = Registry()
    for slug in ("medhelm_test_elsewhere", "medhelm_test_empty"):
        registry.register_module(slug)
        with pytest.raises(ValueError, match=rf"^{slug} must define BENCHMARK, .* name '{slug}'"):
            registry.get(slug)


def test_the_order_of_registration_holds_through_loading_and_replacing(modules):
    modules(medhelm_test_first=DEFINITION.format(slug="medhelm_test_first"),
            medhelm_test_second=DEFINITION.format(slug="medhelm_test_second"))
    registry = Registry()
    registry.register_module("medhelm_test_first")
    registry.register_module("medhelm_test_second")
    second = registry.get("medhelm_test_second")  # (loaded out of order)
    with pytest.raises(ValueError, match="'medhelm_test_first' is registered twice"):
        registry.register(dataclasses.replace(second, slug="medhelm_test_first"))
    with pytest.raises(ValueError, match="'medhelm_test_second' is registered twice"):
        registry.register_module("elsewhere.medhelm_test_second")
    replacement = dataclasses.replace(second, slug="medhelm_test_first", name="a plugin's first")
    registry.register(replacement, replace=True)  # (a plugin overriding a built-in: in the built-in's place)
    assert [bench.slug for bench in registry] == ["medhelm_test_first", "medhelm_test_second"]
    assert registry.get("medhelm_test_first") is replacement
    assert "medhelm_test_first" not in sys.modules  # (replaced before it was ever read)


def test_the_built_in_registry_holds_every_definition_in_its_category():
    registry = build_registry()
    slugs = [module.rpartition(".")[2] for module in builtin_modules()]
    from_packages = [registry.category_of(slug) for slug in slugs]  # (before any definition is read)
    assert [bench.slug for bench in registry] == slugs == [bench.slug for bench in builtin_benchmarks()]
    assert from_packages == [bench.category for bench in registry]


def test_collecting_the_suite_for_one_benchmark_reads_only_its_definition(pytester, monkeypatch):
    import pytester_runs

    read = []
    real = catalogue._defined_in
    monkeypatch.setattr(catalogue, "_defined_in", lambda module, slug: read.append(slug) or real(module, slug))
    result = pytester_runs.run(pytester, str(pytester_runs.SUITE), "-p", "no:xdist", "--collect-only", "-q",
                               "--medhelm-model", "openai/x", "--medhelm-benchmark", "pubmedqa",
                               "--medhelm-data-dir", str(pytester.path))
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([f"*{len(builtin_modules()) - 1} deselected*"])
    assert read == ["pubmedqa"]  # (the other suite modules' items deselected without their definitions)
