"""Reports a clinician can read: the question and the reference on request (never by default), and costs that
say "unknown" where no price is known, in the terminal, the Markdown summary and the HTML report alike."""

from __future__ import annotations

import json
import re

import pytest
from pytester_runs import run

XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


def model_args(server, data, *extra: str) -> list[str]:
    return ["--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
            *extra]


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_report_text_puts_question_and_reference_in_json_and_html(pytester, toy, server, mode):
    data = toy(4)  # q000 and q002: "yes" (A) is right; q001 and q003: "no" (B)
    out, page = pytester.path / "r.json", pytester.path / "r.html"
    result = run(pytester, *model_args(server, data, "--medhelm-report-text", "--medhelm-json", str(out),
                                       "--medhelm-html", str(page)), *mode)
    assert result.ret == 0, result.stdout.str()
    texts = {i["instance_id"]: (i["question"], i["reference"]) for i in json.loads(out.read_text())["instances"]}
    assert texts["q000"] == ("question 0?\nA. yes\nB. no", "A. yes")
    assert texts["q001"] == ("question 1?\nA. yes\nB. no", "B. no")
    html = page.read_text()
    assert "This report holds each instance's question and reference" in html
    assert "question 1?\\nA. yes\\nB. no" in html  # in the drill-down's data


def test_without_the_option_no_text_leaves_the_run(pytester, toy, server):
    data = toy(2)
    out, page = pytester.path / "r.json", pytester.path / "r.html"
    assert run(pytester, *model_args(server, data, "--medhelm-json", str(out), "--medhelm-html", str(page))).ret == 0
    assert all("question" not in i and "reference" not in i for i in json.loads(out.read_text())["instances"])
    html = page.read_text()
    assert "question 0?" not in html
    assert "Questions and references are not in this report" in html
    assert "run with --medhelm-report-text (ini: medhelm_report_text = true)" in html


def test_report_text_from_the_ini_file(pytester, toy, server):
    data = toy(2)
    pytester.makeini("[pytest]\nmedhelm_report_text = true\n")
    out = pytester.path / "r.json"
    assert run(pytester, *model_args(server, data, "--medhelm-json", str(out))).ret == 0
    assert {i["question"] for i in json.loads(out.read_text())["instances"]} == {
        "question 0?\nA. yes\nB. no", "question 1?\nA. yes\nB. no"}


def test_unknown_costs_say_unknown_in_every_report(pytester, toy, server):
    data = toy(4)  # openai/toy-model has no price anywhere; no judge is asked
    md, page = pytester.path / "summary.md", pytester.path / "r.html"
    result = run(pytester, *model_args(server, data, "--medhelm-markdown", str(md), "--medhelm-html", str(page)))
    assert result.ret == 0
    result.stdout.re_match_lines([r"model +win rate .* model cost +jury cost +total cost",
                                  r"openai/toy-model .* unknown +- +unknown$"])
    assert re.search(r"\| openai/toy-model .*\| unknown +\| - +\| unknown +\|", md.read_text())
    html = page.read_text()
    leaderboard = html.split('id="leaderboard-table"')[1].split("</table>")[0]
    assert leaderboard.count(">unknown<") == 2 and "<td>–</td>" in leaderboard
    # no chart with a made-up axis: a sentence saying why and what to do
    assert 'id="cost-chart"' not in html
    assert "No cost chart: openai/toy-model (cost unknown)" in html and "--medhelm-prices" in html
    for text in (result.stdout.str(), md.read_text(), html):
        assert "$0.0000" not in text and "$0.00" not in text


