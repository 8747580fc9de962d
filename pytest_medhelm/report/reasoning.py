"""What a run says of its reasoning models (docs/reasoning.md): pytest's header before anything is sent, the
summary's and the reports' note, the results' ``run.reasoning``, and once per model how many answers ran out::

    {"budget": 200, "effort": "low", "default_budget": 4096,
     "models": {"openai/o3-mini": {"family": "openai", "budget": 200, "effort": "low", "source": "option"}},
     "judges": {}}

Reasoning tokens are output tokens (OpenAI's ``completion_tokens`` and Anthropic's ``output_tokens`` hold them),
priced as such; the model rows show them apart (``reasoning_tokens``) with the answers that ran out
(``n_ran_out``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from pytest_medhelm.report.record_base import Record, about, many

#: how a family's request is described
_SENT = {"openai": "max_completion_tokens = answer limit + {budget}", "anthropic": "thinking budget_tokens {budget}",
         "gemini": "thinking budget {budget} on top of the answer limit",
         "served": "max_tokens = answer limit + {budget}"}
_SOURCES = {"option": "--medhelm-reasoning-budget", "default": "the default; --medhelm-reasoning-budget sets another",
            "effort": "from --medhelm-reasoning-effort", "none": "the references' request: no room to think"}


class ReasoningModel(Record):
    """How the run treated one model as a reasoning model."""

    family: str = Field(description="openai, anthropic, gemini or served (docs/reasoning.md)")
    budget: int = about("reasoning tokens allowed on top of each answer limit (0: none)", 0)
    effort: str | None = about("the reasoning_effort sent (null: none)")
    source: str = about("where the budget came from: option, default, effort or none", "none")


class ReasoningSettings(Record):
    """``--medhelm-reasoning-budget`` / ``--medhelm-reasoning-effort`` and the models treated as reasoning models."""

    budget: int | None = about("--medhelm-reasoning-budget as given (null: not given)")
    effort: str | None = about("--medhelm-reasoning-effort as given (null: not given)")
    default_budget: int = about("the budget a reasoning model gets when none is given (default mode)", 0)
    models: dict[str, ReasoningModel] = many("the models under test treated as reasoning models", dict)
    judges: dict[str, ReasoningModel] = many("the judges and graders treated as reasoning models", dict)


def _of(spec: Any) -> ReasoningModel:
    reasoning = spec.reasoning
    return ReasoningModel(family=reasoning.family, budget=reasoning.budget, effort=reasoning.effort or None,
                          source=reasoning.source)


def reasoning_record(budget: int | None, effort: str | None, models: Iterable[Any],
                     judges: Iterable[Any] = ()) -> ReasoningSettings | None:
    """``run.reasoning`` from the run's options and its specs (``ModelSpec``); None when no option was given and
    no model is a reasoning model."""
    from pytest_medhelm.sending.reasoning import DEFAULT_BUDGET

    thinking = {spec.name: _of(spec) for spec in models if spec.reasoning is not None}
    judging = {spec.name: _of(spec) for spec in judges if spec.reasoning is not None}
    if budget is None and effort is None and not thinking and not judging:
        return None
    return ReasoningSettings(budget=budget, effort=effort, default_budget=DEFAULT_BUDGET, models=thinking,
                             judges=judging)


def _described(name: str, model: ReasoningModel) -> str:
    sent = _SENT.get(model.family, "{budget}").format(budget=f"{model.budget:,} reasoning tokens")
    effort = f", reasoning_effort {model.effort}" if model.effort else ""
    return f"{name} ({model.family}: {sent}{effort}; {_SOURCES.get(model.source, model.source)})"


def reasoning_note(record: ReasoningSettings | Mapping[str, Any] | None) -> str | None:
    """One sentence for pytest's header, the summary and the reports; None when the run had no reasoning model."""
    if not record:
        return None
    record = record if isinstance(record, ReasoningSettings) else ReasoningSettings.model_validate(record)
    if not record.models and not record.judges:
        return ("Reasoning options given, but no model of this run is a reasoning model (docs/reasoning.md says "
                "which are).")
    parts = [_described(name, model) for name, model in record.models.items()]
    parts += [f"judge {_described(name, model)}" for name, model in record.judges.items()]
    return "Reasoning models: " + "; ".join(parts) + ". Reasoning tokens are priced as output tokens."


def ran_out_lines(models: Iterable[Any], record: ReasoningSettings | None) -> list[str]:
    """Once per model whose answers ran out before they began: how many, the budget, what to do."""
    lines = []
    for row in models:
        if not row.n_ran_out:
            continue
        treated = record.models.get(row.model) if record is not None else None
        room = (f"reasoning budget {treated.budget:,} tokens" if treated is not None and treated.budget
                else "no reasoning budget")
        lines.append(f"medhelm: {row.model}: {row.n_ran_out} of {row.n_answers} answers used the whole token "
                     f"limit before answering ({room}); raise --medhelm-reasoning-budget")
    return lines


def merged_reasoning(records: Iterable[tuple[str, ReasoningSettings | None]]) -> ReasoningSettings | None:
    """The ``run.reasoning`` of runs merged into one (``(file, its run.reasoning)`` pairs): the union of their
    reasoning models, judges and graders. One model treated differently by two inputs (another budget, effort or
    family) raises ValueError naming both: its answers were given different room, and are not one measurement. The
    options are kept when every input gave the same, else null (each model's entry says what it got)."""
    given = [(label, record) for label, record in records]
    present = [(label, record) for label, record in given if record is not None]
    if not present:
        return None
    merged = ReasoningSettings(default_budget=present[0][1].default_budget)
    budgets = {record.budget if record is not None else None for _label, record in given}
    efforts = {record.effort if record is not None else None for _label, record in given}
    merged.budget = budgets.pop() if len(budgets) == 1 else None
    merged.effort = efforts.pop() if len(efforts) == 1 else None
    seen: dict[tuple[str, str], str] = {}
    for label, record in present:
        for role, mine, theirs in (("model", merged.models, record.models), ("judge", merged.judges, record.judges)):
            for name, model in theirs.items():
                if name in mine and mine[name] != model:
                    raise ValueError(f"{role} {name!r} ran as a reasoning model with {_setting(mine[name])} in "
                                     f"{seen[(role, name)]} but {_setting(model)} in {label}: its answers are not "
                                     "one measurement")
                mine.setdefault(name, model)
                seen.setdefault((role, name), label)
    return merged


def _setting(model: ReasoningModel) -> str:
    return (f"family {model.family}, budget {model.budget}" + (f", effort {model.effort}" if model.effort else "")
            + f" ({model.source})")
