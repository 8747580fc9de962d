"""MIMIC-IV-BHC: summarise a MIMIC-IV discharge note into its brief hospital course (HELM ``MIMICBHCScenario``,
``mimic_bhc``; gated, PhysioNet "MIMIC-IV-Ext-BHC", Aali et al. 2024).

HELM reads one JSON-lines file (``data_path=…/mimic_iv_bhc.json``): one object per line with the keys ``input``
(the preprocessed discharge note) and ``target`` (its brief hospital course). Every line is a test instance, in
file order; a line whose ``input`` or ``target`` is empty is skipped (HELM's ``if not clinical_note or not
bhc_summary: continue``), which we count in ``Loaded.removed``. Blank lines are ignored (HELM's ``json.loads``
would fail on them). Input = ``input`` as is; reference = ``target``. Instance ids: ``line<N>``.

Prompt (generation, nouns with a newline after them): ``Summarize the clinical note into a brief hospital
course.⏎⏎Clinical Note:⏎{input}⏎Brief Hospital Course:``; 1024 tokens.
Scored by the LLM jury (``metrics/jury.py``), ROUGE-1/2/L and BERTScore beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_jsonl, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.jury import jury_metric
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "mimic_bhc"
FILE = "mimic_iv_bhc.json"


def build_instances(files: Mapping[str, Path]) -> Loaded:
    path = data_file(files, FILE)
    loaded = Loaded(slug=SLUG)
    for row in read_jsonl(path):
        note = require(row, "input", path, row.where)
        summary = require(row, "target", path, row.where)
        for key, value in (("input", note), ("target", summary)):
            if value is not None and not isinstance(value, str):
                raise DataError(path, row.where, f"expected {key!r} to be a string, got {type(value).__name__}")
        if not note or not summary:
            loaded.note_removed("empty 'input' or 'target' (HELM skips the line)")
            continue
        loaded.append(Instance(id=f"line{row.line}", input=note, references=(summary,), benchmark=SLUG))
    return loaded.done()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="MIMIC-BHC",
    subcategory="Documenting Patient Visits",
    access="gated",
    kind="open",
    files=(
        DataFile(
            name=FILE,
            description=(
                "JSON lines, one object per line with the keys 'input' (the discharge note) and 'target' (its "
                "brief hospital course)"
            ),
        ),
    ),
    build_instances=build_instances,
    prompt=GenerationPrompt(
        instructions="Summarize the clinical note into a brief hospital course.",
        input_noun="Clinical Note",
        output_noun="Brief Hospital Course",
        newline_after_input_noun=True,
        newline_after_output_noun=True,
    ),
    metric=jury_metric(SLUG),  # the LLM jury; ROUGE and BERTScore are recorded beside it
    max_tokens=1024,
    description="Summarize a discharge note into its brief hospital course.",
    data_help=(
        "gated: request credentialed access to the MIMIC-IV-Ext-BHC dataset on PhysioNet (https://physionet.org), "
        "then write its notes as JSON lines with the keys input and target (HELM's file name: mimic_iv_bhc.json). "
        "Synthetic example line: "
        "{\"input\": \"<SEX> F <SERVICE> MEDICINE <CHIEF COMPLAINT> cough ... discharged home.\", \"target\": "
        "\"Ms. ___ was admitted with community-acquired pneumonia, treated with ceftriaxone ...\"}"
    ),
    filters="lines whose 'input' or 'target' is empty",
)
