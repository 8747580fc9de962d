"""HealthBench: answer health conversations, graded per physician-written rubric criterion (medhelm 0.8.0
``HealthBenchScenario``, run spec ``health_bench``; OpenAI's reference implementation: simple-evals
``healthbench_eval.py``).

**Source.** OpenAI's public blob ``openaipublic.blob.core.windows.net/simple-evals/healthbench/``: the main set
``2025-05-07-06-14-12_oss_eval.jsonl`` (5,000 conversations, the file medhelm 0.8.0 reads), the hard subset
``hard_2025-05-08-21-00-10.jsonl`` (1,000) and the consensus subset ``consensus_2025-05-09-20-00-46.jsonl``
(3,671, graded on the physician-consensus criteria). The dated names are the only pin upstream gives, and no
sha256 is known offline: a run downloads the file once into the data cache (or reads
``<--medhelm-data-dir>/healthbench/<file name>``) and records the sha256 it read under ``run.data_unverified``
(``expected`` null). ``--medhelm-healthbench-subset
full|hard|consensus`` (ini ``medhelm_healthbench_subset``, default ``full``) chooses the file; the slug stays
``healthbench``.

**Instances.** One per JSON line, in file order, id ``str(index)`` (``"0"``, ``"1"``, …; medhelm's ids), nothing
filtered. Each line's ``prompt`` (a list of ``{"content", "role"}``), ``rubrics`` (``{"criterion", "points",
"tags"}``), ``example_tags`` and ``prompt_id`` are kept in ``extra["grading"]`` as the file has them (key order
included: medhelm 0.8.0 prints each rubric dict into its grader prompt). A line that is not such a record (a message
without a string role or content, a criterion without a finite number of points) is a
:class:`~pytest_medhelm.data.errors.DataError` naming the file and line.

**Prompt.** medhelm 0.8.0's chat adapter: the conversation's messages exactly as in the file, no system message,
temperature 0, ``max_tokens`` 512 (:class:`~pytest_medhelm.prompting.ChatPrompt`; ``prompt_sha256`` hashes the
messages' compact JSON). **Metric**: :mod:`pytest_medhelm.metrics.healthbench` (the rubric grader).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import Row, data_file, jsonl_rows, read_bytes, require
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.healthbench import RubricGradedMetric
from pytest_medhelm.prompting import ChatPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "healthbench"
BLOB = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench"
#: subset -> the upstream file (the option's values)
SUBSET_FILES: dict[str, str] = {
    "full": "2025-05-07-06-14-12_oss_eval.jsonl",
    "hard": "hard_2025-05-08-21-00-10.jsonl",
    "consensus": "consensus_2025-05-09-20-00-46.jsonl",
}


def _where(row: Row) -> str:
    return f"line {row.line}"


def check_messages(value: Any, path: Path | str, where: str, key: str) -> list[dict[str, Any]]:
    """A conversation: a list of ``{"role", "content"}`` with string values and a role, kept as in the file."""
    if not isinstance(value, list):
        raise DataError(path, where, f"{key} must be a list of messages, got {type(value).__name__}")
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not message["role"] \
                or not isinstance(message.get("content"), str):
            raise DataError(path, where, f"{key}[{i}] must be an object with a non-empty string 'role' and a string "
                                         "'content'")
    return value


def check_rubric(value: Any, path: Path | str, where: str, key: str, criterion_key: str,
                 with_tags: bool) -> list[dict[str, Any]]:
    """Rubric items: objects with a string criterion and a finite number of points (and a list of string tags)."""
    if not isinstance(value, list):
        raise DataError(path, where, f"{key} must be a list of rubric items, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get(criterion_key), str):
            raise DataError(path, where, f"{key}[{i}] must be an object with a string {criterion_key!r}")
        points = item.get("points")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points):
            raise DataError(path, where, f"{key}[{i}].points must be a finite number, got {points!r}")
        tags = item.get("tags", [])
        if with_tags and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            raise DataError(path, where, f"{key}[{i}].tags must be a list of strings")
    return value


def read_examples(path: Path, data: bytes | None = None, label: str | None = None) -> Loaded:
    """HealthBench's examples (one JSON object per line) as instances, in file order."""
    where_file = label or path
    rows = jsonl_rows(read_bytes(path) if data is None else data, where_file)
    if not rows:
        raise DataError(where_file, "", "no examples (expected one JSON object per line)")
    loaded = Loaded(slug=SLUG)
    for index, row in enumerate(rows):
        where = _where(row)
        messages = check_messages(require(row, "prompt", where_file, where), where_file, where, "prompt")
        rubrics = check_rubric(row.get("rubrics", []), where_file, where, "rubrics", "criterion", with_tags=True)
        tags = row.get("example_tags", [])
        if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            raise DataError(where_file, where, "example_tags must be a list of strings")
        grading = {"messages": messages, "rubric_items": rubrics, "example_tags": tags,
                   "prompt_id": row.get("prompt_id")}
        loaded.append(Instance(id=str(index), input=conversation_input(messages), extra={"grading": grading},
                               benchmark=SLUG))
    return loaded.done()


def conversation_input(messages: Sequence[Mapping[str, Any]]) -> str:
    """The instance's input as a person reads it: the conversation, ``role: content`` blocks."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def _loader(name: str) -> Callable[[Mapping[str, Path]], Loaded]:
    def build_instances(files: Mapping[str, Path]) -> Loaded:
        return read_examples(data_file(files, name))

    return build_instances


def _file(subset: str) -> DataFile:
    name = SUBSET_FILES[subset]
    return DataFile(name=name, url=f"{BLOB}/{name}",
                    description=f"HealthBench's {subset} set, JSON lines (example_tags, prompt, prompt_id, rubrics); "
                                "OpenAI's public release, MIT; no sha256 is known offline "
                                "(the run records the one it read)")


def select(run_config: Any) -> Benchmark:
    """The benchmark with the file of the run's ``--medhelm-healthbench-subset``."""
    subset = getattr(run_config, "healthbench_subset", "full") or "full"
    return SUBSETS[subset]


BENCHMARK = Benchmark(
    slug=SLUG,
    name="HealthBench",
    subcategory="Providing Clinical Knowledge Support",  # ours: medhelm 0.8.0 gives none (docs/fidelity.md)
    access="public",
    kind="open",
    files=(_file("full"),),
    build_instances=_loader(SUBSET_FILES["full"]),
    prompt=ChatPrompt(),
    metric=RubricGradedMetric(SLUG),
    max_tokens=512,
    description="Answer health conversations (multi-turn, multilingual; patients and clinicians), graded per "
                "physician-written rubric criterion by the rubric grader (--medhelm-grader).",
    example=('{"example_tags": ["theme:emergency_referrals"], "ideal_completions_data": null, "prompt": '
             '[{"content": "SYNTHETIC: I twisted my ankle and it is swollen. Should I go to A&E?", "role": "user"}], '
             '"prompt_id": "synthetic-1", "rubrics": [{"criterion": "Advises urgent care if unable to bear weight.", '
             '"points": 5, "tags": ["level:example", "axis:completeness"]}]}'),
    select=select,
)

#: the benchmark of each subset (the same slug, prompt and metric; its own file)
SUBSETS: dict[str, Benchmark] = {
    subset: BENCHMARK if subset == "full" else dataclasses.replace(
        BENCHMARK, files=(_file(subset),), build_instances=_loader(name))
    for subset, name in SUBSET_FILES.items()}
