"""HealthBench's meta-evaluation as a benchmark: the rubric grader measured against physicians (simple-evals
``healthbench_meta_eval.py``, commit ``5e623c2b``).

**What is under test** is the grader, not a model answering patients: each item asks the grader
(``--medhelm-grader``, default HealthBench's ``gpt-4.1-2025-04-14``) whether a given completion meets a given rubric
criterion, and compares its verdict with the physicians' verdicts on the same row. The items are parametrized by the
grader (their "model" is the grader, reached with the judges' endpoint and key options), so ``pytest benchmarks
--medhelm-benchmark healthbench_meta --medhelm-grader MODEL`` needs no ``--medhelm-model``. The benchmark runs only
when named by ``--medhelm-benchmark`` (a run of the whole suite would otherwise send a grader request per row of
a 29,511-row file that says nothing about the models under test).

**Source.** OpenAI's public blob ``.../simple-evals/healthbench/2025-05-07-06-14-12_oss_meta_eval.jsonl``, read from
``<--medhelm-data-dir>/healthbench_meta/`` or downloaded once into the data cache; no sha256 is known offline (the run
records the one it read under ``run.data_unverified``). The grader prompt is simple-evals' ``GRADER_TEMPLATE``, read
as a literal from the pinned ``healthbench_reference/healthbench_eval.py`` (never executed).

**Instances.** One per JSON line, in file order, id ``str(index)``. A line holds ``prompt`` (the conversation),
``completion`` (the answer graded), ``rubric`` (the criterion's text), ``category`` (its cluster),
``binary_labels`` (one verdict per physician) and ``anonymized_physician_ids``; anything else is a
:class:`~pytest_medhelm.data.errors.DataError` naming the file and line. ``--medhelm-max-instances`` takes HELM's
deterministic sample (simple-evals samples ``random.Random(0).sample``: another subset of rows).

**Prompt.** As the meta-evaluation asks it: the template with ``<<conversation>>`` = the conversation plus the
completion as the last assistant turn and ``<<rubric_item>>`` = the criterion's text, after the Chat Completions
sampler's system message, temperature 0, ``max_tokens`` 2048 (a reasoning-model grader gets the system message here
too, where HealthBench's grading sends it the template alone: the prompt's identity, the template's sha256, is
the same). **Metric**: :mod:`pytest_medhelm.metrics.
healthbench_meta` (per item, the share of the row's physicians who agree with the grader; per benchmark, the
pairwise macro-F1 of the reference, ``benchmarks[].grader_agreement``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.clinical_decision_support.healthbench import check_messages, conversation_input
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, jsonl_rows, read_bytes, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.jury.rubric_grader import (
    REFERENCE_FILES,
    REFERENCE_INSTRUMENT,
    REFERENCE_MAX_TOKENS,
    REFERENCE_SYSTEM_MESSAGE,
    GraderPromptsUnavailable,
    conversation_text,
    fill,
    read_string_constants,
)
from pytest_medhelm.metrics.healthbench_meta import GraderAgreementMetric
from pytest_medhelm.prompting import ChatPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "healthbench_meta"
FILE = "2025-05-07-06-14-12_oss_meta_eval.jsonl"
_TEMPLATE = REFERENCE_FILES.files[0]
#: the pinned reference file, in its shared folder (``DIR/healthbench_reference/``)
TEMPLATE_FILE = DataFile(name=_TEMPLATE.name, url=_TEMPLATE.url, sha256=_TEMPLATE.sha256,
                         description=_TEMPLATE.description, folder=REFERENCE_FILES.slug)


def template_sha256(template: str) -> str:
    """The grader prompt's identity: the sha256 of the template text (UTF-8), before any row fills it."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


def _labels(value: object, ids: object, path: Path | str, where: str) -> tuple[list[bool], list[str]]:
    if not (isinstance(value, list) and value and all(isinstance(x, bool) for x in value)):
        raise DataError(path, where, f"binary_labels must be a non-empty list of true/false, got {value!r:.80}")
    if not (isinstance(ids, list) and len(ids) == len(value) and all(isinstance(i, (str, int)) for i in ids)):
        raise DataError(path, where, f"anonymized_physician_ids must list one physician id per label "
                                     f"({len(value)}), got {ids!r:.80}")
    return value, [str(i) for i in ids]


def read_rows(path: Path, template: str, data: bytes | None = None) -> Loaded:
    """The meta-evaluation's rows as instances, in file order, each with its grader prompt filled in."""
    rows = jsonl_rows(read_bytes(path) if data is None else data, path)
    if not rows:
        raise DataError(path, "", "no rows (expected one JSON object per line)")
    loaded = Loaded(slug=SLUG)
    identity = template_sha256(template)
    for index, row in enumerate(rows):
        where = f"line {row.line}"
        messages = check_messages(require(row, "prompt", path, where), path, where, "prompt")
        completion, rubric = require(row, "completion", path, where), require(row, "rubric", path, where)
        category = row.values.get("category", "")
        for key, value in (("completion", completion), ("rubric", rubric), ("category", category)):
            if not isinstance(value, str):
                raise DataError(path, where, f"{key} must be a string, got {type(value).__name__}")
        labels, physicians = _labels(require(row, "binary_labels", path, where),
                                     row.values.get("anonymized_physician_ids"), path, where)
        prompt = fill(template, conversation_text(messages, completion), rubric)
        meta = {"messages": [{"role": "system", "content": REFERENCE_SYSTEM_MESSAGE},
                             {"role": "user", "content": prompt}],
                "labels": labels, "physicians": physicians, "category": category,
                "template_sha256": identity, "instrument": REFERENCE_INSTRUMENT}
        loaded.append(Instance(id=str(index), input=conversation_input([*messages, {"role": "assistant",
                                                                                    "content": completion}]),
                               references=(rubric,), extra={"meta": meta}, benchmark=SLUG))
    return loaded.done()


def build_instances(files: Mapping[str, Path]) -> Loaded:
    template_path = data_file(files, TEMPLATE_FILE.name)
    try:
        template = read_string_constants(template_path, ("GRADER_TEMPLATE",))["GRADER_TEMPLATE"]
    except GraderPromptsUnavailable as exc:
        raise DataError(template_path, "", str(exc)) from None
    return read_rows(data_file(files, FILE), template)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="HealthBench meta-evaluation (the grader against physicians)",
    subcategory="Providing Clinical Knowledge Support",  # (HealthBench's: the grader it measures is HealthBench's)
    access="public",
    kind="closed",
    files=(DataFile(name=FILE, url=f"https://openaipublic.blob.core.windows.net/simple-evals/healthbench/{FILE}",
                    description="HealthBench's meta-evaluation, JSON lines (prompt, completion, rubric, category, "
                                "binary_labels, anonymized_physician_ids); OpenAI's public release, MIT; no sha256 "
                                "is known offline (the run records the one it read)"),
           TEMPLATE_FILE),
    build_instances=build_instances,
    prompt=ChatPrompt(key="meta"),
    metric=GraderAgreementMetric(),
    max_tokens=REFERENCE_MAX_TOKENS,
    description="The rubric grader (--medhelm-grader) measured against physicians on HealthBench's meta-evaluation. "
                "Per row the share of physicians agreeing with its verdict, per run the pairwise macro-F1 "
                "(simple-evals); it runs only when named by --medhelm-benchmark.",
    example=('{"prompt": [{"content": "SYNTHETIC: my child has a fever of 38.5C, what should I do?", "role": '
             '"user"}], "completion": "Give fluids and paracetamol; see a doctor if it lasts over 3 days.", '
             '"rubric": "Advises seeking urgent care for a fever in an infant under 3 months.", "category": '
             '"cluster:emergency_referrals", "binary_labels": [false, true], "anonymized_physician_ids": ["p1", '
             '"p2"]}'),
)
