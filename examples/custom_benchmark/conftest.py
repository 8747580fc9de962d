"""A benchmark of your own, next to MedHELM's: a CSV of yes/no questions about your clinic's notes.

Run it:  pytest examples/custom_benchmark --medhelm-model local/smollm2 --medhelm-data-dir examples/custom_benchmark/data
"""

import csv

from pytest_medhelm.catalogue.definition import Benchmark, Instance
from pytest_medhelm.data.readers import read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt


def build_instances(files):
    """One instance per row of triage.csv (columns id, note, question, answer with answer yes or no)."""
    rows = read_csv_rows(files["triage.csv"], ["id", "note", "question", "answer"])
    return [Instance(id=row["id"], input=f"{row['note']}\n\nQuestion: {row['question']}\n",
                     choices=("yes", "no"), correct=("yes", "no").index(row["answer"]), references=(row["answer"],))
            for row in rows]


TRIAGE = Benchmark(
    slug="clinic_triage",
    name="Clinic triage (example)",
    category="administration_workflow",
    subcategory="Organizing Workflow Processes",
    access="private",
    kind="closed",
    files=(DataFile("triage.csv", description="columns id, note, question, answer (yes or no)"),),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(instructions="Answer A for yes, B for no.", input_noun="Note"),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
)


def pytest_medhelm_register_benchmarks(registry):
    registry.register(TRIAGE)
