"""HealthBench's rubric grader: the grader prompts (pinned data) and one grader request per rubric criterion.

**The prompts are data.** HealthBench's reference grader prompt is ``GRADER_TEMPLATE`` in OpenAI simple-evals'
``healthbench_eval.py`` (commit ``5e623c2b``, MIT); medhelm 0.8.0 sends the same text as ``PROMPT_TEMPLATE`` and
compares with a physician's answer with ``EVAL_PROMPT``, both in its ``health_bench_annotator.py`` (commit
``1becdd64``, Apache-2.0). Those files are read, with :mod:`ast`, as literal string constants: never imported, never
executed, and their text is not part of this package. They are found like a benchmark's files
(:func:`pytest_medhelm.data.sources.resolve_files`): ``<--medhelm-data-dir>/healthbench_reference/healthbench_eval.py``
and ``<DIR>/medhelm08_templates/health_bench_annotator.py``, else the data cache, downloaded there once, and
checked against their pinned sha256.

**The requests** (:func:`grading_calls`), for one answer:

* reference (both benchmarks by default): for each criterion, the grader (``--medhelm-grader``; by default
  HealthBench's ``gpt-4.1-2025-04-14``, HealthBench Professional's ``gpt-5.4-2026-03-05`` at low reasoning effort,
  simple-evals PR #108) gets the template with ``<<conversation>>`` = the conversation plus the answer as the last
  assistant turn (``role: content`` blocks joined by a blank line) and ``<<rubric_item>>`` = ``[points] criterion``,
  ``max_tokens`` 2048; a plain grader after the system message ``You are a helpful assistant.`` at temperature 0
  (simple-evals' Chat Completions sampler, which samples at 0.5: a deterministic grader gives a cached re-run the
  same verdicts), a reasoning-model grader with the template alone (its Responses sampler). A rubric without
  positive points gets no request;
* medhelm 0.8.0 (``--medhelm-compat medhelm`` or ``helm``): every judge of the jury
  gets, for each criterion in order, the same template with ``<<rubric_item>>`` = Python's ``str()`` of the rubric
  dict as it is in the file, as one user message, ``max_tokens`` 4096, temperature 0; HealthBench Professional then
  asks each judge to compare the answer with the physician's (``EVAL_PROMPT``). An empty answer gets no request
  (the fork sends none; it scores 0).

A ``local/...`` grader (a llama.cpp server the run starts) also gets the verdict's JSON schema as
``response_format``, as local judges do (:mod:`pytest_medhelm.jury.llama_judges`).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.prompting import fill_once

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import ChatRequest, Instance, ModelSpec

#: the reference's grader (simple-evals ``physician_completions_main``), the default of --medhelm-grader
DEFAULT_GRADER = "openai/gpt-4.1-2025-04-14"
#: HealthBench Professional's reference grader and its reasoning effort (simple-evals PR #108: the grader its
#: ``healthbench_professional`` eval and ``--healthbench-professional-mode`` require), the default for that benchmark
PROFESSIONAL_GRADER = "openai/gpt-5.4-2026-03-05"
PROFESSIONAL_GRADER_EFFORT = "low"
#: simple-evals' ``OPENAI_SYSTEM_MESSAGE_API``, the grader sampler's system message
REFERENCE_SYSTEM_MESSAGE = "You are a helpful assistant."
REFERENCE_MAX_TOKENS = 2048
FORK_MAX_TOKENS = 4096
GRADER_TEMPLATE_NAME = "GRADER_TEMPLATE"

SIMPLE_EVALS_COMMIT = "5e623c2b400af62a1278e23595f95b0853d7fe8a"
MEDHELM_COMMIT = "1becdd64a28da8572b4a0adfe3f7f0104cb7900d"
REFERENCE_INSTRUMENT = f"simple-evals@{SIMPLE_EVALS_COMMIT[:7]}"
FORK_INSTRUMENT = f"medhelm@{MEDHELM_COMMIT[:7]}"

#: the longest explanation a local grader may write (characters): the verdict needs a sentence or two
EXPLANATION_MAX_CHARS = 300

RUBRIC = "rubric"
COMPARISON = "comparison"


@dataclass(frozen=True)
class PinnedFiles:
    """A set of pinned files kept under ``<data dir>/<slug>/`` (what :func:`resolve_files` needs)."""

    slug: str
    files: tuple[DataFile, ...]
    data_help: str


REFERENCE_FILES = PinnedFiles(
    slug="healthbench_reference",
    files=(DataFile(
        name="healthbench_eval.py",
        url=f"https://raw.githubusercontent.com/openai/simple-evals/{SIMPLE_EVALS_COMMIT}/healthbench_eval.py",
        sha256="89909957f005762edaded2f0e39fc9b3b242edd55e3ac0ce4c8dd886ac59d167",
        description="HealthBench's reference implementation (GRADER_TEMPLATE), OpenAI simple-evals, MIT"),),
    data_help="the grader prompt of HealthBench's rubric grader")

FORK_FILES = PinnedFiles(
    slug="medhelm08_templates",
    files=(DataFile(
        name="health_bench_annotator.py",
        url=(f"https://raw.githubusercontent.com/Pacific-AI-Corp/medhelm/{MEDHELM_COMMIT}/src/helm/benchmark/"
             "annotation/health_bench_annotator.py"),
        sha256="8034c43ee8492563604e30cef296ed1353a025f9f7d166ac5c77c4bd98e8f8c8",
        description="medhelm 0.8.0's HealthBench annotator (PROMPT_TEMPLATE, EVAL_PROMPT), Apache-2.0"),),
    data_help="the grader prompts of medhelm 0.8.0's HealthBench annotators")


class GraderPromptsUnavailable(Exception):
    """The pinned file of a grader prompt cannot be had or does not hold the prompt; the message says which."""


def read_string_constants(path: Path, names: Sequence[str]) -> dict[str, str]:
    """The module-level string constants ``names`` of a Python file, read as literals with :mod:`ast` (never run)."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise GraderPromptsUnavailable(f"{path}: cannot be read as a Python module ({exc})") from None
    found: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, assigned = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, assigned = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                value = _literal_string(assigned)
                if not isinstance(value, str):
                    raise GraderPromptsUnavailable(f"{path}: {target.id} is not a literal string")
                found[target.id] = value
    missing = [name for name in names if name not in found]
    if missing:
        raise GraderPromptsUnavailable(f"{path}: no module-level string {', '.join(missing)}")
    return found


#: the string methods a constant may be written with (``"""...""".strip()``, simple-evals' GRADER_TEMPLATE)
_STRING_METHODS = {"strip": str.strip, "lstrip": str.lstrip, "rstrip": str.rstrip}


def _literal_string(node: ast.AST) -> str | None:
    """A string literal, or a string literal with ``.strip()`` (``lstrip``, ``rstrip``) called on it without
    arguments; None for anything else. Nothing is evaluated beyond that."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args and not node.keywords \
            and node.func.attr in _STRING_METHODS:
        inner = _literal_string(node.func.value)
        return None if inner is None else _STRING_METHODS[node.func.attr](inner)
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class GraderPrompts:
    """The grader prompts of a run: the reference's, the fork's (either may be None with the reason why)."""

    reference: str | None = None
    fork_rubric: str | None = None
    fork_comparison: str | None = None
    reference_missing: str = ""
    fork_missing: str = ""


def load_grader_prompts(data_dir: Path | None, download_allowed: bool = True, need_reference: bool = True,
                        need_fork: bool = True, verification: Any = None) -> GraderPrompts:
    """Read the pinned files a run needs (``need_*``); a file that cannot be had leaves its prompts None, with the
    reason."""
    from pytest_medhelm.data.errors import DataError, DataMissing
    from pytest_medhelm.data.sources import resolve_files

    values: dict[str, Any] = {}
    for need, files, names, key in (
            (need_reference, REFERENCE_FILES, ("GRADER_TEMPLATE",), "reference"),
            (need_fork, FORK_FILES, ("PROMPT_TEMPLATE", "EVAL_PROMPT"), "fork")):
        if not need:
            continue
        try:
            paths = resolve_files(files, data_dir, download=download_allowed, verification=verification)
            constants = read_string_constants(paths[files.files[0].name], names)
        except (DataMissing, DataError, GraderPromptsUnavailable, OSError) as exc:
            values[f"{key}_missing"] = "; ".join(str(exc).split("; ")[:2])
            continue
        if key == "reference":
            values["reference"] = constants["GRADER_TEMPLATE"]
        else:
            values["fork_rubric"] = constants["PROMPT_TEMPLATE"]
            values["fork_comparison"] = constants["EVAL_PROMPT"]
    return GraderPrompts(**values)


def conversation_text(messages: Sequence[Mapping[str, Any]], answer: str) -> str:
    """The conversation with the answer as the last assistant turn: ``role: content`` blocks, a blank line between."""
    turns = [*messages, {"role": "assistant", "content": answer}]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in turns)


def reference_rubric_item(item: Mapping[str, Any]) -> str:
    """simple-evals' ``str(RubricItem)``: ``[points] criterion`` (HealthBench Professional's ``criterion_text``)."""
    return f"[{item['points']}] {item['criterion'] if 'criterion' in item else item['criterion_text']}"


def has_positive_points(items: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the reference's score can exist: some criterion has positive points (its denominator). simple-evals
    asserts it after grading; an example without one is never sent to the grader here."""
    return any(float(item["points"]) > 0 for item in items)


def fork_rubric_item(item: Mapping[str, Any]) -> str:
    """medhelm 0.8.0's ``str(rubric_item)``: the rubric dict as loaded from the file, as Python prints it."""
    return str(dict(item))


def fill(template: str, conversation: str, rubric_item: str) -> str:
    """The grader's prompt: ``<<conversation>>`` and ``<<rubric_item>>`` filled in one pass (an answer's
    ``<<rubric_item>>`` stays that text; the references, filling one after the other, put the criterion there)."""
    return fill_once(template, {"<<conversation>>": conversation, "<<rubric_item>>": rubric_item})


def fill_comparison(template: str, conversation: str, answer: str, physician: str) -> str:
    """The physician comparison's prompt, filled in one pass (an answer's ``<<physician_response>>`` stays that
    text, never the physician's gold answer)."""
    return fill_once(template, {"<<user_message>>": conversation, "<<llm_response>>": answer,
                                "<<physician_response>>": physician})


def verdict_schema(kind: str) -> dict[str, Any]:
    """The JSON schema of a local grader's reply: the criterion's verdict, or the comparison's 1-10 score."""
    explanation = {"type": "string", "maxLength": EXPLANATION_MAX_CHARS}
    if kind == COMPARISON:  # the order EVAL_PROMPT shows
        properties = {"criteria_met": {"type": "integer", "enum": list(range(1, 11))}, "explanation": explanation}
    else:  # the order GRADER_TEMPLATE asks for
        properties = {"explanation": explanation, "criteria_met": {"type": "boolean"}}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def local_response_format(kind: str) -> str:
    return json.dumps({"type": "json_object", "schema": verdict_schema(kind)}, separators=(",", ":"))


#: enough tokens for the largest verdict the schema allows (a token is at least one character)
LOCAL_MAX_TOKENS = EXPLANATION_MAX_CHARS + 64


@dataclass(frozen=True)
class GraderCall:
    """One grader request: who grades, what (a criterion by its index, or the comparison), and the request."""

    grader: str
    kind: str
    index: int
    request: ChatRequest


def grading_calls(slug: str, instance: Instance, answer: str, graders: Sequence[ModelSpec],
                  prompts: GraderPrompts, fork: bool, effort: str = "") -> list[GraderCall]:
    """The grader requests for ``answer``, in order: grader by grader, criterion by criterion (then, under medhelm
    0.8.0's grading of a benchmark with a physician's answer, the comparison). Raises
    :class:`GraderPromptsUnavailable` when the prompts the mode needs are not there.

    Reference grading: none for a rubric without positive points (the reference's score cannot exist: the metric
    says so); a reasoning-model grader gets the template as the only message (simple-evals' Responses sampler has
    no system message) and ``effort`` as its reasoning effort when one is given (HealthBench Professional's
    ``low``), over the run's; a plain grader gets the system message first (its Chat Completions sampler)."""
    from pytest_medhelm.jury import llama_judges
    from pytest_medhelm.values import ChatRequest

    grading = instance.extra["grading"]
    comparison = grading.get("physician_response") is not None
    if fork:
        rubric_prompt, comparison_prompt = prompts.fork_rubric, prompts.fork_comparison
        if rubric_prompt is None or comparison_prompt is None:
            raise GraderPromptsUnavailable(f"medhelm 0.8.0's grader prompts are not available ({prompts.fork_missing})")
        if not answer.strip():
            return []  # the fork asks nothing about an empty answer
        conversation = conversation_text(grading["messages"], answer)
        texts = [(RUBRIC, i, fill(rubric_prompt, conversation, fork_rubric_item(item)))
                 for i, item in enumerate(grading["rubric_items"])]
        if comparison:
            texts.append((COMPARISON, 0, fill_comparison(comparison_prompt, conversation, answer,
                                                         grading["physician_response"])))
    else:
        reference_prompt = prompts.reference
        if reference_prompt is None:
            raise GraderPromptsUnavailable(f"HealthBench's reference grader prompt is not available "
                                           f"({prompts.reference_missing})")
        if not has_positive_points(grading["rubric_items"]):
            return []  # no score can come of it: nothing is asked (the metric says why)
        conversation = conversation_text(grading["messages"], answer)
        texts = [(RUBRIC, i, fill(reference_prompt, conversation, reference_rubric_item(item)))
                 for i, item in enumerate(grading["rubric_items"])]
    purpose = f"grader:{slug}:{FORK_INSTRUMENT if fork else REFERENCE_INSTRUMENT}"
    calls = []
    for grader in graders:
        local = llama_judges.constrained(grader.name)
        reasoning = not fork and grader.reasoning is not None
        extra: dict[str, Any] = {"reasoning_effort": effort} if reasoning and effort else {}
        system = () if fork or reasoning else (("system", REFERENCE_SYSTEM_MESSAGE),)
        for kind, index, text in texts:
            messages = (*system, ("user", text))
            request = ChatRequest.for_messages(
                grader, messages,
                max_tokens=LOCAL_MAX_TOKENS if local else FORK_MAX_TOKENS if fork else REFERENCE_MAX_TOKENS,
                temperature=0.0, purpose=purpose, response_format=local_response_format(kind) if local else "",
                **extra)
            calls.append(GraderCall(grader.name, kind, index, request))
    return calls
