"""medhelm 0.8.0's synthetic HIPAA / 42 CFR Part 2 benchmarks: Family Disclosure, Right of Access, Written Consent
(``synt_family_disclosure``, ``synt_right_of_access``, ``synt_written_consent``; each run spec takes ``data_path``).

LLM-generated, clinician-reviewed synthetic scenarios that medhelm does not distribute: each reads the user's own
CSV (``prompt``, ``context``, ``label``), like the Stanford Health Care benchmarks, and is read the same way
(:func:`pytest_medhelm.catalogue.shc.shc_instances`: ``csv.DictReader`` semantics, rows keyed by their prompt text so
that a repeated prompt keeps its first place and its last label, counted; a label that is not one of the choices is
a :class:`~pytest_medhelm.data.errors.DataError` naming the file and row, where medhelm's assertion stops the run).

Each row's text is a role sentence, ``Please answer the following question: {prompt} using the following context:
{context}. `` and the answer rule (a context ending with "." gives ".."), sent through HELM's multiple-choice
adapter with the empty nouns (``: {text}``, options ``A. A``, ``B. B``) after the instructions ``Answer A or B.``
(Right of Access: ``Answer A or B or C.``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_medhelm.catalogue import shc
from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Loaded

#: the question sentence the three share, between the role sentence and the answer rule
ASK = "Please answer the following question: {question} using the following context: {context}. "


def synt_benchmark(*, slug: str, name: str, file: str, role: str, rule: str, choices: tuple[str, ...],
                   labels: str, description: str, example: tuple[str, str, str]) -> Benchmark:
    """The :class:`Benchmark` of one of the three: ``role`` + :data:`ASK` + ``rule`` is medhelm's row text."""
    template = role + ASK + rule

    def build_instances(files: Mapping[str, Path]) -> Loaded:
        return shc.shc_instances(files, slug=slug, file=file, template=template, choices=choices)

    question, context, label = example
    return Benchmark(
        slug=slug,
        name=name,
        # medhelm 0.8.0 gives a category only; this subcategory of it is ours: requests for a patient's information
        subcategory="Organizing Workflow Processes",
        access="private",
        kind="closed",
        files=(
            DataFile(
                name=file,
                description=(
                    "CSV with a header line and the columns 'prompt' (the question), 'context' (the scenario) and "
                    f"'label' ({labels})"
                ),
            ),
        ),
        build_instances=build_instances,
        prompt=MultipleChoicePrompt(instructions=f"Answer {' or '.join(choices)}.", input_noun="", output_noun=""),
        metric=MULTIPLE_CHOICE_EXACT_MATCH,
        max_tokens=1,
        description=description,
        data_help=(
            "synthetic scenarios medhelm 0.8.0 evaluates but does not distribute (its run spec's data_path): use your "
            f"own file in this format, named {file}. Synthetic example row: "
            f"prompt,context,label / \"{question}\",\"{context}\",{label}"
        ),
        filters=shc.MERGED,
    )
