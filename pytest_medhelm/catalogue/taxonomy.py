"""MedHELM's task taxonomy as data: 5 categories > 22 subcategories > tasks (reference/taxonomy.md, paper App. A).

The paper prints its tasks in condensed lines ("generate progress, consultation, ED, admission, and discharge notes"
stands for five tasks). Each :class:`Subcategory` keeps those lines word for word (``condensed``) and the single
tasks they expand to (``tasks``), line by line (``expansion``). The expansion rules (docs/taxonomy.md):

1. A condensed line is one clause of taxonomy.md, the text between two semicolons, kept verbatim.
2. A list of objects sharing a verb (commas, a final "and"/"or", or just "X and Y" / "X or Y") is one task per
   object, the verb and any shared head noun distributed: "generate OR, bedside, specialized procedure notes" →
   "Generate OR procedure notes", "Generate bedside procedure notes", "Generate specialized procedure notes".
3. A list of verb phrases (commas, or two verbs sharing an object: "screen and match patients") is one task per
   verb phrase; an object without its own verb takes the line's verb ("send reminders, preventive care" → "Send
   reminders", "Send preventive care reminders").
4. A slash without spaces names one task's facets ("symptoms/vitals", "generate/document billing", "revenue/costs"):
   one task. A slash with spaces between two verb phrases ("match protocols / screen contraindications"): two.
5. Examples in parentheses ("interpret diagnostic tests (ECG, spirometry)") are not tasks of their own.

This gives :func:`task_count` tasks against the paper's 121 (its condensed lines do not list all of them).
This module imports nothing heavy: the plugin loads it at configuration time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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

#: the number of tasks the paper states (its condensed lines spell out fewer; see :func:`task_count`)
PAPER_TASK_COUNT = 121


def category_named(name: str) -> Category | None:
    """A category by slug, display name or code, case-insensitively ("clinical decision support" works too)."""
    key = name.strip().lower().replace("-", "_")
    for cat in CATEGORIES:
        if key in (cat.slug, cat.name.lower(), cat.name.lower().replace(" ", "_"), cat.code.lower()):
            return cat
    return None


def gate_target(name: str, benchmarks: Iterable[str]) -> str | None:
    """What a gate's NAME designates: ``"overall"``, a benchmark slug (as given), or a category's slug; None when it
    is none of these. The one resolver of threshold and compare-fail names."""
    if name.strip().lower() == "overall":
        return "overall"
    if name in set(benchmarks):
        return name
    category = category_named(name)
    return category.slug if category is not None else None


@dataclass(frozen=True)
class Subcategory:
    slug: str  # snake_case of the name ("patient_provider_messaging")
    name: str  # as in the paper and in Benchmark.subcategory ("Patient-Provider Messaging")
    category: str  # a category slug
    #: the single tasks, in the paper's order
    tasks: tuple[str, ...]
    #: the paper's condensed lines, word for word (one per clause of taxonomy.md)
    condensed: tuple[str, ...]
    #: each condensed line with the tasks it expands to
    expansion: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _sub(category: str, name: str, *lines: tuple[str, tuple[str, ...]]) -> Subcategory:
    return Subcategory(
        slug=_slug(name),
        name=name,
        category=category,
        tasks=tuple(task for _, tasks in lines for task in tasks),
        condensed=tuple(line for line, _ in lines),
        expansion=tuple(lines),
    )


_CDS, _CNG, _PCE, _MRA, _AW = (c.slug for c in CATEGORIES)

SUBCATEGORIES: tuple[Subcategory, ...] = (
    # ---------------------------------------------------------------- 1. Clinical Decision Support
    _sub(_CDS, "Supporting Diagnostic Decisions",
         ("recognize disease patterns from symptoms/vitals", ("Recognize disease patterns from symptoms/vitals",)),
         ("interpret diagnostic tests (ECG, spirometry)", ("Interpret diagnostic tests (ECG, spirometry)",)),
         ("generate follow-up questions", ("Generate follow-up questions",)),
         ("generate differential diagnoses", ("Generate differential diagnoses",)),
         ("interpret lab results", ("Interpret lab results",)),
         ("detect image findings", ("Detect image findings",)),
         ("perform medical calculations", ("Perform medical calculations",)),
         ("evaluate social determinants of health", ("Evaluate social determinants of health",)),
         ("track lab trends", ("Track lab trends",)),
         ("process intake information", ("Process intake information",))),
    _sub(_CDS, "Planning Treatments",
         ("check drug interactions", ("Check drug interactions",)),
         ("match protocols / screen contraindications", ("Match protocols", "Screen contraindications")),
         ("suggest clinical pathways", ("Suggest clinical pathways",)),
         ("predict treatment response", ("Predict treatment response",)),
         ("make collaborative decisions", ("Make collaborative decisions",)),
         ("evaluate treatment accessibility", ("Evaluate treatment accessibility",))),
    _sub(_CDS, "Predicting Patient Risks and Outcomes",
         ("predict deterioration, readmission, disease progression",
          ("Predict deterioration", "Predict readmission", "Predict disease progression")),
         ("predict outcomes, adverse events, discharge readiness",
          ("Predict outcomes", "Predict adverse events", "Predict discharge readiness")),
         ("predict need for procedures or referrals",
          ("Predict need for procedures", "Predict need for referrals")),
         ("manage preventive screening", ("Manage preventive screening",))),
    _sub(_CDS, "Providing Clinical Knowledge Support",
         ("apply guidelines and best practices", ("Apply guidelines", "Apply best practices")),
         ("answer medical knowledge questions", ("Answer medical knowledge questions",)),
         ("track protocol compliance", ("Track protocol compliance",)),
         ("assess care quality", ("Assess care quality",))),
    # ---------------------------------------------------------------- 2. Clinical Note Generation
    _sub(_CNG, "Documenting Patient Visits",
         ("generate progress, consultation, ED, admission, and discharge notes",
          ("Generate progress notes", "Generate consultation notes", "Generate ED notes",
           "Generate admission notes", "Generate discharge notes")),
         ("synthesize external/internal records", ("Synthesize external/internal records",)),
         ("summarize clinical documents", ("Summarize clinical documents",)),
         ("generate team assessments", ("Generate team assessments",))),
    _sub(_CNG, "Recording Procedures",
         ("generate OR, bedside, specialized procedure notes",
          ("Generate OR procedure notes", "Generate bedside procedure notes",
           "Generate specialized procedure notes"))),
    _sub(_CNG, "Documenting Diagnostic Reports",
         ("generate imaging, pathology, test, and genomic reports",
          ("Generate imaging reports", "Generate pathology reports", "Generate test reports",
           "Generate genomic reports"))),
    _sub(_CNG, "Documenting Care Plans",
         ("document treatment plans, care protocols, nursing plans, advance planning",
          ("Document treatment plans", "Document care protocols", "Document nursing plans",
           "Document advance planning"))),
    # ---------------------------------------------------------------- 3. Patient Communication and Education
    _sub(_PCE, "Providing Patient Education Resources",
         ("simplify disease info, risk factors, treatment",
          ("Simplify disease info", "Simplify risk factors", "Simplify treatment")),
         ("explain insurance and billing", ("Explain insurance", "Explain billing"))),
    _sub(_PCE, "Delivering Personalized Care Instructions",
         ("generate medication, procedure, and home care instructions",
          ("Generate medication instructions", "Generate procedure instructions",
           "Generate home care instructions")),
         ("explain follow-up and recovery", ("Explain follow-up", "Explain recovery"))),
    _sub(_PCE, "Patient-Provider Messaging",
         ("triage messages, analyze symptoms", ("Triage messages", "Analyze symptoms")),
         ("handle refills, appointments, questions",
          ("Handle refills", "Handle appointments", "Handle questions")),
         ("share results, draft responses", ("Share results", "Draft responses"))),
    _sub(_PCE, "Enhancing Patient Understanding and Accessibility",
         ("generate visual aids, translate content, make content accessible",
          ("Generate visual aids", "Translate content", "Make content accessible"))),
    _sub(_PCE, "Facilitating Patient Engagement and Support",
         ("send reminders, preventive care, track goals",
          ("Send reminders", "Send preventive care reminders", "Track goals")),
         ("collect feedback, support counseling and groups",
          ("Collect feedback", "Support counseling", "Support patient groups"))),
    # ---------------------------------------------------------------- 4. Medical Research Assistance
    _sub(_MRA, "Conducting Literature Research",
         ("screen reviews, summarize papers", ("Screen reviews", "Summarize papers")),
         ("analyze citations, synthesize evidence, identify gaps",
          ("Analyze citations", "Synthesize evidence", "Identify gaps"))),
    _sub(_MRA, "Analyzing Clinical Research Data",
         ("analyze trials, compare treatments, assess outcomes",
          ("Analyze trials", "Compare treatments", "Assess outcomes")),
         ("conduct cohort studies", ("Conduct cohort studies",))),
    _sub(_MRA, "Recording Research Processes",
         ("support protocols, grants, manuscripts, statistics",
          ("Support protocols", "Support grants", "Support manuscripts", "Support statistics"))),
    _sub(_MRA, "Ensuring Clinical Research Quality",
         ("validate methods, assess bias, handle regulatory needs",
          ("Validate methods", "Assess bias", "Handle regulatory needs"))),
    _sub(_MRA, "Managing Research Enrollment",
         ("screen and match patients, track and document recruitment",
          ("Screen patients", "Match patients", "Track recruitment", "Document recruitment"))),
    # ---------------------------------------------------------------- 5. Administration and Workflow
    _sub(_AW, "Scheduling Resources and Staff",
         ("schedule staff, manage inventory, equipment, and facilities",
          ("Schedule staff", "Manage inventory", "Manage equipment", "Manage facilities")),
         ("monitor institutional metrics", ("Monitor institutional metrics",))),
    _sub(_AW, "Overseeing Financial Activities",
         ("generate/document billing, insurer communication",
          ("Generate/document billing", "Generate/document insurer communication")),
         ("analyze revenue/costs, estimate out-of-pocket costs",
          ("Analyze revenue/costs", "Estimate out-of-pocket costs"))),
    _sub(_AW, "Organizing Workflow Processes",
         ("schedule appointments, process referrals/documents",
          ("Schedule appointments", "Process referrals/documents")),
         ("handle information requests", ("Handle information requests",))),
    _sub(_AW, "Care Coordination and Planning",
         ("evaluate admissions, coordinate providers", ("Evaluate admissions", "Coordinate providers")),
         ("manage post-discharge planning and transitions",
          ("Manage post-discharge planning", "Manage post-discharge transitions"))),
)

SUBCATEGORY_BY_SLUG = {s.slug: s for s in SUBCATEGORIES}

#: where taxonomy.md's benchmark table puts each of the 37 benchmarks: slug → (category slug, subcategory name)
BENCHMARK_PLACES: dict[str, tuple[str, str]] = {
    "medcalc_bench": (_CDS, "Supporting Diagnostic Decisions"),
    "clear": (_CDS, "Supporting Diagnostic Decisions"),
    "mtsamples": (_CDS, "Planning Treatments"),
    "medec": (_CDS, "Planning Treatments"),
    "ehrshot": (_CDS, "Predicting Patient Risks and Outcomes"),
    "headqa": (_CDS, "Providing Clinical Knowledge Support"),
    "medbullets": (_CDS, "Providing Clinical Knowledge Support"),
    "medqa": (_CDS, "Providing Clinical Knowledge Support"),
    "medmcqa": (_CDS, "Providing Clinical Knowledge Support"),
    "medalign": (_CDS, "Providing Clinical Knowledge Support"),
    "adhd_behavior": (_CDS, "Providing Clinical Knowledge Support"),
    "adhd_medeffects": (_CDS, "Providing Clinical Knowledge Support"),
    "dischargeme": (_CNG, "Documenting Patient Visits"),
    "aci_bench": (_CNG, "Documenting Patient Visits"),
    "mtsamples_procedures": (_CNG, "Recording Procedures"),
    "mimic_rrs": (_CNG, "Documenting Diagnostic Reports"),
    "mimic_bhc": (_CNG, "Documenting Patient Visits"),
    "noteextract": (_CNG, "Documenting Care Plans"),
    "medicationqa": (_PCE, "Providing Patient Education Resources"),
    "patientinstruct": (_PCE, "Delivering Personalized Care Instructions"),
    "meddialog": (_PCE, "Patient-Provider Messaging"),
    "medconfinfo": (_PCE, "Patient-Provider Messaging"),
    "mediqa": (_PCE, "Enhancing Patient Understanding and Accessibility"),
    "mentalhealth": (_PCE, "Facilitating Patient Engagement and Support"),
    "privacydetection": (_PCE, "Patient-Provider Messaging"),
    "proxysender": (_PCE, "Patient-Provider Messaging"),
    "pubmedqa": (_MRA, "Conducting Literature Research"),
    "ehrsql": (_MRA, "Analyzing Clinical Research Data"),
    "bmt_status": (_MRA, "Recording Research Processes"),
    "racebias": (_MRA, "Ensuring Clinical Research Quality"),
    "n2c2_ct": (_MRA, "Managing Research Enrollment"),
    "medhallu": (_MRA, "Ensuring Clinical Research Quality"),
    "hospicereferral": (_AW, "Scheduling Resources and Staff"),
    "mimic_billing": (_AW, "Overseeing Financial Activities"),
    "clinicreferral": (_AW, "Organizing Workflow Processes"),
    "cdi_qa": (_AW, "Care Coordination and Planning"),
    "ent_referral": (_AW, "Care Coordination and Planning"),
}


def subcategory_named(name: str) -> Subcategory | None:
    """A subcategory by name or slug, case-insensitively; spaces, hyphens and underscores are alike
    ("Patient-Provider Messaging", "patient provider messaging" and "patient_provider_messaging" all work)."""
    return SUBCATEGORY_BY_SLUG.get(_slug(name))


def subcategories_of(category: str) -> tuple[Subcategory, ...]:
    """The subcategories of a category (slug, name or code), in the paper's order; () for an unknown category."""
    cat = category_named(category)
    return tuple(s for s in SUBCATEGORIES if cat is not None and s.category == cat.slug)


def task_count() -> int:
    """The number of single tasks the condensed lines expand to (the paper states 121)."""
    return sum(len(s.tasks) for s in SUBCATEGORIES)


def taxonomy_order(category: str, subcategory: str) -> tuple[int, int]:
    """Sort key of a (category slug, subcategory name) pair: the paper's order; unknown ones come last."""
    cat_index = next((i for i, c in enumerate(CATEGORIES) if c.slug == category), len(CATEGORIES))
    sub = subcategory_named(subcategory)
    sub_index = SUBCATEGORIES.index(sub) if sub is not None and sub.category == category else len(SUBCATEGORIES)
    return cat_index, sub_index


def render_markdown() -> str:
    """The taxonomy as Markdown: every subcategory with its condensed lines and the tasks each expands to
    (the generated part of docs/taxonomy.md)."""
    lines: list[str] = []
    for number, cat in enumerate(CATEGORIES, start=1):
        subs = subcategories_of(cat.slug)
        n_tasks = sum(len(s.tasks) for s in subs)
        lines += [f"### {number}. {cat.name} (`{cat.slug}`, {cat.code}): {n_tasks} tasks", ""]
        for sub in subs:
            lines += [f"#### {sub.name} (`{sub.slug}`): {len(sub.tasks)} tasks", "",
                      "| condensed line (paper) | tasks |", "|---|---|"]
            for line, tasks in sub.expansion:
                lines.append(f"| {line} | {'; '.join(tasks)} |")
            lines.append("")
    lines.append(f"**Total: {task_count()} tasks** in {len(SUBCATEGORIES)} subcategories "
                 f"(the paper states {PAPER_TASK_COUNT}).")
    return "\n".join(lines) + "\n"
