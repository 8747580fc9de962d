"""MIMIC-IV Billing Code: list the ICD-10 codes of a MIMIC-IV discharge summary (HELM
``MIMICIVBillingCodeScenario``, ``mimiciv_billing_code``; gated, PhysioNet MIMIC-IV).

**File**: one Feather table (HELM's ``…/mimiciv_billing_codes/mimiciv_icd10.feather``) built with
``JoakimEdin/medical-coding-reproducibility`` (the maintainers' answer in HELM issues #3564 / #3689), with the
columns ``text`` (the discharge summary) and ``target`` (the list of ICD-10 codes). Reading it needs pyarrow (the
optional extra ``data``); without it the benchmark is skipped with the command to run.

**Instances**: every row, in file order (HELM's leaderboard samples 1,000 of them at random with seed 0, which the
plugin's HELM-compatible sample reproduces: it is *not* "the first 1,000", issue #3689). Input = ``text``;
reference = the codes joined by ``,`` (a list or array of codes; a single value is taken as one code, as HELM
does). A row whose ``text`` is missing is a :class:`DataError` naming the row. Ids: the ``note_id`` column when
there is one, else ``_id``, else ``row<N>``.

Prompt: ``Given the following clinical note, identify all relevant ICD-10 codes.⏎⏎Note:⏎{text}⏎Predicted ICD-10
Codes:``; 256 tokens. Metric: micro F1 over extracted ICD-10 codes (:mod:`pytest_medhelm.metrics.icd10`, which
lists the codes HELM's regex misreads and fixes them unless ``--medhelm-compat helm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import import_pyarrow, safe_id, unique_id
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.icd10 import MIMIC_BILLING_CODE_F1
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mimic_billing"
FILE = "mimiciv_icd10.feather"
ID_COLUMNS = ("note_id", "_id")


def _codes(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(code) for code in value]
    return [str(value)]


def read_feather(path: Path) -> Any:
    pa = import_pyarrow(path)
    import pyarrow.feather as feather

    try:
        return feather.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, "", f"not a readable Feather file ({exc}); is it truncated?") from None


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    table = read_feather(path)
    missing = [c for c in ("text", "target") if c not in table.column_names]
    if missing:
        raise DataError(
            path, "schema",
            f"missing column(s) {', '.join(map(repr, missing))}; found columns "
            f"{', '.join(map(repr, table.column_names))}",
        )
    texts = table.column("text").to_pylist()
    targets = table.column("target").to_pylist()
    id_column = next((c for c in ID_COLUMNS if c in table.column_names), None)
    ids = table.column(id_column).to_pylist() if id_column else [None] * len(texts)
    if not texts:
        raise DataError(path, "", "no rows")
    loaded = Loaded(slug=SLUG)
    seen: set[str] = set()
    for number, (text, target, raw_id) in enumerate(zip(texts, targets, ids), start=1):
        if not isinstance(text, str):
            raise DataError(path, f"row {number}", f"'text' must be the note text, got {type(text).__name__}")
        codes = _codes(target) if target is not None else ["None"]
        base = safe_id(raw_id) if raw_id is not None else f"row{number}"
        loaded.append(
            Instance(
                id=unique_id(base, seen),
                input=text,
                references=(",".join(codes),),
                benchmark=SLUG,
            )
        )
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MIMIC-IV Billing Code",
    subcategory="Overseeing Financial Activities",
    access="gated",
    kind="closed",
    files=(
        DataFile(
            name=FILE,
            description=(
                "Feather (Arrow IPC) table with the columns 'text' (the discharge summary) and 'target' (a list of "
                "ICD-10 codes such as ['I10.', 'E78.5', 'S72.001A']); reading it needs pyarrow: "
                "pip install 'pytest-medhelm[data]'"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Given the following clinical note, identify all relevant ICD-10 codes.",
        input_noun="Note",
        output_noun="Predicted ICD-10 Codes",
        newline_after_input_noun=True,
        newline_after_output_noun=True,
    ),
    metric=MIMIC_BILLING_CODE_F1,
    max_tokens=256,
    description="List the ICD-10 billing codes of a discharge summary (micro F1 over the codes).",
    data_help=(
        "gated: credentialed access to MIMIC-IV and MIMIC-IV-Note on PhysioNet (https://physionet.org), then "
        "build mimiciv_icd10.feather with https://github.com/JoakimEdin/medical-coding-reproducibility (its "
        "MIMIC-IV ICD-10 preparation). Synthetic example row: text='Synthetic discharge summary: admitted for "
        "hip fracture after a fall; history of hypertension ...', target=['S72.001A', 'W19.XXXA', 'I10.']"
    ),
)
