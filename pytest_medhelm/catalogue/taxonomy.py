"""MedHELM's five categories (taxonomy.md). Subcategories and tasks are added as data by the catalogue work."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    slug: str  # also the pytest marker name
    name: str  # display name, as in the paper
    code: str  # the paper's abbreviation


CATEGORIES: tuple[Category, ...] = (
    Category("clinical_decision_support", "Clinical Decision Support", "CDS"),
    Category("clinical_note_generation", "Clinical Note Generation", "CNG"),
    Category("patient_communication", "Patient Communication and Education", "PCE"),
    Category("medical_research", "Medical Research Assistance", "MRA"),
    Category("administration_workflow", "Administration and Workflow", "AW"),
)

CATEGORY_BY_SLUG = {c.slug: c for c in CATEGORIES}


def category_named(name: str) -> Category | None:
    """A category by slug, display name or code, case-insensitively ("clinical decision support" works too)."""
    key = name.strip().lower().replace("-", "_")
    for cat in CATEGORIES:
        if key in (cat.slug, cat.name.lower(), cat.name.lower().replace(" ", "_"), cat.code.lower()):
            return cat
    return None
