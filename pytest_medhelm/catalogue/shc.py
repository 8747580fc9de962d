"""The Stanford Health Care (SHC) multiple-choice benchmarks: one loader and one factory for the ten of them.

MedConfInfo, PrivacyDetection, ProxySender, BMT-Status, ADHD-Behavior, ADHD-MedEffects, HospiceReferral,
ClinicReferral, CDI-QA and ENT-Referral are all HELM ``SHC*MedScenario`` classes over one private CSV each
(``prompt`` or ``question``, ``context``, ``label``), read with ``csv.DictReader``. Each benchmark module is a
single :func:`shc_benchmark` call that names its file, its prompt template and its synthetic example row.

**Instances** (:func:`shc_instances`): each row becomes the text ``template.format(question=…, context=…,
counter=…)``; HELM stores ``data[prompt] = label`` in a dict, so a prompt met twice keeps the place of its first
row and the label of its last (counted in ``Loaded.removed``). ``counter`` numbers the rows for the templates that
start with it: ``"every"`` (ClinicReferral: +1 on every row) or ``"kept"`` (ENT-Referral: rows with an empty
``label`` are skipped, counted, and do not advance it). Labels must be one of the choices exactly (HELM asserts
it); ids are ``row<N>`` (the first row of the prompt).

**Prompt**: HELM's multiple-choice adapter with the input noun ``""`` and the output noun ``""`` (its empty-noun
quirk), instructions ``Answer A or B.`` (``Answer A, B, or C.`` with three choices), and the reference texts are the
letters themselves, so the options read ``A. A``, ``B. B``: ``Answer A or B.⏎⏎: {text}⏎A. A⏎B. B⏎:``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_csv_rows
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

#: the family's question sentence (HELM's text, with its space before the comma)
ASK = "Provide an answer to the following question: {question} with the following context: {context} , "
#: the family's answer instruction
YES_NO = (
    "Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional details or response, "
    "just a simple A or B response."
)
#: the template most SHC scenarios use
STANDARD = ASK + YES_NO
#: what the loader removes when prompts can repeat (documentation)
MERGED = "rows that repeat an earlier prompt word for word: merged into its first row (HELM keys instances by prompt " \
         "text; the last row's label wins)"


def shc_instances(
    files: Mapping[str, Path],
    *,
    slug: str,
    file: str,
    template: str,
    choices: tuple[str, ...] = ("A", "B"),
    question_column: str = "prompt",
    counter: str = "",
) -> Loaded:
    """HELM's ``create_benchmark`` of the SHC scenarios, then one instance per distinct prompt (module docstring)."""
    path = data_file(files, file)
    rows = read_csv_rows(path, (question_column, "context", "label"))
    loaded = Loaded(slug=slug)
    by_prompt: dict[str, list[Any]] = {}  # prompt -> [first row, label]
    n = 1
    for row in rows:
        label = row["label"]
        if counter == "kept" and label == "":
            loaded.note_removed("empty 'label' (HELM skips these rows)")
            continue
        if label not in choices:
            raise DataError(
                path, row.where, f"'label' must be one of {', '.join(map(repr, choices))}, got {label!r}"
            )
        prompt = template.format(question=row[question_column], context=row["context"], counter=n)
        if counter:
            n += 1
        if prompt in by_prompt:
            entry = by_prompt[prompt]
            if entry[1] != label:
                loaded.note_removed("repeated prompt with another label: the last row's label is kept (as HELM's dict)")
            else:
                loaded.note_removed("repeated prompt: merged into its first row (HELM keys instances by prompt text)")
            entry[1] = label
        else:
            by_prompt[prompt] = [row, label]
    for prompt, (row, label) in by_prompt.items():
        loaded.append(
            Instance(
                id=f"row{row.number}",
                input=prompt,
                references=(label,),
                choices=choices,
                correct=choices.index(label),
                benchmark=slug,
            )
        )
    return loaded.done()


def _instructions(choices: tuple[str, ...]) -> str:
    """``Answer A or B.``, ``Answer A, B, or C.``: HELM's instructions for these choices."""
    if len(choices) == 2:
        return f"Answer {choices[0]} or {choices[1]}."
    return f"Answer {', '.join(choices[:-1])}, or {choices[-1]}."


def shc_benchmark(
    *,
    slug: str,
    name: str,
    subcategory: str,
    file: str,
    template: str,
    description: str,
    example: tuple[str, str, str],
    context: str = "the clinical note",
    question: str = "the question",
    labels: str = "'A' = yes, 'B' = no",
    choices: tuple[str, ...] = ("A", "B"),
    question_column: str = "prompt",
    counter: str = "",
    filters: str | None = None,
    template_medhelm: str | None = None,
) -> Benchmark:
    """The :class:`Benchmark` of one SHC scenario.

    ``template`` is the instance text with ``{question}``, ``{context}`` and ``{counter}`` placeholders (byte for
    byte HELM's f-string); ``example`` is a synthetic (question, context, label) row for the documentation;
    ``context``, ``question`` and ``labels`` describe the columns in the file's description; ``filters`` what the
    loader removes (by default the repeated prompts it merges; nothing when a counter makes every prompt unique);
    ``template_medhelm`` the instance text under ``--medhelm-compat medhelm`` when medhelm 0.8.0 changed it.
    """

    def build_instances(files: Mapping[str, Path]) -> Loaded:
        return shc_instances(
            files, slug=slug, file=file, template=template, choices=choices, question_column=question_column,
            counter=counter,
        )

    def build_instances_medhelm(files: Mapping[str, Path]) -> Loaded:
        return shc_instances(
            files, slug=slug, file=file, template=template_medhelm or template, choices=choices,
            question_column=question_column, counter=counter,
        )

    example_question, example_context, example_label = example
    if filters is None:
        filters = "" if counter else MERGED
    return Benchmark(
        slug=slug,
        name=name,
        subcategory=subcategory,
        access="private",
        kind="closed",
        files=(
            DataFile(
                name=file,
                description=(
                    f"CSV with a header line and the columns '{question_column}' ({question}), 'context' ({context}) "
                    f"and 'label' ({labels})"
                ),
            ),
        ),
        build_instances=build_instances,
        build_instances_medhelm=build_instances_medhelm if template_medhelm is not None else None,
        prompt=MultipleChoicePrompt(instructions=_instructions(choices), input_noun="", output_noun=""),
        metric=MULTIPLE_CHOICE_EXACT_MATCH,
        max_tokens=1,
        description=description,
        data_help=(
            "private Stanford Health Care dataset, not distributed: use your institution's own file in this format "
            f"(HELM's name for it is {file}). Synthetic example row: "
            f"{question_column},context,label / \"{example_question}\",\"{example_context}\",{example_label}"
        ),
        filters=filters,
    )
