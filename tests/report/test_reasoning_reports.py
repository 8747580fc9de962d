"""What the reports say of reasoning models, from the results alone: the per model and per benchmark counts
(aggregate.py), the note and the ran-out lines (report/reasoning.py), the terminal and Markdown tables, the HTML
(markup; the real Chromium is in test_html.py) and merged runs' ``run.reasoning``. The reserved reasoning budget
of ``--medhelm-budget`` and the dry run's estimate are tested with their modules (tests/test_budget.py,
tests/test_dryrun.py); their runs through pytest are in tests/run/test_reasoning_runs.py."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

import pytest
from report_fixtures import MODELS, RAN_OUT_IDS, THINKER, reasoning_results

from pytest_medhelm.report.aggregate import benchmark_results, model_summaries
from pytest_medhelm.report.reasoning import (
    ReasoningSettings,
    merged_reasoning,
    ran_out_lines,
    reasoning_note,
    reasoning_record,
)
from pytest_medhelm.values import Reasoning

CATALOGUE = {"b1": SimpleNamespace(category="medical_research", subcategory="s", metric=SimpleNamespace(name="em")),
             "b2": SimpleNamespace(category="medical_research", subcategory="s", metric=SimpleNamespace(name="em"))}
RAN_OUT = {"max_output_tokens": 101, "reasoning_budget": 100, "reasoning_tokens": 101}


def rec(bench: str, model: str, iid: str, score: float | None, **extra):
    return {"benchmark": bench, "model": model, "instance_id": iid, "score": score, "tokens_in": 5,
            "tokens_out": 3, "cost_usd": 0.0, **extra}


def spec(name: str, family: str | None, budget: int = 100, effort: str = "", source: str = "option"):
    return SimpleNamespace(name=name, reasoning=None if family is None else Reasoning(family, budget, effort, source))


@pytest.fixture(scope="module")
def results():
    return reasoning_results()


# ============================================================================================== the counts
def test_reasoning_tokens_are_summed_and_unknown_stays_null():
    records = [rec("b1", "think", "1", 1.0, reasoning_tokens=40, tokens_out=41),
               rec("b1", "think", "2", 0.0, reasoning_tokens=None),  # this server said nothing
               rec("b2", "think", "1", 0.0, reasoning_tokens=7, ran_out=RAN_OUT, answer=""),
               rec("b2", "think", "2", None, error="ModelError: down", reasoning_tokens=None),
               rec("b1", "plain", "1", 1.0), rec("b1", "plain", "2", 1.0, reasoning_tokens=None),
               rec("b1", "zero", "1", 1.0, reasoning_tokens=0)]
    rows = benchmark_results(records, CATALOGUE)
    summary = {s.model: s for s in model_summaries(rows, records)}
    think, plain, zero = summary["think"], summary["plain"], summary["zero"]
    assert (think.reasoning_tokens, think.n_answers, think.n_ran_out, think.tokens_out) == (47, 3, 1, 50)
    assert (plain.reasoning_tokens, plain.n_ran_out) == (None, 0)  # no server said: unknown, never 0
    assert zero.reasoning_tokens == 0  # a server that said 0 said it
    by = {(r.slug, r.model): r for r in rows}
    assert by[("b2", "think")].n_ran_out == 1 and by[("b2", "think")].n == 1  # a miss, scored as one
    assert "n_ran_out" in by[("b2", "think")].model_dump(exclude_unset=True)
    # where nothing ran out the row is written as a plain model's was
    assert all("n_ran_out" not in by[key].model_dump(exclude_unset=True)
               for key in (("b1", "think"), ("b1", "plain")))


# ============================================================================================== the sentences
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


# ============================================================================================== tables
def test_terminal_and_markdown_show_reasoning_tokens_beside_tokens_out_and_what_ran_out(results):
    from pytest_medhelm.report.tables import benchmark_table, leaderboard_table, markdown, terminal_sections

    header, rows = leaderboard_table(results)
    assert header[6:9] == ["tokens out", "reasoning tokens", "ran out"]
    by = {row[0]: row for row in rows}
    assert by[THINKER][6:9] == ["2397", "722", "2/18"] and by[MODELS[1]][7:9] == ["-", "0"]
    assert all(len(row) == len(header) for row in rows)
    _, bench_rows = benchmark_table(results)
    pubmedqa = next(row for row in bench_rows if row[0] == "pubmedqa")
    assert pubmedqa[2].endswith("n=6 (2 ran out)") and "ran out" not in pubmedqa[3]
    board = dict(terminal_sections(results))["leaderboard"]
    assert re.search(r"openai/o3-mini +0\.50 .* 2397 +722 +2/18 ", board), board
    text = markdown(results)
    note = reasoning_note(results["run"]["reasoning"])
    assert f"**{note}**" in text and "Reasoning tokens are priced as output tokens." in text
    assert f"- {THINKER}: 2 of 18 answers used the whole token limit" in text
    assert text.index(note or "") < text.index("### Leaderboard")


def test_a_plain_runs_tables_are_as_they_were(results):
    from report_fixtures import sample_results

    from pytest_medhelm.report.tables import leaderboard_table, markdown

    plain = sample_results()
    header, rows = leaderboard_table(plain)
    assert "reasoning tokens" not in header and all(len(row) == len(header) for row in rows)
    assert "Reasoning" not in markdown(plain) and "ran out" not in markdown(plain)


# ============================================================================================== HTML (markup)
def test_the_html_has_the_note_the_ran_out_lines_and_the_columns(results):
    from pytest_medhelm.report.html import render_html

    page = render_html(results)
    [note] = re.findall(r'<p class="note" id="reasoning">(.*?)</p>', page, re.S)
    assert "Reasoning tokens are priced as output tokens." in note
    assert f"<strong>{THINKER}: 2 of 18 answers used the whole token limit before answering" in note
    table = page.split('id="leaderboard-table"')[1].split("</table>")[0]
    heads = re.findall(r'<th scope="col">(.*?)</th>', table)
    assert heads[7:10] == ["Tokens out", "Reasoning tokens", "Ran out"]
    for row in re.findall(r"<tr>(<td>.*?)</tr>", table):
        assert len(re.findall(r"<td[ >]", row)) == len(heads)
    assert "<td>2,397</td><td>722</td><td>2/18</td>" in table


def test_a_hostile_model_name_in_the_reasoning_note_is_text():
    from pytest_medhelm.report.html import render_html

    hostile = 'openai/o3-<img src=x onerror="window.__pwned=1">'
    page = render_html(reasoning_results(model=hostile))
    note = re.findall(r'<p class="note" id="reasoning">(.*?)</p>', page, re.S)[0]
    assert "<img" not in note and "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in note


def test_a_plain_runs_html_has_no_reasoning():
    from report_fixtures import sample_results

    from pytest_medhelm.report.html import render_html

    page = render_html(sample_results())
    assert 'id="reasoning"' not in page and "Reasoning tokens" not in page


# ============================================================================================== merged runs
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


def test_merge_results_keeps_run_reasoning_and_refuses_a_conflict(results):
    from pytest_medhelm.compare.merge import MergeError, merge_results

    thinker = [i for i in results["instances"] if i["model"] == THINKER]
    first = dict(copy.deepcopy(results), instances=thinker[: len(thinker) // 2])
    second = dict(copy.deepcopy(results), instances=thinker[len(thinker) // 2:])
    merged = merge_results([("1.json", first), ("2.json", second)])
    assert merged["run"]["reasoning"] == results["run"]["reasoning"]
    [row] = merged["models"]
    assert (row["reasoning_tokens"], row["n_ran_out"]) == (722, 2)
    assert [i["instance_id"] for i in thinker if i.get("ran_out")] == list(RAN_OUT_IDS)
    second["run"]["reasoning"]["models"][THINKER]["budget"] = 400
    with pytest.raises(MergeError, match="ran as a reasoning model"):
        merge_results([("1.json", first), ("2.json", second)])


