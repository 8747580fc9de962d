"""HealthBench Professional: physician-authored clinical workflow tasks, graded per rubric criterion and against a
physician's answer (medhelm 0.8.0 ``HealthBenchProfessionalScenario``, run spec ``health_bench_professional``).

**Source.** OpenAI's archive ``openaipublic.blob.core.windows.net/simple-evals/healthbench_professional/assets.zip``
(unpinned upstream; no sha256 is known offline: the run records the one it read under ``run.data_unverified``). The
file read is the member ``healthbench_professional_eval.jsonl`` (at the archive's root or in one folder). Put the
archive at ``<--medhelm-data-dir>/healthbench_professional/assets.zip``, or the member itself beside it (then the
archive is not needed). medhelm 0.8.0's own unpacking fails on an archive whose only member is the file (it renames
that member to ``assets.zip``); this loader reads the member in every layout.

**Instances.** One per JSON line, in file order, id ``str(index)``, nothing filtered: the conversation
``conversation.messages`` (default none), the rubric ``rubric_items`` (``{"criterion_text", "points"}``; default none)
and ``physician_response`` (default ``""``), kept in ``extra["grading"]`` as the file has them. A malformed line is a
:class:`~pytest_medhelm.data.errors.DataError` naming the archive member and the line.

**Prompt** as HealthBench's (chat, messages as is, no system message, temperature 0, ``max_tokens`` 512).
**Metric**: its authors' (simple-evals PR #108) by default, medhelm 0.8.0's under its compat mode
(:mod:`pytest_medhelm.metrics.healthbench`).
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue.clinical_decision_support.healthbench import (
    check_messages,
    check_rubric,
    conversation_input,
)
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import check_not_empty, jsonl_rows, read_bytes
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.healthbench import RubricGradedMetric
from pytest_medhelm.prompting import ChatPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "healthbench_professional"
ARCHIVE = "assets.zip"
MEMBER = "healthbench_professional_eval.jsonl"
URL = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench_professional/assets.zip"
#: the member is a few MB; a larger one is not what OpenAI publishes (and is never inflated into memory)
MAX_MEMBER_BYTES = 1 << 30


def member_bytes(archive: Path) -> tuple[bytes, str]:
    """The bytes of ``healthbench_professional_eval.jsonl`` in the archive, and its label for errors."""
    check_not_empty(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            found = [info for info in zf.infolist() if not info.is_dir()
                     and info.filename.rstrip("/").rsplit("/", 1)[-1] == MEMBER]
            if not found:
                names = ", ".join(info.filename for info in zf.infolist()[:10])
                raise DataError(archive, "", f"no member {MEMBER!r} in the archive (found: {names or 'nothing'})")
            if len(found) > 1:
                raise DataError(archive, "", f"{len(found)} members named {MEMBER!r}: "
                                             + ", ".join(info.filename for info in found))
            info = found[0]
            if info.file_size > MAX_MEMBER_BYTES:
                raise DataError(archive, info.filename, f"{info.file_size:,} bytes uncompressed, more than the cap of "
                                                        f"{MAX_MEMBER_BYTES:,} (healthbench_professional."
                                                        "MAX_MEMBER_BYTES): not the published file, not inflated")
            return zf.read(info), f"{archive}:{info.filename}"
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:  # RuntimeError: an encrypted member
        raise DataError(archive, "", f"not a readable zip archive ({exc})") from None


def read_tasks(data: bytes, label: str) -> Loaded:
    rows = jsonl_rows(data, label)
    if not rows:
        raise DataError(label, "", "no tasks (expected one JSON object per line)")
    loaded = Loaded(slug=SLUG)
    for index, row in enumerate(rows):
        where = f"line {row.line}"
        conversation = row.get("conversation") or {}
        if not isinstance(conversation, dict):
            raise DataError(label, where, "conversation must be an object with 'messages'")
        messages = check_messages(conversation.get("messages", []), label, where, "conversation.messages")
        rubric = check_rubric(row.get("rubric_items", []), label, where, "rubric_items", "criterion_text",
                              with_tags=False)
        physician = row.get("physician_response", "")
        if not isinstance(physician, str):
            raise DataError(label, where, f"physician_response must be a string, got {type(physician).__name__}")
        grading = {"messages": messages, "rubric_items": rubric, "physician_response": physician,
                   "task_id": row.get("id")}
        loaded.append(Instance(id=str(index), input=conversation_input(messages), references=(physician,),
                               extra={"grading": grading}, benchmark=SLUG))
    return loaded.done()


def build_instances(files: Mapping[str, Path]) -> Loaded:
    if MEMBER in files:  # the member given on its own
        return read_tasks(read_bytes(files[MEMBER]), str(files[MEMBER]))
    if ARCHIVE not in files:
        raise DataMissing(f"{SLUG}: neither {ARCHIVE!r} nor {MEMBER!r} was resolved")
    data, label = member_bytes(files[ARCHIVE])
    return read_tasks(data, label)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="HealthBench Professional",
    subcategory="Providing Clinical Knowledge Support",  # ours: medhelm 0.8.0 gives none (docs/fidelity.md)
    access="public",
    kind="open",
    files=(
        DataFile(name=MEMBER, optional=True, stands_in_for=ARCHIVE,
                 description="the archive's member itself, when you have unpacked it"),
        DataFile(name=ARCHIVE, url=URL,
                 description=f"OpenAI's HealthBench Professional archive, holding {MEMBER} (JSON lines: id, "
                             "conversation.messages, rubric_items, physician_response); no sha256 is known offline "
                             "(not verified)"),
    ),
    build_instances=build_instances,
    prompt=ChatPrompt(),
    metric=RubricGradedMetric(SLUG, professional=True),
    max_tokens=512,
    description="Physician-authored clinical workflow tasks, graded per rubric criterion by the rubric grader "
                "(--medhelm-grader), with a length-adjusted score beside the raw one. The default grader is its "
                "authors' gpt-5.4-2026-03-05 at low effort.",
    example=('{"id": "synthetic-1", "conversation": {"messages": [{"role": "user", "content": "SYNTHETIC consult: '
             '54-year-old with new AF, CHA2DS2-VASc 2. Anticoagulate?"}]}, "rubric_items": [{"criterion_text": '
             '"Recommends anticoagulation.", "points": 5}], "physician_response": "SYNTHETIC: offer a DOAC."}'),
)
