"""EHRSQL under ``--medhelm-compat medhelm`` (medhelm 0.8.0's ``ehr_sql``) against HELM 0.5.16 and our default.

The fork changed three things (spec ``medhelm-0.8-additions.md`` §10.2): its instructions (the exact block is the
reference file ``prompts/medhelm08_ehr_sql_instructions_block.txt``, cut from a prompt the fork rendered), the
unanswerable questions (gold ``"null"``) dropped, and the gold SQL run with ``current_time`` replaced by
``'2105-12-31 23:59:00'`` and without HELM's fallback to the template ``value``. The run tests go through the
plugin as users run it, against our test server and a real SQLite database; the expected prompts are rendered
here from the reference file (medhelm) and from HELM's instructions written out (default and helm, unchanged).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import (
    BENCHMARKS,
    ROUTE_QUERY,
    SCHEMA_IN_PROMPT,
    entry,
    load,
    make_database,
    sql_instance,
    write_ehrsql,
)
from pytester_runs import SHARED_DATA, SUITE

from pytest_medhelm.metrics.ehrsql import EHRSQL_EXECUTION_ACCURACY, medhelm_gold_sql

REFERENCE = SHARED_DATA.parent / "reference" / "prompts" / "medhelm08_ehr_sql_instructions_block.txt"

#: HELM 0.5.16's instructions (run spec ``get_ehr_sql_run_spec``), the default's and helm's
HELM_INSTRUCTIONS = (
    "You are a highly skilled AI specializing in medical SQL queries. Given a database schema and a medical "
    "question, generate a valid SQL query that retrieves the required information from the database. Output "
    "only the SQL query without explanations.\n\nInput: A database schema followed by a natural language "
    "question.\nOutput: A valid SQL query ending with ;. Only return SQL query, don't add additional text.\n\n"
    "If the question is unanswerable, return an empty string without additional text or comments.\n\n"
)

# the three questions of the run, and what the model answers to each
NOW = "which drugs were started more than a year ago?"
#: true for every medication under the fork's fixed "now" (2105-12-31), for none under SQLite's clock (a time of
#: day, read as 2000-01-01 by datetime()): the gold result is empty under HELM, whose value fallback then applies
NOW_GOLD = ("select distinct medication.drugname from medication "
            "where medication.drugstarttime < datetime(CURRENT_TIME, '-1 year')")
WARFARIN = "what is the route of warfarin 5 mg?"
WARFARIN_GOLD = "select medication.routeadmin from medication where medication.drugname = 'warfarin 5 mg'"
WEATHER = "what is the weather tomorrow?"
ANSWERS = {NOW: "SELECT DISTINCT drugname FROM medication;", WARFARIN: "", WEATHER: ""}

# expected per mode: (instance ids, {id: score or None = not scored}, n scored, mean)
EXPECTED = {
    # HELM: "now" has an empty gold result, replaced by the value ["x"]: 0; warfarin's value ["warfarin 5 mg"]
    # is not an empty result, so the empty answer scores 0; the unanswerable question with an empty answer: 1
    "helm": ({"now1", "warf2", "null3"}, {"now1": 0.0, "warf2": 0.0, "null3": 1.0}, 3, 1 / 3),
    # medhelm: "now" is run at 2105-12-31: every drug, matched; warfarin: empty gold, empty answer: 1; no null3
    "medhelm": ({"now1", "warf2"}, {"now1": 1.0, "warf2": 1.0}, 2, 1.0),
    # default: both answerable gold results are empty on this database: not scored
    "default": ({"now1", "warf2", "null3"}, {"now1": None, "warf2": None, "null3": 1.0}, 1, 1.0),
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rendered(instructions_block: str, question: str) -> str:
    """HELM's generation adapter by hand: instructions + blank line, the nouns, the input with its whitespace."""
    text = f"-- Database Schema:\n{SCHEMA_IN_PROMPT}\n\n-- {' ' * 20}Question:\n{question}\n\n"
    return f"{instructions_block}Medical Question + Schema: {text}\nSQL Query:"


@pytest.fixture
def medhelm_block() -> str:
    if not REFERENCE.is_file():
        pytest.skip("../shared/reference is absent (medhelm 0.8.0's EHRSQL instruction block)")
    return REFERENCE.read_text(encoding="utf-8")


def write_data(data: Path) -> None:
    write_ehrsql(data,
                 valid=[entry("now1", NOW, NOW_GOLD, {"drug": "x"}),
                        entry("warf2", WARFARIN, WARFARIN_GOLD, {"drug_name": "warfarin 5 mg"})],
                 test=[entry("null3", WEATHER, "null", impossible=True)])


def answer(body: dict) -> str:
    prompt = body["messages"][0]["content"]
    [question] = [q for q in ANSWERS if f"Question:\n{q}\n" in prompt]
    return ANSWERS[question]


# ------------------------------------------------------------------------------------------------ through the plugin
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_ehrsql_prompts_instances_and_scores_per_mode(pytester: pytest.Pytester, medhelm_block: str,
                                                      xdist: list[str]) -> None:
    from pytest_medhelm.testing.server import running_server

    data = pytester.path / "data"
    write_data(data)
    expected_block = {"helm": HELM_INSTRUCTIONS, "default": HELM_INSTRUCTIONS, "medhelm": medhelm_block}
    questions = {"now1": NOW, "warf2": WARFARIN, "null3": WEATHER}
    # under xdist, medhelm's mode alone: the option reaches the workers, which collect its instances (another set
    # than the default's) as the controller does; every mode's prompts and scores are the serial variant's
    modes = {"medhelm": EXPECTED["medhelm"]} if pytester_runs.starts_xdist(xdist) else EXPECTED
    for compat, (ids, scores, n, mean) in modes.items():
        out = pytester.path / f"{compat}.json"
        with running_server(answer="x") as server:
            server.set_answer(answer)
            run = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/x", "--medhelm-api-base",
                                    server.url, "--medhelm-data-dir", str(data), "--medhelm-data-unverified", "ehrsql",
                                    "--medhelm-benchmark", "ehrsql", "--medhelm-cache", "off", "--medhelm-compat",
                                    compat, "--medhelm-json", str(out), *xdist)
            assert run.ret == 0, run.stdout.str()[-3000:]
            sent = sorted(r["json"]["messages"][0]["content"] for r in server.requests)
        report = json.loads(out.read_text())
        assert report["run"]["compat"] == compat
        by_id = {i["instance_id"]: i for i in report["instances"]}
        assert set(by_id) == ids, compat
        # the prompt sent, byte for byte, and its recorded hash
        assert sent == sorted(rendered(expected_block[compat], questions[i]) for i in ids), compat
        for instance_id, record in by_id.items():
            assert record["prompt_sha256"] == sha(rendered(expected_block[compat], questions[instance_id]))
            assert record["score"] == scores[instance_id], (compat, instance_id, record)
        [bench] = report["benchmarks"]
        assert (bench["n"], bench["mean"]) == (n, pytest.approx(mean)), compat


def test_list_and_dry_run_count_medhelm_instances(pytester: pytest.Pytester, medhelm_block: str) -> None:
    """``--medhelm-list`` counts the instances with the run's loader, and the dry run plans the fork's requests."""
    from pytest_medhelm.tokens import TokenCounter

    data = pytester.path / "data"
    write_data(data)
    common = ["--medhelm-data-dir", str(data), "--medhelm-data-unverified", "ehrsql", "-p", "no:cacheprovider"]
    counts = {}
    for compat in ("helm", "medhelm", "default"):
        listed = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-compat", compat, *common)
        assert listed.ret == 0, listed.stdout.str()[-2000:]
        [row] = [line for line in listed.stdout.lines if line.startswith("ehrsql ")]
        counts[compat] = re.split(r"\s{2,}", row.strip())[-1]
    assert counts == {"helm": "3", "default": "3", "medhelm": "2 (1 filtered)"}

    dry = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/gpt-4o-mini", "--medhelm-benchmark",
                            "ehrsql", "--medhelm-compat", "medhelm", "--medhelm-dry-run", *common)
    assert dry.ret == 0, dry.stdout.str()[-2000:]
    [row] = [line.split() for line in dry.stdout.lines if line.startswith("ehrsql ")]
    counter = TokenCounter()
    expected_tokens = sum(counter("openai/gpt-4o-mini", rendered(medhelm_block, q)) for q in (NOW, WARFARIN))
    assert (row[2], row[3]) == ("2", f"{expected_tokens:,}")


# ------------------------------------------------------------------------------------------------ the pieces
def test_loader_drops_the_unanswerable_questions_only_under_medhelm(tmp_path: Path) -> None:
    write_data(tmp_path)
    files = {name: tmp_path / "ehrsql" / name for name in ("valid.json", "test.json", "eicu.sql", "eicu.sqlite")}
    bench = BENCHMARKS["ehrsql"]
    fork = bench.instance_builder("medhelm")(files)
    assert [i.id for i in fork] == ["now1", "warf2"]
    assert fork.removed == {"unanswerable questions (gold query \"null\"): medhelm 0.8.0's scenario drops them": 1}
    for compat in ("default", "helm"):
        assert [i.id for i in bench.instance_builder(compat)(files)] == ["now1", "warf2", "null3"]
    assert [i.id for i in load("ehrsql", tmp_path)] == ["now1", "warf2", "null3"]


def test_the_default_and_helm_prompts_are_unchanged(tmp_path: Path, medhelm_block: str) -> None:
    write_data(tmp_path)
    first = load("ehrsql", tmp_path)[0]
    bench = BENCHMARKS["ehrsql"]
    assert bench.render_prompt(first) == bench.render_prompt(first, "default") == bench.render_prompt(first, "helm")
    assert bench.render_prompt(first, "helm") == rendered(HELM_INSTRUCTIONS, NOW)
    assert bench.render_prompt(first, "medhelm") == rendered(medhelm_block, NOW)


def test_gold_current_time_is_replaced_in_any_case() -> None:
    assert medhelm_gold_sql("select datetime(current_time), CURRENT_TIME, Current_Time") == (
        "select datetime('2105-12-31 23:59:00'), '2105-12-31 23:59:00', '2105-12-31 23:59:00'")
    assert medhelm_gold_sql(ROUTE_QUERY) == ROUTE_QUERY


@pytest.mark.parametrize(
    ("gold", "value", "answer", "helm", "medhelm"),
    [
        # the gold rows exist only at the fork's "now"; HELM falls back to the value
        (NOW_GOLD, {"drug": "x"}, "SELECT DISTINCT drugname FROM medication", 0.0, 1.0),
        # an empty gold result: HELM compares with the template values, the fork with nothing
        (WARFARIN_GOLD, {"drug_name": "warfarin 5 mg"}, "", 0.0, 1.0),
        # where the fork changed nothing, the two agree
        (ROUTE_QUERY, {"drug_name": "aspirin 81 mg"}, "SELECT routeadmin FROM medication WHERE drugname = "
                                                      "'aspirin 81 mg'", 1.0, 1.0),
        ("select count(*) from patient", {}, "SELECT 1 WHERE 0", 0.0, 0.0),
    ],
    ids=["current_time", "empty-gold-empty-answer", "plain", "wrong"],
)
def test_gold_scoring_helm_vs_medhelm_on_a_real_sqlite(tmp_path: Path, gold: str, value: dict, answer: str,
                                                       helm: float, medhelm: float) -> None:
    db = make_database(tmp_path / "eicu.sqlite")
    instance = sql_instance(db, gold, value)
    got = {compat: EHRSQL_EXECUTION_ACCURACY.score(answer, instance, compat).value for compat in ("helm", "medhelm")}
    assert got == {"helm": helm, "medhelm": medhelm}
    with sqlite3.connect(db) as connection:  # the database itself is what makes the two differ
        assert connection.execute(WARFARIN_GOLD).fetchall() == []
