"""HELM's prompt assembly (its generation and multiple-choice-joint adapters), reproduced byte for byte.

Every MedHELM run but one is zero-shot, so a prompt is ``instructions + "\\n\\n" + eval block`` (or the eval block
alone when there are no instructions); medhelm 0.8.0's ``mmlu_clinical_afr`` puts five in-context examples before the
eval block (:meth:`MultipleChoicePrompt.render_with_examples`). The two adapters differ only in the eval block:

* generation: ``input_prefix + input + "\\n" + output_prefix.rstrip()``
* multiple-choice joint: ``input_prefix + input + input_suffix + "A. opt\\n" ... + output_prefix.rstrip()``

A noun of ``None`` gives no prefix; a noun of ``""`` gives ``": "`` (a real HELM quirk that some prompts carry).

A benchmark's ``prompt`` is any :class:`PromptTemplate`: an object with ``render(instance) -> str``.
:class:`GenerationPrompt` and :class:`MultipleChoicePrompt` cover HELM's two adapters; a benchmark whose adapter
depends on the instance (CLEAR: instructions naming each condition) defines its own small class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pytest_medhelm.values import Instance

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@runtime_checkable
class PromptTemplate(Protocol):
    """What a benchmark's ``prompt`` is: it renders an instance into the exact text sent to the model."""

    def render(self, instance: Instance) -> str: ...


def _noun_prefix(noun: str | None, newline_after: bool = False) -> str:
    if noun is None:
        return ""
    return f"{noun}:\n" if newline_after else f"{noun}: "


def _join(instructions: str, block: str) -> str:
    return f"{instructions}\n\n{block}" if instructions else block


@dataclass(frozen=True)
class GenerationPrompt:
    """HELM's generation adapter (``get_generation_adapter_spec``)."""

    instructions: str = ""
    input_noun: str | None = None
    output_noun: str | None = None
    newline_after_input_noun: bool = False
    newline_after_output_noun: bool = False

    def render(self, instance: Instance) -> str:
        block = (
            _noun_prefix(self.input_noun, self.newline_after_input_noun)
            + instance.input
            + "\n"
            + _noun_prefix(self.output_noun, self.newline_after_output_noun).rstrip()
        )
        return _join(self.instructions, block)


@dataclass(frozen=True)
class MultipleChoicePrompt:
    """HELM's multiple-choice-joint adapter: options lettered A, B, … in reference order.

    ``input_suffix`` is ``"\\n"`` exactly when there is an input noun, so with ``input_noun=None`` option A is glued
    onto the input (CLEAR, RaceBias), as HELM does.
    """

    instructions: str = ""
    input_noun: str | None = None
    output_noun: str = "Answer"

    def block(self, instance: Instance, with_answer: bool = False) -> str:
        """One question as HELM lays it out: the eval block ends ``Answer:``; an in-context example's
        (``with_answer``) ends ``Answer: <letter of its correct option>`` and a line break."""
        has_noun = self.input_noun is not None
        options = "".join(f"{LETTERS[i]}. {text}\n" for i, text in enumerate(instance.choices))
        if with_answer:
            if instance.correct is None:
                raise ValueError(f"in-context example {instance.id!r} has no correct option")
            output = f"{self.output_noun}: {LETTERS[instance.correct]}\n"
        else:
            output = f"{self.output_noun}: ".rstrip()
        return _noun_prefix(self.input_noun) + instance.input + ("\n" if has_noun else "") + options + output

    def render(self, instance: Instance) -> str:
        return _join(self.instructions, self.block(instance))

    def render_with_examples(self, instance: Instance, examples: Sequence[Instance]) -> str:
        """HELM's few-shot prompt: the instructions, then each in-context example's block (its answer shown), then
        the eval block, joined by HELM's ``instance_prefix`` ``"\\n"`` (a blank line between blocks, since an
        example ends with a line break). ``examples`` in the order HELM's sampler drew them
        (:func:`~pytest_medhelm.catalogue.sampling.helm_in_context_examples`); each example's ``correct`` is the
        index of its *first* correct option, the letter HELM shows. HELM drops examples when a prompt exceeds the
        model's context window; this does not (5 short questions fit every window MedHELM runs)."""
        blocks = [self.block(example, with_answer=True) for example in examples]
        return _join(self.instructions, "\n".join([*blocks, self.block(instance)]))


def fill_once(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each placeholder (a key of ``values``, as written: ``<<conversation>>``, ``{{ scenario }}``)
    replaced by its value, in ONE pass over the template: a value is never read again, so an answer or a data row
    holding ``<<rubric_item>>`` or ``<<physician_response>>`` reaches the grader as that text, never as the hidden
    criterion or the gold answer. The references replace placeholders one after the other; for any value without a
    placeholder the result is the same text (docs/fidelity.md)."""
    import re

    if not values:
        return template
    pattern = re.compile("|".join(re.escape(key) for key in sorted(values, key=len, reverse=True)))
    return pattern.sub(lambda match: values[match.group(0)], template)


def messages_json(messages: Sequence[tuple[str, str]]) -> str:
    """A chat request's messages as compact JSON, ``[{"role": ..., "content": ...}, ...]`` (UTF-8, not escaped):
    the prompt text whose sha256 is a chat benchmark's ``prompt_sha256``."""
    return json.dumps([{"role": role, "content": content} for role, content in messages], ensure_ascii=False,
                      separators=(",", ":"))


@dataclass(frozen=True)
class ChatPrompt:
    """medhelm 0.8.0's chat adapter (HealthBench): the conversation's messages exactly as in the data file, in
    order, with no system message (the run spec's ``instructions`` are not sent). The instance carries them as
    ``extra[key]["messages"]`` (a list of ``{"role", "content"}``). :meth:`render` is their compact JSON
    (:func:`messages_json`), what ``prompt_sha256`` hashes."""

    #: the instance's ``extra`` key holding the conversation
    key: str = "grading"
    #: a chat benchmark: the request is these messages, not one user message
    chat = True

    def messages(self, instance: Instance) -> tuple[tuple[str, str], ...]:
        turns: Sequence[Mapping[str, Any]] = instance.extra[self.key]["messages"]
        return tuple((str(m["role"]), str(m["content"])) for m in turns)

    def render(self, instance: Instance) -> str:
        return messages_json(self.messages(instance))
