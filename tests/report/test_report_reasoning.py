"""The run's reasoning settings, their note, ran-out lines and merged settings (pytest_medhelm.report.reasoning)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from report_fixtures import THINKER, reasoning_results

from pytest_medhelm.report.reasoning import (
    ReasoningSettings,
    merged_reasoning,
    ran_out_lines,
    reasoning_note,
    reasoning_record,
)
from pytest_medhelm.values import Reasoning


def spec(name: str, family: str | None, budget: int = 100, effort: str = "", source: str = "option"):
    return SimpleNamespace(name=name, reasoning=None if family is None else Reasoning(family, budget, effort, source))


@pytest.fixture(scope="module")
def results():
    return reasoning_results()


def test_the_note_names_each_reasoning_model_its_family_budget_and_source():
    record = reasoning_record(None, None, [spec("openai/o3-mini", "openai", 4096, source="default"),
                                           spec("openai/gpt-4o", None)],
                              [spec("anthropic/claude-sonnet-4", "anthropic", 2048, "medium", "effort")])
    assert record is not None
    assert record.model_dump(mode="json") == {
        "budget": None, "effort": None, "default_budget": 4096,
        "models": {"openai/o3-mini": {"family": "openai", "budget": 4096, "effort": None, "source": "default"}},
        "judges": {"anthropic/claude-sonnet-4": {"family": "anthropic", "budget": 2048, "effort": "medium",
                                                 "source": "effort"}}}
    assert reasoning_note(record) == (
        "Reasoning models: openai/o3-mini (openai: max_completion_tokens = answer limit + 4,096 reasoning tokens; "
        "the default; --medhelm-reasoning-budget sets another); judge anthropic/claude-sonnet-4 (anthropic: "
        "thinking budget_tokens 2,048 reasoning tokens, reasoning_effort medium; from --medhelm-reasoning-effort). "
        "Reasoning tokens are priced as output tokens.")
    # the same sentence from the JSON as it was written
    assert reasoning_note(record.model_dump(mode="json")) == reasoning_note(record)


def test_no_reasoning_model_and_no_option_is_no_record_and_no_note():
    assert reasoning_record(None, None, [spec("openai/gpt-4o", None)], [spec("openai/gpt-4o", None)]) is None
    assert reasoning_note(None) is None
    given = reasoning_record(300, None, [spec("openai/gpt-4o", None)])
    assert given is not None and given.budget == 300 and given.models == {}
    assert "no model of this run is a reasoning model" in (reasoning_note(given) or "")


def test_one_ran_out_line_per_model_whose_answers_ran_out(results):
    settings = ReasoningSettings.model_validate(results["run"]["reasoning"])
    rows = [SimpleNamespace(**m) for m in results["models"]]
    assert ran_out_lines(rows, settings) == [
        f"medhelm: {THINKER}: 2 of 18 answers used the whole token limit before answering (reasoning budget 40 "
        "tokens); raise --medhelm-reasoning-budget"]
    # a model the references' request left no room (compat helm): said so
    none = ReasoningSettings.model_validate(dict(results["run"]["reasoning"], models={
        THINKER: {"family": "openai", "budget": 0, "source": "none"}}))
    assert "(no reasoning budget)" in ran_out_lines(rows, none)[0]


def test_merged_runs_unite_their_reasoning_models_and_refuse_one_given_other_room():
    a = reasoning_record(100, None, [spec("openai/o3-mini", "openai", 100)])
    b = reasoning_record(100, None, [spec("openai/gpt-5", "openai", 100)],
                         [spec("openai/gpt-5-mini", "openai", 100)])
    merged = merged_reasoning([("a.json", a), ("b.json", b), ("plain.json", None)])
    assert merged is not None
    assert list(merged.models) == ["openai/o3-mini", "openai/gpt-5"] and list(merged.judges) == ["openai/gpt-5-mini"]
    assert merged.budget is None  # the inputs gave different options (one none): each model says what it got
    same = merged_reasoning([("a.json", a), ("a2.json", a)])
    assert same is not None and same.budget == 100
    assert merged_reasoning([("p.json", None), ("q.json", None)]) is None
    other = reasoning_record(200, None, [spec("openai/o3-mini", "openai", 200)])
    with pytest.raises(ValueError, match=r"model 'openai/o3-mini' ran as a reasoning model with family openai, "
                                         r"budget 100 \(option\) in a.json but family openai, budget 200 \(option\) "
                                         r"in c.json"):
        merged_reasoning([("a.json", a), ("c.json", other)])
