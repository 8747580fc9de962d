"""catalogue/taxonomy.py: MedHELM's task taxonomy as data (categories > subcategories > tasks) and its docs page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from catalogue_helpers import EXPECTED_TASKS

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.catalogue.taxonomy import (
    BENCHMARK_PLACES,
    CATEGORIES,
    CATEGORY_BY_SLUG,
    PAPER_TASK_COUNT,
    SUBCATEGORIES,
    SUBCATEGORY_BY_SLUG,
    category_named,
    render_markdown,
    subcategories_of,
    subcategory_named,
    task_count,
    taxonomy_order,
)

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "taxonomy.md"


def test_five_categories_twenty_two_subcategories() -> None:
    assert len(CATEGORIES) == 5 and len(SUBCATEGORIES) == 22
    assert [len(subcategories_of(c.slug)) for c in CATEGORIES] == [4, 4, 5, 5, 4]
    assert len(SUBCATEGORY_BY_SLUG) == 22 and len({s.name for s in SUBCATEGORIES}) == 22
    for sub in SUBCATEGORIES:
        assert sub.category in CATEGORY_BY_SLUG
        assert sub.tasks and sub.condensed
        assert sub.condensed == tuple(line for line, _ in sub.expansion)
        assert sub.tasks == tuple(task for _, tasks in sub.expansion for task in tasks)
        assert len(set(sub.tasks)) == len(sub.tasks), sub.name


def test_task_count() -> None:
    assert task_count() == EXPECTED_TASKS == sum(len(s.tasks) for s in SUBCATEGORIES)
    assert PAPER_TASK_COUNT == 121
    by_category = {c.slug: sum(len(s.tasks) for s in subcategories_of(c.slug)) for c in CATEGORIES}
    assert sum(by_category.values()) == task_count()


def test_comma_lists_are_expanded() -> None:
    visits = subcategory_named("Documenting Patient Visits")
    line = "generate progress, consultation, ED, admission, and discharge notes"
    assert line in visits.condensed
    assert dict(visits.expansion)[line] == ("Generate progress notes", "Generate consultation notes",
                                            "Generate ED notes", "Generate admission notes",
                                            "Generate discharge notes")
    procedures = subcategory_named("Recording Procedures")
    assert len(procedures.tasks) == 3
    # a parenthesised example is not a task, an unspaced slash joins facets of one task
    diagnostic = subcategory_named("Supporting Diagnostic Decisions")
    assert "Interpret diagnostic tests (ECG, spirometry)" in diagnostic.tasks
    assert "Recognize disease patterns from symptoms/vitals" in diagnostic.tasks


def _reference_lines() -> dict[str, tuple[str, ...]]:
    """taxonomy.md's subcategory bullets: name → its clauses (the condensed lines)."""
    text = REFERENCE.read_text(encoding="utf-8")
    lines: dict[str, tuple[str, ...]] = {}
    for match in re.finditer(r"^- \*\*(.+?)\*\*: (.+?)(?=^- |^## |^\Z|\n\n)", text, flags=re.M | re.S):
        body = " ".join(match.group(2).split()).rstrip(".")
        lines[match.group(1)] = tuple(part.strip() for part in body.split(";"))
    return lines


def test_condensed_lines_are_the_reference_wording() -> None:
    if not REFERENCE.is_file():
        pytest.skip("../shared/reference/taxonomy.md is absent")
    reference = _reference_lines()
    assert set(reference) == {s.name for s in SUBCATEGORIES}
    for sub in SUBCATEGORIES:
        assert sub.condensed == reference[sub.name], sub.name


def test_subcategory_named() -> None:
    messaging = SUBCATEGORY_BY_SLUG["patient_provider_messaging"]
    for name in ("Patient-Provider Messaging", "patient provider messaging", "patient_provider_messaging",
                 "  PATIENT-PROVIDER MESSAGING "):
        assert subcategory_named(name) is messaging
    assert messaging.category == "patient_communication"
    assert subcategory_named("Planning Treatments").category == "clinical_decision_support"
    assert subcategory_named("Patient Messaging") is None
    assert subcategory_named("") is None
    # the categories' API is unchanged
    assert category_named("CDS") is CATEGORY_BY_SLUG["clinical_decision_support"]
    assert category_named("clinical decision support").code == "CDS"


def test_taxonomy_order() -> None:
    assert taxonomy_order("clinical_decision_support", "Supporting Diagnostic Decisions") == (0, 0)
    assert taxonomy_order("administration_workflow", "Care Coordination and Planning") == (4, 21)
    assert taxonomy_order("medical_research", "Care Coordination and Planning")[1] == 22  # wrong category
    assert taxonomy_order("nonsense", "whatever") == (5, 22)


def test_every_registered_benchmark_is_in_the_taxonomy() -> None:
    """Each built-in benchmark names a category and a subcategory of the taxonomy, spelled exactly as in
    taxonomy.md, the subcategory inside that category; those of taxonomy.md's table sit where the table puts them."""
    problems = []
    for bench in builtin_benchmarks():
        sub = subcategory_named(bench.subcategory)
        if bench.category not in CATEGORY_BY_SLUG:
            problems.append(f"{bench.slug}: unknown category {bench.category!r}")
        elif sub is None or sub.name != bench.subcategory:
            problems.append(f"{bench.slug}: subcategory {bench.subcategory!r} is not spelled as in taxonomy.md"
                            + (f" ({sub.name!r})" if sub else ""))
        elif sub.category != bench.category:
            problems.append(f"{bench.slug}: {bench.subcategory!r} belongs to {sub.category}, not {bench.category}")
        elif bench.slug in BENCHMARK_PLACES and BENCHMARK_PLACES[bench.slug] != (bench.category, bench.subcategory):
            problems.append(f"{bench.slug}: taxonomy.md puts it in {BENCHMARK_PLACES[bench.slug]}")
    assert not problems, "\n".join(problems)


def test_benchmark_places_cover_the_37_benchmarks() -> None:
    assert len(BENCHMARK_PLACES) == 37
    for slug, (category, subcategory) in BENCHMARK_PLACES.items():
        sub = subcategory_named(subcategory)
        assert sub is not None and sub.name == subcategory and sub.category == category, slug
    # every subcategory but a few has a benchmark; the paper's map leaves none outside the taxonomy
    used = {sub for _, sub in BENCHMARK_PLACES.values()}
    assert used <= {s.name for s in SUBCATEGORIES}


def test_docs_taxonomy_is_up_to_date() -> None:
    doc = (ROOT / "docs" / "taxonomy.md").read_text(encoding="utf-8")
    assert render_markdown() in doc, "regenerate the generated section of docs/taxonomy.md (render_markdown())"
    assert f"**{task_count()} tasks**" in doc
