"""A built-in benchmark is two files: its definition, ``pytest_medhelm/catalogue/<category>/<slug>.py``, and its
suite module, ``benchmarks/<category>/test_<slug>.py`` (``test_<slug> = benchmark_test("<slug>")``). The fast tier
checks that the two sides match, naming what is missing or misplaced, and that a suite module made by
``benchmark_test`` runs its benchmark as a hand-written test does."""

from __future__ import annotations

import importlib
import json
import shutil
import types
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pytester_runs import INNER_RUN_FLAGS, SUITE, run

from pytest_medhelm.catalogue import builtin_benchmarks, builtin_modules
from pytest_medhelm.catalogue.definition import Benchmark

XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


@dataclass(frozen=True)
class SuiteTest:
    module: str  # the suite module, relative to the suite folder ("medical_research/test_pubmedqa.py")
    name: str  # the test function's name
    benchmark: str  # the slug its medhelm marker names


def collect_suite(pytester: pytest.Pytester, suite: Path) -> tuple[list[SuiteTest], dict[str, str]]:
    """What pytest collects from ``suite`` (no model: one item per test): its medhelm tests, and the modules that
    failed to collect with the last line of their error."""
    # (the items themselves are needed, for their markers: a collect-only run's text does not say them)
    items, recorder = pytester.inline_genitems(*INNER_RUN_FLAGS, "-p", "no:xdist", str(suite))
    tests = []
    for item in items:
        marker = item.get_closest_marker("medhelm")
        slug = (marker.kwargs.get("benchmark") or (marker.args[0] if marker.args else None)) if marker else None
        if slug is not None and isinstance(item, pytest.Function):
            tests.append(SuiteTest(item.path.relative_to(suite).as_posix(), item.originalname, slug))
    errors = {Path(str(report.fspath)).resolve().relative_to(suite.resolve()).as_posix():
              str(report.longrepr).strip().splitlines()[-1]
              for report in recorder.getreports("pytest_collectreport") if report.failed}
    return tests, errors


def suite_problems(suite: Path, benchmarks: Iterable[Benchmark], tests: list[SuiteTest],
                   errors: dict[str, str]) -> list[str]:
    """Each registered benchmark without its suite module (or with it elsewhere), each suite module that tests no
    registered benchmark: one line each, naming it and saying what is expected."""
    problems = []
    by_slug = {bench.slug: bench for bench in benchmarks}
    for slug, bench in by_slug.items():
        expected = f"{bench.category}/test_{slug}.py"
        found = sorted({test.module for test in tests if test.benchmark == slug})
        if not found:
            problems.append(f"benchmark {slug!r} is registered but no suite module tests it: add "
                            f"{suite.name}/{expected} holding test_{slug} = benchmark_test({slug!r})")
        elif found != [expected]:
            problems.append(f"benchmark {slug!r} is tested from {', '.join(found)}: its suite module is "
                            f"{suite.name}/{expected} (its category's folder, named for its slug)")
    for module in sorted(p.relative_to(suite).as_posix() for p in suite.rglob("test_*.py")):
        if module in errors:
            problems.append(f"suite module {suite.name}/{module} does not collect: {errors[module]}")
            continue
        slugs = sorted({test.benchmark for test in tests if test.module == module})
        unknown = [slug for slug in slugs if slug not in by_slug]
        if not slugs:
            problems.append(f"suite module {suite.name}/{module} tests no benchmark: remove it, or give it "
                            "test_<slug> = benchmark_test('<slug>') of a registered benchmark")
        elif unknown:
            problems.append(f"suite module {suite.name}/{module} tests {', '.join(map(repr, unknown))}, which no "
                            "registered benchmark is")
    return problems


def catalogue_problems(modules: Iterable[types.ModuleType]) -> list[str]:
    """Each module of a category package that defines no benchmark, or whose benchmark is another category's or
    named otherwise than the module."""
    problems = []
    for module in modules:
        package, name = module.__name__.split(".")[-2:]
        bench = getattr(module, "BENCHMARK", None)
        if not isinstance(bench, Benchmark):
            problems.append(f"catalogue module {module.__name__} defines no BENCHMARK (helpers shared by several "
                            "benchmarks belong in pytest_medhelm/catalogue/, beside the category packages)")
        elif (package, name) != (bench.category, bench.slug):
            problems.append(f"catalogue module {module.__name__} defines {bench.slug!r} of {bench.category}: its "
                            f"module is pytest_medhelm.catalogue.{bench.category}.{bench.slug}")
    return problems


# ------------------------------------------------------------------------------------------------ the real sides
def test_every_registered_benchmark_has_its_suite_module_and_every_suite_module_its_benchmark(pytester):
    tests, errors = collect_suite(pytester, SUITE)
    problems = suite_problems(SUITE, builtin_benchmarks(), tests, errors)
    assert not problems, "\n".join(problems)
    assert len(tests) == len(builtin_benchmarks())  # one test per benchmark, each named for it
    assert all(test.name == f"test_{test.benchmark}" for test in tests)


def test_every_catalogue_module_holds_the_benchmark_of_its_folder_and_name():
    problems = catalogue_problems(importlib.import_module(name) for name in builtin_modules())
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------ the checks bite
def test_a_missing_a_misplaced_and_an_orphan_suite_module_are_each_named(pytester):
    suite = pytester.path / "benchmarks"
    shutil.copytree(SUITE, suite, ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "medical_research" / "test_pubmedqa.py").unlink()
    (suite / "medical_research" / "test_medhallu.py").rename(suite / "patient_communication" / "test_medhallu.py")
    (suite / "medical_research" / "test_zz_new.py").write_text(
        'from pytest_medhelm import benchmark_test\n\ntest_zz_new = benchmark_test("zz_new")\n')
    (suite / "medical_research" / "test_nothing.py").write_text('"""A module left behind."""\n')

    tests, errors = collect_suite(pytester, suite)
    problems = suite_problems(suite, builtin_benchmarks(), tests, errors)
    assert problems == [
        "benchmark 'medhallu' is tested from patient_communication/test_medhallu.py: its suite module is "
        "benchmarks/medical_research/test_medhallu.py (its category's folder, named for its slug)",
        "benchmark 'pubmedqa' is registered but no suite module tests it: add "
        "benchmarks/medical_research/test_pubmedqa.py holding test_pubmedqa = benchmark_test('pubmedqa')",
        "suite module benchmarks/medical_research/test_nothing.py tests no benchmark: remove it, or give it "
        "test_<slug> = benchmark_test('<slug>') of a registered benchmark",
        "suite module benchmarks/medical_research/test_zz_new.py does not collect: "
        + errors["medical_research/test_zz_new.py"],
    ]
    assert "unknown benchmark 'zz_new'" in errors["medical_research/test_zz_new.py"]


def test_a_suite_module_of_a_benchmark_no_longer_registered_is_named(pytester):
    tests, errors = collect_suite(pytester, SUITE)
    registered = [bench for bench in builtin_benchmarks() if bench.slug != "ehrsql"]
    assert suite_problems(SUITE, registered, tests, errors) == [
        "suite module benchmarks/medical_research/test_ehrsql.py tests 'ehrsql', which no registered benchmark is"]


def test_a_catalogue_module_without_its_benchmark_or_in_another_folder_is_named():
    pubmedqa = importlib.import_module("pytest_medhelm.catalogue.medical_research.pubmedqa")
    helper = types.ModuleType("pytest_medhelm.catalogue.medical_research.shared_rows")
    elsewhere = types.ModuleType("pytest_medhelm.catalogue.patient_communication.pubmedqa")
    elsewhere.BENCHMARK = pubmedqa.BENCHMARK
    renamed = types.ModuleType("pytest_medhelm.catalogue.medical_research.pubmed")
    renamed.BENCHMARK = replace(pubmedqa.BENCHMARK)
    assert catalogue_problems([pubmedqa, helper, elsewhere, renamed]) == [
        "catalogue module pytest_medhelm.catalogue.medical_research.shared_rows defines no BENCHMARK (helpers "
        "shared by several benchmarks belong in pytest_medhelm/catalogue/, beside the category packages)",
        "catalogue module pytest_medhelm.catalogue.patient_communication.pubmedqa defines 'pubmedqa' of "
        "medical_research: its module is pytest_medhelm.catalogue.medical_research.pubmedqa",
        "catalogue module pytest_medhelm.catalogue.medical_research.pubmed defines 'pubmedqa' of "
        "medical_research: its module is pytest_medhelm.catalogue.medical_research.pubmedqa",
    ]


# ------------------------------------------------------------------------------------------------ benchmark_test
HAND_WRITTEN = '''
import pytest

from pytest_medhelm.assertions import assert_metric


@pytest.mark.medhelm(benchmark="pubmedqa")
def test_pubmedqa(medhelm_instance, medhelm_model):
    answer = medhelm_model.answer(medhelm_instance)
    assert_metric(answer, medhelm_instance)
'''


def pubmedqa_data(root: Path) -> Path:
    """Three synthetic PubMedQA rows (two "yes", one "no") in the upstream layout."""
    rows = {str(pmid): {"QUESTION": f"Does synthetic treatment {pmid} help?", "LABELS": ["BACKGROUND"],
                        "CONTEXTS": [f"Synthetic abstract {pmid}."], "final_decision": decision, "YEAR": "2020"}
            for pmid, decision in ((101, "yes"), (102, "no"), (103, "yes"))}
    (root / "pubmedqa").mkdir(parents=True)
    (root / "pubmedqa" / "ori_pqal.json").write_text(json.dumps(rows))
    return root


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_the_suite_module_runs_its_benchmark_as_the_hand_written_test_does(pytester, server, mode):
    """The shipped PubMedQA module and the same test written out by hand: the same items, outcomes, prompts and
    scores; the items' file and line are the suite module's."""
    data = pubmedqa_data(pytester.path / "data")
    shipped, hand = pytester.path / "shipped", pytester.path / "hand"
    shipped.mkdir()
    hand.mkdir()
    shutil.copy(SUITE / "medical_research" / "test_pubmedqa.py", shipped / "test_pubmedqa.py")
    (hand / "test_pubmedqa.py").write_text(HAND_WRITTEN)
    outcomes = {}
    for folder in (shipped, hand):
        out = pytester.path / f"{folder.name}.json"
        result = run(pytester, str(folder / "test_pubmedqa.py"), "--medhelm-model", "openai/m",
                     "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data), "--medhelm-cache", "off",
                     "--medhelm-json", str(out), "--medhelm-data-unverified", "pubmedqa", "-rA", *mode)
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["*2 passed, 1 missed*"])  # the server answers A ("yes")
        stdout = result.stdout.str()
        ids = sorted(line.split("::", 1)[1].split(" ")[0] for line in stdout.splitlines()
                     if line.startswith(("PASSED", "MISSED")) and "::" in line)
        results = json.loads(out.read_text())
        outcomes[folder.name] = (ids, [(i["instance_id"], i["prompt_sha256"], i["score"])
                                       for i in sorted(results["instances"], key=lambda i: i["instance_id"])],
                                 [(b["slug"], b["n"], b["mean"]) for b in results["benchmarks"]])
    assert outcomes["shipped"] == outcomes["hand"]
    assert outcomes["shipped"][0] == ["test_pubmedqa[m-101]", "test_pubmedqa[m-102]", "test_pubmedqa[m-103]"]
    assert server.count == 6


def test_a_suite_module_item_is_placed_in_the_suite_module(pytester):
    """pytest's file:line of a benchmark_test item (a skip reason's, JUnit XML's) is the line that binds it."""
    result = run(pytester, str(SUITE / "medical_research" / "test_pubmedqa.py"), "-rs")
    assert result.ret == 0
    line = next(n for n, text in enumerate((SUITE / "medical_research" / "test_pubmedqa.py").read_text().splitlines(),
                                           start=1) if text.startswith("test_pubmedqa = "))
    # ("[[]" is fnmatch's literal "[")
    result.stdout.fnmatch_lines([f"SKIPPED [[]1] *medical_research/test_pubmedqa.py:{line}: no model under test*"])
