"""A benchmark's place in the taxonomy is written once: its subcategory, which says its category. A category given
as well must be the subcategory's; a subcategory outside the taxonomy needs its category."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pytester_runs import run
from toy_benchmark import TOY_CONFTEST, TOY_TEST

from pytest_medhelm.catalogue import CATEGORY_PACKAGES, builtin_benchmarks
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.taxonomy import CATEGORIES
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt

CATALOGUE = Path(__file__).resolve().parents[2] / "pytest_medhelm" / "catalogue"


def place(subcategory: str, **category: str) -> Benchmark:
    return Benchmark(slug="b", name="B", subcategory=subcategory, access="public", kind="closed", files=(),
                     build_instances=list, prompt=MultipleChoicePrompt(), metric=MULTIPLE_CHOICE_EXACT_MATCH,
                     max_tokens=1, **category)


def test_the_subcategory_says_the_category():
    bench = place("Managing Research Enrollment")
    assert (bench.category, bench.subcategory) == ("medical_research", "Managing Research Enrollment")
    # spelled loosely, it is kept as the taxonomy spells it (the listing, the tree and the reports show that)
    assert place("patient provider messaging").subcategory == "Patient-Provider Messaging"
    assert place("patient provider messaging").category == "patient_communication"


def test_a_category_given_too_must_be_the_subcategorys():
    assert place("Planning Treatments", category="CDS").category == "clinical_decision_support"
    with pytest.raises(ValueError) as error:
        place("Planning Treatments", category="medical_research")
    assert str(error.value) == ("benchmark 'b': subcategory 'Planning Treatments' belongs to "
                                "clinical_decision_support, not to medical_research; omit category= (the "
                                "subcategory says it)")


def test_a_subcategory_outside_the_taxonomy_needs_its_category():
    with pytest.raises(ValueError, match=r"^benchmark 'b': subcategory 'Cardiology' is not a MedHELM subcategory, "
                                         r"so it says no category: give category=, or one of: Supporting "
                                         r"Diagnostic Decisions, Planning Treatments, "):
        place("Cardiology")
    # a plugin's own subcategory, with its category: accepted as it is ("outside the taxonomy" in the tree)
    assert (place("Cardiology", category="clinical_decision_support").subcategory, ) == ("Cardiology", )


def test_a_plugins_benchmark_in_the_wrong_category_is_a_usage_error_naming_it(pytester, server):
    pytester.makeconftest(TOY_CONFTEST.replace('category="medical_research"', 'category="patient_communication"'))
    pytester.makepyfile(test_toy=TOY_TEST)
    result = run(pytester, "--medhelm-model", "openai/m", "--medhelm-api-base", server.url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*benchmark 'toy': subcategory 'Conducting Literature Research' belongs to "
                                 "medical_research, not to patient_communication*"])
    assert server.count == 0


def test_built_in_definitions_write_their_place_once():
    """No built-in definition names its category: its subcategory says it, its folder is checked against it
    (tests/catalogue/test_suite_modules.py)."""
    writers = []
    for path in sorted(set(CATALOGUE.rglob("*.py")) - {CATALOGUE / "taxonomy.py"}):  # (where categories are made)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(keyword.arg == "category" for keyword in node.keywords):
                writers.append(f"{path.relative_to(CATALOGUE)}:{node.lineno}")
    assert writers == []
    assert {bench.category for bench in builtin_benchmarks()} == {category.slug for category in CATEGORIES}
    assert CATEGORY_PACKAGES == tuple(category.slug for category in CATEGORIES)
