"""MedCalc-Bench: compute a clinical score, lab value, dose or date from a patient note (HELM
``MedCalcBenchScenario``, ``medcalc_bench``).

HELM loads the v1.0 test split (1,047 rows) from Hugging Face; the same rows are ``dataset/test_data.csv`` at the
repository's ``version-1.0`` tag, pinned here. Instance ids are the ``Row Number`` column, as in HELM.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.medcalc import MEDCALC_ACCURACY
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance

SLUG = "medcalc_bench"
FILE = "test_data.csv"
COLUMNS = (
    "Row Number",
    "Calculator Name",
    "Category",
    "Patient Note",
    "Question",
    "Ground Truth Answer",
    "Lower Limit",
    "Upper Limit",
)


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    path = data_file(files, FILE)
    instances = []
    seen: set[str] = set()
    for row in read_csv_rows(path, COLUMNS):
        row_id = row["Row Number"].strip()
        if not row_id or row_id in seen:
            raise DataError(path, row.where, f"'Row Number' must be unique and non-empty, got {row_id!r}")
        seen.add(row_id)
        # HELM's PassageQuestionInput(passage=note + "\n", question=question + "\n", passage_prefix="Patient note: ")
        text = f"Patient note: {row['Patient Note']}\n\nQuestion: {row['Question']}\n"
        instances.append(
            Instance(
                id=row_id,
                input=text,
                references=(row["Ground Truth Answer"],),
                extra={
                    "category": row["Category"],
                    "lower_limit": row["Lower Limit"],
                    "upper_limit": row["Upper Limit"],
                    "calculator": row["Calculator Name"],
                },
                benchmark=SLUG,
            )
        )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MedCalc-Bench",
    subcategory="Supporting Diagnostic Decisions",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            url=(
                "https://raw.githubusercontent.com/ncbi-nlp/MedCalc-Bench/"
                "353ded7c61a32366fe0f4e4efccdf05ad15444e5/dataset/test_data.csv"
            ),
            sha256="c2d23097f8bdb7ae4a77dbf4a5a767335df7303998d7c7664a73a29fd8e2b31a",
            description="MedCalc-Bench v1.0 test set, 1,047 rows (CC-BY-SA 4.0)",
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Given a patient note and a clinical question, compute the requested medical value.",
        input_noun=None,
        output_noun="Answer only the requested quantity without units. No explanation needed",
    ),
    metric=MEDCALC_ACCURACY,
    max_tokens=10,
    description="Compute the requested medical value (score, lab value, dose, date) from a patient note.",
    example=(
        "Row Number,Calculator ID,Calculator Name,Category,Output Type,Note ID,Note Type,Patient "
        "Note,Question,Relevant Entities,Ground Truth Answer,Lower Limit,Upper Limit,Ground Truth Explanation / "
        "1,2,Body Mass Index (BMI),physical,decimal,synthetic-1,Synthetic,\"A synthetic 40-year-old, 170 cm, 70 "
        "kg.\",What is the patient's BMI in kg/m^2?,{},24.22,23.01,25.43,70 / 1.7^2 = 24.22"
    ),
    instance_count=1047,
)
