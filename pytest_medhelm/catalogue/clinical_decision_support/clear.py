"""CLEAR: does a patient's clinical note show a history of a condition (alcohol dependence, depression, PTSD …)?
A = has a history, B = does not, C = uncertain. (HELM ``CLEARScenario``, ``clear``; Stanford, private.)

**Thirteen runs averaged.** HELM runs CLEAR once per condition (``clear:condition=<c>``), each read from its own
spreadsheet ``{condition}.xlsx`` (columns ``text``, ``result_human`` with 1 = has a history, 0 = does not,
2 = uncertain) and each capped at 100 instances by its run entry (``max_eval_instances=100``, which overrides the
command line's cap); the CLEAR score is the unweighted mean of the 13 condition accuracies.
Every instance names its condition in :attr:`Instance.subset`, so the aggregator averages condition means. The
per-condition cap cannot be expressed by ``Benchmark.max_instances`` (a cap on the whole benchmark), so the loader
applies HELM's sample inside each condition: when a condition has more than 100 rows it keeps
``np.random.RandomState(0).permutation(n)[:100]`` of them, in that order (HELM's ``downsample_eval_instances``).

**Instance text** (all rows are test): ``You are a medical assistant reviewing patient notes. Determine whether the
patient has a history of {condition}.⏎⏎Original Clinical Note:⏎{text}⏎⏎A. Has a history of {condition}⏎B. Does
not have a history of {condition}⏎C. Uncertain⏎⏎Answer:`` with ``{condition}`` from HELM's ``CONDITION_PROMPTS``
(e.g. "post-traumatic stress disorder (PTSD)") and ``{text}`` the stripped cell. The run has no input noun, so the
multiple-choice options are glued onto that text, right after ``Answer:``, and its instructions use the condition
slug with spaces (``post traumatic stress disorder``): ``Answer 'A' for 'Has a history of {c}', 'B' for 'Does not
have a history of {c}', or 'C' for 'Uncertain'⏎⏎{text}A. Has a history of …⏎B. …⏎C. Uncertain⏎Respond only with
'A', 'B', or 'C'. Do not add any other text, punctuation, or symbols:``.

**Where we differ from HELM's reading (pandas), on malformed sheets only.** pandas turns an empty cell into NaN, and
``str(NaN)`` is ``"nan"``: HELM keeps a row with an empty ``text`` (the note reads "nan") and, once one
``result_human`` cell of a sheet is empty, the whole column becomes float, every label reads "1.0" / "0.0", maps to
no option, and every instance of that condition scores 0 whatever the answer. Here a row with an empty ``text`` or
``result_human`` is skipped and counted (``Loaded.removed``), labels are read as numbers (1, 1.0 and "1" alike),
and a label other than 0, 1, 2 is a :class:`DataError` naming the row. Ids: ``<condition>-<spreadsheet row>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.catalogue.sampling import helm_sample
from pytest_medhelm.catalogue.user_files import read_xlsx_rows
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
from pytest_medhelm.prompting import MultipleChoicePrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "clear"
#: HELM's conditions, in the order of its ``CONDITIONS`` list and of the run entries
CONDITION_PROMPTS = {
    "alcohol_dependence": "alcohol dependence",
    "attention_deficit_hyperactivity_disorder": "attention deficit hyperactivity disorder (ADHD)",
    "bipolar_disorder": "bipolar disorder",
    "chronic_pain": "chronic pain",
    "homelessness": "homelessness",
    "liver_disease": "liver disease",
    "major_depression": "major depression",
    "personality_disorder": "personality disorder",
    "post_traumatic_stress_disorder": "post-traumatic stress disorder (PTSD)",
    "substance_use_disorder": "substance use disorder",
    "suicidal_behavior": "suicidal behavior",
    "tobacco_dependence": "tobacco dependence",
    "unemployment": "unemployment",
}
CONDITIONS = tuple(CONDITION_PROMPTS)
#: HELM's run entries cap each condition at 100 instances
PER_CONDITION_CAP = 100
LABELS = {1: 0, 0: 1, 2: 2}  # result_human -> option index (1 -> A, 0 -> B, 2 -> C)


def condition_file(condition: str) -> str:
    return f"{condition}.xlsx"


def choices_for(condition: str) -> tuple[str, str, str]:
    text = CONDITION_PROMPTS[condition]
    return (f"Has a history of {text}", f"Does not have a history of {text}", "Uncertain")


def _label(value: object, path: Path, where: str) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:  # a text or a number; anything else (a date cell, say) is no label
        number = float(value) if isinstance(value, (str, int, float)) else math.nan
    except ValueError:
        number = math.nan
    if number not in (0.0, 1.0, 2.0):
        raise DataError(path, where, f"'result_human' must be 1 (has a history), 0 (does not) or 2 (uncertain), "
                                     f"got {value!r}")
    return int(number)


def read_condition(path: Path, condition: str, loaded: Loaded) -> list[Instance]:
    text_prompt = CONDITION_PROMPTS[condition]
    choices = choices_for(condition)
    instances = []
    for row in read_xlsx_rows(path, ("text", "result_human")):
        where = f"row {row.number}"
        cell = row["text"]
        text = "" if cell is None else str(cell).strip()
        label = _label(row["result_human"], path, where)
        if not text or label is None:
            loaded.note_removed("empty 'text' or 'result_human' cell (skipped; see the module docstring)")
            continue
        input_text = (
            f"You are a medical assistant reviewing patient notes. "
            f"Determine whether the patient has a history of {text_prompt}.\n\n"
            f"Original Clinical Note:\n"
            f"{text}\n\n"
            f"A. Has a history of {text_prompt}\n"
            f"B. Does not have a history of {text_prompt}\n"
            f"C. Uncertain\n\n"
            f"Answer:"
        )
        correct = LABELS[label]
        instances.append(
            Instance(
                id=f"{condition}-{row.number}",
                input=input_text,
                references=(choices[correct],),
                choices=choices,
                correct=correct,
                subset=condition,
                benchmark=SLUG,
            )
        )
    return instances


def build_instances(files: Mapping[str, Path]) -> Loaded:
    loaded = Loaded(slug=SLUG)
    for condition in CONDITIONS:
        instances = read_condition(data_file(files, condition_file(condition)), condition, loaded)
        sample = helm_sample(instances, PER_CONDITION_CAP)
        loaded.note_removed(
            f"beyond HELM's cap of {PER_CONDITION_CAP} per condition (np.random.RandomState(0) sample)",
            len(instances) - len(sample),
        )
        loaded.extend(sample)
    return loaded.done()


#: HELM's output noun of the CLEAR runs
OUTPUT_NOUN = "Respond only with 'A', 'B', or 'C'. Do not add any other text, punctuation, or symbols"


def instructions(condition: str) -> str:
    """HELM's instructions of a condition's run: the condition slug with spaces, not its prompt text."""
    shown = condition.replace("_", " ")
    return (
        f"Answer 'A' for 'Has a history of {shown}', "
        f"'B' for 'Does not have a history of {shown}', or "
        f"'C' for 'Uncertain'"
    )


def condition_prompt(condition: str) -> MultipleChoicePrompt:
    """The multiple-choice adapter of one condition run, as HELM builds it (no input noun: option A is glued on)."""
    return MultipleChoicePrompt(instructions=instructions(condition), input_noun=None, output_noun=OUTPUT_NOUN)


#: the adapter of each condition run
RUN_PROMPTS = {condition: condition_prompt(condition) for condition in CONDITIONS}


@dataclass(frozen=True)
class ClearPrompt:
    """HELM's CLEAR prompt (a :class:`~pytest_medhelm.prompting.PromptTemplate`): an instance is rendered by the
    adapter of its condition's run, :attr:`Instance.subset`."""

    def render(self, instance: Instance) -> str:
        prompt = RUN_PROMPTS.get(instance.subset) or condition_prompt(instance.subset)
        return prompt.render(instance)


BENCHMARK = Benchmark(
    slug=SLUG,
    name="CLEAR",
    subcategory="Supporting Diagnostic Decisions",
    access="private",
    kind="closed",
    files=tuple(
        DataFile(
            name=condition_file(condition),
            description=(
                "Excel workbook; first sheet with a header row and the columns 'text' (the clinical note) and "
                "'result_human' (1 = has a history, 0 = does not, 2 = uncertain); one workbook per condition: "
                + ", ".join(condition_file(c) for c in CONDITIONS)
            ),
        )
        for condition in CONDITIONS
    ),
    build_instances=build_instances,
    prompt=ClearPrompt(),
    metric=MULTIPLE_CHOICE_EXACT_MATCH,
    max_tokens=1,
    description="Decide whether a clinical note shows a history of one of 13 conditions (13 runs averaged).",
    data_help=(
        "private Stanford dataset (human-labelled CLEAR notes), not distributed: use your institution's own "
        "workbooks in this format, one per condition. Synthetic example row of alcohol_dependence.xlsx: "
        "text | result_human / \"Synthetic note: drinks a six-pack daily for 10 years, prior withdrawal "
        "seizure.\" | 1"
    ),
    filters=(
        "rows with an empty 'text' or 'result_human' cell; rows beyond HELM's cap of 100 per condition "
        "(np.random.RandomState(0) sample)"
    ),
)
