"""The results as terminal and Markdown tables (pytest_medhelm.report.tables)."""

from __future__ import annotations

import re

import pytest
from report_fixtures import MODELS, THINKER, reasoning_results, sample_results

from pytest_medhelm.report.reasoning import reasoning_note


@pytest.fixture(scope="module")
def results():
    return reasoning_results()


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


def test_the_markdown_leaderboard_includes_the_jurys_cost():
    from pytest_medhelm.cost import format_usd
    from pytest_medhelm.report.tables import markdown

    results = sample_results()
    text = markdown(results)
    header = next(line for line in text.splitlines() if line.startswith("| model "))
    assert [c.strip() for c in header.strip("|").split("|")][-3:] == ["model cost", "jury cost", "total cost"]
    for row in results["models"]:
        line = next(line for line in text.splitlines() if line.startswith(f"| {row['model']} "))
        cells = [c.strip() for c in line.strip("|").split("|")][-3:]
        assert cells == [format_usd(row["cost_usd"]), format_usd(row["jury_cost_usd"]),
                         format_usd(row["cost_usd"] + row["jury_cost_usd"])]
        assert row["jury_cost_usd"] > 0
    assert {r["model"] for r in results["models"]} == set(MODELS)
