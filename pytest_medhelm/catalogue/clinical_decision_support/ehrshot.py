"""EHRSHOT: will this patient be readmitted / newly diagnosed with hypertension / have an abnormal anemia lab?
Answered from the list of codes in their structured EHR. (HELM ``EHRSHOTScenario``, ``ehrshot``; gated, Stanford
EHRSHOT in MEDS format, Wornow et al. 2023.)

**Files** (HELM's ``data_path``, the MEDS release): ``data/data.parquet`` (the events: ``subject_id``, ``time``,
``code``), ``metadata/subject_splits.parquet`` (``subject_id``, ``split``; HELM reads it but does not use it: every
label is a test instance, whatever its EHRSHOT split) and ``labels/<task>/labels.parquet``
(``subject_id``, ``prediction_time``, ``boolean_value``) for each task of HELM's run entries.

**Three runs averaged.** HELM runs the tasks ``guo_readmission``, ``new_hypertension`` and ``lab_anemia`` as three
runs and its EHRSHOT score is the mean of the three run means; every instance names its task in
:attr:`Instance.subset` so that the aggregator averages task means. Ids: ``<task>-<subject_id>-<k>`` (the k-th
label of that patient in time order).

**Instances, as HELM builds them, per task.**

1. Labels in file order; a ``lab_*`` task keeps 10,000 of them, ``pandas.DataFrame.sample(n=10000,
   random_state=1)`` = the first 10,000 of ``np.random.RandomState(1).permutation(n)``, in that order (with fewer
   than 10,000 labels pandas raises; here every label is kept, in file order). The labels left out of the sample
   are counted in ``Loaded.removed``.
2. The labels are sorted (stable) by ``subject_id`` then ``prediction_time``, and for each one the prompt lists the
   codes of every event of the patient with ``time <= prediction_time`` (events sorted by ``time``, stable; events
   without a time never qualify): ``⏎# Instructions⏎{instruction}⏎⏎# Your Task⏎Patient EHR:⏎- {code}⏎- {code}…⏎⏎``.
   ``{instruction}`` is HELM's persona line, for ``new_*`` tasks its short clinical definition and its code
   definition (the sorted codes of the phenotype), then the question; each part followed by a newline and the
   parts joined by a newline. The tables below are HELM's, byte for byte (with the runs of 5 spaces its line
   continuations leave in the questions).
3. **HELM's pairing bug.** HELM assigns that list of prompts (in *sorted* label order) positionally to the label
   table in its *original* order (``df_labels["prompt"] = prompts``). Whenever the label file is not already sorted
   by patient and time (always for ``lab_anemia``, whose labels are a random sample) the j-th prompt is scored
   against the j-th label of the file, which belongs to another patient or time. We keep HELM's prompts in HELM's
   order (so ``prompt_sha256`` and the sample match HELM's), score each prompt against its own label by default,
   and against HELM's mis-paired label (``Instance.extra["helm_correct"]``) under ``--medhelm-compat helm``
   (:class:`EhrshotExactMatch`).
4. A prompt longer than 100,000 cl100k tokens (the input text, as HELM's ``count_tokens``) is dropped (counted in
   ``Loaded.removed``).

Prompt (multiple choice, input noun ``""``): ``Answer A for yes, B for no.⏎⏎: {input}⏎A. yes⏎B. no⏎Respond with only
'A' for yes or 'B' for no. Do not add any other text, punctuation, or symbols:``.

**Approximations.** The persona, definition, question and code tables are taken from HELM's ``ehrshot_scenario.py``
as published before the HEAD commit of the spec (the spec does not print them); HELM's no-op ``replace('Then respond
with "yes" or "no"…')`` is omitted (the phrase never occurs). A null ``code`` prints ``None`` and a null
``boolean_value`` counts as "no", as in pandas. tiktoken is told to treat special-token text as plain text where
HELM's ``encode`` would raise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.user_files import count_tokens, import_pyarrow
from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.base import Score
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "ehrshot"
DATA = "data/data.parquet"
SPLITS = "metadata/subject_splits.parquet"
#: the tasks of HELM's run entries, in their order
TASKS = ("guo_readmission", "new_hypertension", "lab_anemia")
CHOICES = ("yes", "no")
MAX_LENGTH = 100_000
MAX_LABELS_PER_LAB_TASK = 10_000
LAB_SAMPLE_SEED = 1


def labels_file(task: str) -> str:
    return f"labels/{task}/labels.parquet"


# HELM's tables (ehrshot_scenario.py) for the three tasks
TASK_FULL_NAMES = {
    "new_hypertension": "Hypertension",
    "lab_anemia": "Anemia",
    "guo_readmission": "30-Day Readmission",
}
TASK_QUESTIONS = {
    "new_hypertension": (
        "Is this patient likely to receive a first-time diagnosis     of Hypertension within the next year?"
    ),
    "lab_anemia": (
        "If a lab test for Anemia is ordered for this patient right now,     will it come back back abnormal? "
        "(i.e. <120 g/L)"
    ),
    "guo_readmission": (
        "If this patient is discharged from the hospital right now, is the patient likely     to be readmitted to "
        "the hospital within 30 days?"
    ),
}
#: the first persona of each task (HELM uses ``PERSONAS[task][0]``)
PERSONAS = {
    "new_hypertension": "Primary Care Physician",
    "guo_readmission": "Hospitalist",
    "lab_anemia": "Hematologist",
}
CLINICAL_SHORT_DEFS = {
    "new_hypertension": (
        "Hypertension, or high blood pressure, is a chronic medical condition "
        "characterized by persistently elevated blood pressure in the arteries, with a "
        "resting measurement at or above 130/80 mmHg. It is a significant risk factor "
        "for numerous cardiovascular and systemic diseases, including stroke, coronary "
        "artery disease, heart failure, atrial fibrillation, and chronic kidney "
        "disease. Hypertension is divided into primary (essential) hypertension, "
        "accounting for 90-95% of cases, which is due to nonspecific lifestyle and "
        "genetic factors, and secondary hypertension, due to identifiable causes like "
        "chronic kidney disease and endocrine disorders. Identifying hypertension in a "
        "patient's EHR involves reviewing blood pressure readings, assessing for risk "
        "factors such as obesity, high salt intake, and smoking, and noting any related "
        "health conditions or medications."
    ),
}
#: the descendants of each ``new_*`` phenotype (OMOP Athena), printed sorted
CODE_DEFS = {
    "new_hypertension": (
        "SNOMED/46481004", "SNOMED/72022006", "ICD9CM/401", "SNOMED/1201005", "ICD10CM/I10", "SNOMED/23717007",
        "SNOMED/266228004", "SNOMED/71874008", "SNOMED/9901000", "SNOMED/371125006", "SNOMED/194760004",
        "SNOMED/40511000119107", "SNOMED/63287004", "SNOMED/18416000", "ICD9CM/401.9", "SNOMED/1218009",
        "SNOMED/78975002", "SNOMED/78808002", "SNOMED/35303009", "SNOMED/155296003", "ICD9CM/401.1",
        "SNOMED/194758001", "ICD9CM/401.0", "SNOMED/19769006", "SNOMED/429457004", "SNOMED/59621000",
    ),
}


def instruction(task: str) -> str:
    """HELM's ``base_prompt(task)["instruction"]`` with the task's config (persona; definitions for ``new_*``)."""
    full_name = TASK_FULL_NAMES[task].lower()
    parts = [
        f"You are an expert {PERSONAS[task].lower()} at Stanford Healthcare, an academic medical center "
        f"affiliated with Stanford University. You specialize in predicting {full_name}."
    ]
    if task.startswith("new_"):
        parts.append("Clinical Definition: " + CLINICAL_SHORT_DEFS[task])
        parts.append(
            f"Medical Code Definition: In an electronic health record (EHR), {full_name} is denoted "
            f"by the occurrence of any of the following medical codes: {', '.join(sorted(CODE_DEFS[task]))}"
        )
    parts.append(
        "Instruction: Review the patient's EHR history. Based on all available medical evidence in the provided "
        f"EHR, please answer the question: {TASK_QUESTIONS[task]}"
    )
    return "\n".join(part + "\n" for part in parts)


def scenario_text(task: str, codes: list[Any]) -> str:
    """HELM's ``lumia_prompt`` with the ``codes_only`` EHR converter: the instance's input text."""
    ehr = "\n".join(f"- {code}" for code in codes)
    return f"\n# Instructions\n{instruction(task)}\n\n# Your Task\nPatient EHR:\n{ehr}\n\n"


# --------------------------------------------------------------------------------------------------------------
# Reading the MEDS files


def _read(path: Path, columns: tuple[str, ...], filters: Any = None) -> Any:
    pa = import_pyarrow(path)
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, "", f"not a readable Parquet file ({exc}); is it truncated?") from None
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise DataError(
            path, "schema",
            f"missing column(s) {', '.join(map(repr, missing))}; found columns {', '.join(map(repr, schema.names))}",
        )
    try:
        return pq.read_table(path, columns=list(columns), filters=filters)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, "", f"cannot read the Parquet data ({exc}); is it truncated?") from None


def _microseconds(column: Any, path: Path, name: str) -> list[int | None]:
    """A timestamp column as integers (µs since the epoch), None for nulls."""
    import pyarrow as pa

    if not pa.types.is_timestamp(column.type) and not pa.types.is_date(column.type):
        raise DataError(path, f"column {name!r}", f"expected timestamps, got {column.type}")
    if pa.types.is_date(column.type):
        column = column.cast(pa.timestamp("us"))
    return column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64()).to_pylist()


_LAST = 2**63 - 1  # sorts after every time: pandas' na_position="last"


def _stable_order(subjects: list[Any], times: list[int | None]) -> list[int]:
    """Indices sorted stably by (subject, time), missing values last (pandas ``sort_values`` of two columns)."""

    def key(i: int) -> tuple:
        subject = subjects[i]
        return (subject is None, subject if subject is not None else 0, _LAST if times[i] is None else times[i])

    return sorted(range(len(subjects)), key=key)


class _Timelines:
    """The events of the labelled patients, sorted by (subject, time), with the codes up to a given time.

    HELM sorts the events with pandas (``sort_values(["subject_id", "time"])``, stable, missing times last) and
    keeps, per label, the events with ``time <= prediction_time``; pyarrow's sort is stable too and puts nulls last.
    """

    def __init__(self, path: Path, subjects: set[Any]) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        filters = [("subject_id", "in", sorted(subjects))] if subjects else None
        table = _read(path, ("subject_id", "time", "code"), filters=filters)
        if not pa.types.is_timestamp(table.column("time").type):
            raise DataError(path, "column 'time'", f"expected timestamps, got {table.column('time').type}")
        table = table.filter(pc.is_valid(table.column("subject_id")))
        # stable; nulls sort last by default
        order = pc.sort_indices(table, sort_keys=[("subject_id", "ascending"), ("time", "ascending")])
        table = table.take(order)
        times = table.column("time")
        self._times = np.asarray(
            pc.fill_null(times.cast(pa.timestamp("us", tz=times.type.tz)).cast(pa.int64()), _LAST)
        )
        self._codes = table.column("code")
        event_subjects = table.column("subject_id").to_pylist()
        self._ranges: dict[Any, tuple[int, int]] = {}
        start = 0
        for i in range(1, len(event_subjects) + 1):
            if i == len(event_subjects) or event_subjects[i] != event_subjects[start]:
                self._ranges[event_subjects[start]] = (start, i)
                start = i

    def codes_until(self, subject: Any, when: int | None) -> list[Any]:
        import numpy as np

        if when is None or subject not in self._ranges:
            return []
        start, end = self._ranges[subject]
        count = int(np.searchsorted(self._times[start:end], when, side="right"))
        return self._codes.slice(start, count).to_pylist()


def _task_labels(path: Path, task: str, loaded: Loaded) -> tuple[list[Any], list[int | None], list[bool]]:
    table = _read(path, ("subject_id", "prediction_time", "boolean_value"))
    subjects = table.column("subject_id").to_pylist()
    times = _microseconds(table.column("prediction_time"), path, "prediction_time")
    values = [bool(v) for v in table.column("boolean_value").to_pylist()]
    if not subjects:
        raise DataError(path, "", "no labels")
    if task.startswith("lab_") and len(subjects) > MAX_LABELS_PER_LAB_TASK:
        import numpy as np

        loaded.note_removed(
            f"label beyond HELM's sample of {MAX_LABELS_PER_LAB_TASK:,} per lab task "
            "(DataFrame.sample, random_state=1)",
            len(subjects) - MAX_LABELS_PER_LAB_TASK,
        )
        order = np.random.RandomState(LAB_SAMPLE_SEED).permutation(len(subjects))
        keep = [int(i) for i in order[:MAX_LABELS_PER_LAB_TASK]]
        subjects, times, values = [subjects[i] for i in keep], [times[i] for i in keep], [values[i] for i in keep]
    return subjects, times, values


def build_instances(files: Mapping[str, Path]) -> Loaded:
    data_path = data_file(files, DATA)
    _read(data_file(files, SPLITS), ("subject_id", "split"))  # HELM reads it; its split is not used
    loaded = Loaded(slug=SLUG)
    labels = {task: _task_labels(data_file(files, labels_file(task)), task, loaded) for task in TASKS}
    timelines = _Timelines(data_path, {s for subjects, _, _ in labels.values() for s in subjects if s is not None})
    for task in TASKS:
        subjects, times, values = labels[task]
        order = _stable_order(subjects, times)
        per_subject: dict[Any, int] = {}
        for j, k in enumerate(order):
            # prompt j is built from the j-th label in sorted order (k), HELM scores it against label j
            subject = subjects[k]
            text = scenario_text(task, timelines.codes_until(subject, times[k]))
            nth = per_subject.get(subject, 0)
            per_subject[subject] = nth + 1
            if count_tokens(text) > MAX_LENGTH:
                loaded.note_removed(f"prompt over {MAX_LENGTH} cl100k tokens (HELM drops it)")
                continue
            correct = 0 if values[k] else 1
            loaded.append(
                Instance(
                    id=f"{task}-{subject}-{nth}",
                    input=text,
                    references=(CHOICES[correct],),
                    choices=CHOICES,
                    correct=correct,
                    extra={"helm_correct": 0 if values[j] else 1, "subject_id": subject, "prediction_time": times[k]},
                    subset=task,
                    benchmark=SLUG,
                )
            )
    return loaded.done()


class EhrshotExactMatch:
    """Multiple-choice exact match; under ``compat="helm"`` against HELM's mis-paired label (module docstring, 3)."""

    name = "exact_match"
    binary = True
    pass_mark = 1.0

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        helm_correct = instance.extra.get("helm_correct", instance.correct)
        if not reproduces_helm(compat) or helm_correct == instance.correct:
            return MULTIPLE_CHOICE_EXACT_MATCH.score(answer, instance, compat)
        helm_instance = dataclasses.replace(
            instance, correct=helm_correct, references=(instance.choices[helm_correct],)
        )
        score = MULTIPLE_CHOICE_EXACT_MATCH.score(answer, helm_instance, compat)
        return dataclasses.replace(
            score, detail=score.detail + " (HELM's label, which belongs to another row of the label file)"
        )


EHRSHOT_EXACT_MATCH = EhrshotExactMatch()


BENCHMARK = Benchmark(
    slug=SLUG,
    name="EHRSHOT",
    subcategory="Predicting Patient Risks and Outcomes",
    access="gated",
    kind="closed",
    files=(
        DataFile(name=DATA, description="MEDS events, Parquet with the columns 'subject_id', 'time', 'code'"),
        DataFile(name=SPLITS, description="MEDS subject splits, Parquet with the columns 'subject_id', 'split'"),
        *(
            DataFile(
                name=labels_file(task),
                description="MEDS labels, Parquet with the columns 'subject_id', 'prediction_time', 'boolean_value'",
            )
            for task in TASKS
        ),
    ),
    build_instances=build_instances,
    prompt=MultipleChoicePrompt(
        instructions="Answer A for yes, B for no.",
        input_noun="",
        output_noun="Respond with only 'A' for yes or 'B' for no. Do not add any other text, punctuation, or symbols",
    ),
    metric=EHRSHOT_EXACT_MATCH,
    max_tokens=1,
    description="Predict readmission, new hypertension or an abnormal anemia lab from EHR codes (3 tasks averaged).",
    data_help=(
        "gated: sign the EHRSHOT data use agreement (Stanford; Wornow et al. 2023, arXiv:2307.02028) and use its "
        "MEDS release (reading Parquet needs pyarrow: pip install 'pytest-medhelm[data]'). Synthetic example: "
        "data/data.parquet row subject_id=1001, time=2019-05-02 10:00, code='ICD10CM/I10'; "
        "labels/new_hypertension/labels.parquet row subject_id=1001, prediction_time=2020-01-01 23:59, "
        "boolean_value=True"
    ),
    filters=(
        "labels of a lab_* task beyond HELM's sample of 10,000 (DataFrame.sample, random_state=1); prompts longer than "
        "100,000 cl100k tokens"
    ),
)
