"""The run's core as users meet it: one sending path with and without xdist, a budget that holds across processes,
an item's accounting over every call it makes.

The inner runs are in-process (pytester_runs.run): nothing here needs a fresh interpreter (under ``-n 2`` the workers
are new ones anyway)."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
import pytester_runs
from pytester_runs import run as inner
from pytester_runs import toy_args
from toy_benchmark import TIMED_TEST  # the items that note when they started

from pytest_medhelm.testing.server import last_user_text, running_server

FOLLOW_UP_TEST = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        answer = medhelm_model.answer(medhelm_instance)
        # a follow-up question of the test body's own: not planned, sent from the process that runs the item
        medhelm_model.complete("Are you sure? " + medhelm_instance.input, max_tokens=1)
        assert_metric(answer, medhelm_instance)
''')

# $1 per completion token, nothing per prompt token: every toy request (one token out) costs exactly $1
DOLLAR_PER_ANSWER = '["openai/toy-model"]\ninput_per_million = 0.0\noutput_per_million = 1000000.0\n'


def priced_follow_ups(pytester, toy, n: int):
    """``n`` toy items that each ask a follow-up of their own, at $1 per answer: (data dir, prices file, JSON path)."""
    data = toy(n)
    pytester.makepyfile(test_toy=FOLLOW_UP_TEST)
    prices = pytester.path / "prices.toml"
    prices.write_text(DOLLAR_PER_ANSWER)
    return data, prices, pytester.path / "results.json"


@pytest.mark.e2e
def test_under_xdist_the_first_item_runs_before_the_last_answer_arrives(pytester, toy):
    data = toy(12)
    pytester.makepyfile(test_toy=TIMED_TEST)
    with running_server(answer="A", latency=0.25) as server:
        result = inner(pytester, *toy_args(server, data, "--medhelm-concurrency", "2", "-n", "2"))
        arrivals = sorted(r["received_at"] for r in server.requests)
        count = server.count
    assert result.ret == 0, result.stdout.str()
    assert count == 12  # one request per item: the workers asked nothing themselves
    starts = dict(json.loads(line) for line in (pytester.path / "item_times.jsonl").read_text().splitlines())
    assert len(starts) == 12
    # the controller sends in the background: a worker's first item started before the last request reached the
    # server (6 rounds of 0.25 s at concurrency 2)
    assert min(starts.values()) < arrivals[-1] - 0.5, (min(starts.values()), arrivals)


@pytest.mark.e2e
def test_with_and_without_xdist_the_run_prints_the_same_sending_lines(pytester, toy):
    data = toy(6)
    seen = {}
    for mode in (["-p", "no:xdist"], ["-n", "2"]):
        with running_server(answer="A", fail_matching={"question 1?": ("status", 500)}) as server:
            result = inner(pytester, *toy_args(server, data, "--medhelm-retries", "0", *mode))
        assert result.ret == 1, result.stdout.str()  # the failed request is its item's error
        lines = [re.sub(r"\([\d.]+/s, done in [\d.]+s\)", "(rate)", line) for line in result.stdout.lines
                 if line.startswith("medhelm answers:") or line.startswith("medhelm: ")]
        seen[mode[-1]] = lines
    assert seen["no:xdist"] == seen["2"], seen
    assert seen["2"] == ["medhelm answers: 6/6 (rate), 1 failed",  # (rates and times differ from run to run)
                         "medhelm: 1 server error(s), 1 request(s) failed for good"], seen


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_the_budget_holds_across_processes_when_items_ask_their_own_questions(pytester, toy, mode):
    """Each item asks its planned question (sent by the controller) and a follow-up of its own (sent by the worker
    that runs it): one ledger for every process, so the server never receives more than the $5 cap pays for."""
    data, prices, out = priced_follow_ups(pytester, toy, 10)
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, "--medhelm-prices", str(prices), "--medhelm-budget", "5",
                                           "--medhelm-json", str(out), *mode))
        count = server.count
    assert result.ret == 0, result.stdout.str()
    assert count == 5, result.stdout.str()
    report = json.loads(out.read_text())
    assert report["run"]["budget"]["spent_usd"] == 5.0
    counts = result.parseoutcomes()
    # every item ran: scored (its answer and its follow-up were paid for) or skipped (one of them was refused)
    assert sum(counts.get(k, 0) for k in ("passed", "missed", "skipped")) == 10, counts
    assert counts.get("skipped", 0) >= 5, counts
    result.stdout.fnmatch_lines(["*medhelm budget: spent $5* of $5*"])


def test_an_item_that_asks_twice_keeps_its_answer_and_adds_up_its_accounting(pytester, toy):
    data, prices, out = priced_follow_ups(pytester, toy, 2)
    with running_server(answer="A") as server:
        result = pytester_runs.run(pytester,
                                   *toy_args(server, data, "--medhelm-prices", str(prices), "--medhelm-json", str(out),
                                             "-p", "no:xdist"))
        prompts = [last_user_text(r["json"]) for r in server.requests]
    assert result.ret == 0, result.stdout.str()
    import hashlib

    benchmark_prompts = {hashlib.sha256(p.encode()).hexdigest() for p in prompts if not p.startswith("Are you")}
    assert len(prompts) == 4 and len(benchmark_prompts) == 2
    for record in json.loads(out.read_text())["instances"]:
        # the benchmark's answer and prompt, not the follow-up's ...
        assert record["answer"] == "A" and record["prompt_sha256"] in benchmark_prompts
        # ... and both calls accounted: two answers of one token at $1 each
        assert record["tokens_out"] == 2 and record["cost_usd"] == 2.0, record


ONE_SLOT_PLUGIN = textwrap.dedent('''
    from pytest_medhelm.values import ModelSpec

    URL = {url!r}

    def pytest_medhelm_model_spec(name, api_base, config):
        # a server that answers one request at a time, as a local llama.cpp server does
        return ModelSpec(name=name, litellm_model="openai/toy-model", api_base=URL, slots=1, identity=name)
''')


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_an_items_own_question_keeps_to_the_endpoints_slots(pytester, toy, mode):
    """Each item asks a follow-up of its own while the run still sends the planned answers: the follow-up goes
    through the same sender (under xdist, a worker's through the slot's lock file that the controller's sender
    takes too), so a one-slot server never gets two requests at once."""
    data = toy(8)
    pytester.makepyfile(test_toy=FOLLOW_UP_TEST)
    with running_server(answer="A", latency=0.05) as server:
        pytester.makepyfile(one_slot=ONE_SLOT_PLUGIN.format(url=server.url))
        pytester.syspathinsert()
        # under xdist from a child process: its workers find the plugin's module on the PYTHONPATH that pytester
        # gives a child process (an in-process run's workers do not)
        result = inner(pytester, "-p", "one_slot", *toy_args(server, data, *mode), subprocess="-n" in mode)
        count, in_flight = server.count, server.max_in_flight
    assert result.ret == 0, result.stdout.str()
    assert count == 16  # every planned answer and every follow-up
    assert in_flight == 1


LOOKUP_PROBE = """
from pytest_medhelm.cache.store import AnswerCache

calls = {"get": 0, "get_many": []}
get, get_many = AnswerCache.get, AnswerCache.get_many


def counted_get(self, key):
    calls["get"] += 1
    return get(self, key)


def counted_get_many(self, keys):
    keys = list(keys)
    calls["get_many"].append(len(keys))
    return get_many(self, keys)


AnswerCache.get, AnswerCache.get_many = counted_get, counted_get_many  # (get and get_many are its only readers)


def pytest_unconfigure(config):
    AnswerCache.get, AnswerCache.get_many = get, get_many
    print(f"cache lookups: one by one {calls['get']}, together {calls['get_many']}")
"""


def test_a_run_looks_up_its_planned_answers_in_the_cache_all_at_once(pytester, toy, server):
    # (with a shared Redis, one round trip per 500 answers instead of one per answer)
    data = toy(30)
    pytester.makepyfile(lookup_probe=LOOKUP_PROBE)
    pytester.syspathinsert()
    args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-s", "--medhelm-model", "openai/toy-model",
            "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
            "--medhelm-cache-dir", str(pytester.path / "cache")]
    assert inner(pytester, *args).ret == 0  # (fills the cache)
    server.reset()
    again = inner(pytester, "-p", "lookup_probe", *args)
    assert again.ret == 0 and server.count == 0
    again.stdout.fnmatch_lines(["cache lookups: one by one 0, together [[]30[]]"])


def test_a_resumed_judged_run_looks_up_its_judges_verdicts_all_at_once(pytester, shared_data):
    """A jury's verdicts for the cached answers are looked up together, as the answers are (HealthBench's graders
    ask one verdict per rubric criterion: with a shared Redis, one round trip instead of thousands)."""
    from pytester_runs import suite_args

    verdict = json.dumps({axis: {"score": 3, "explanation": "fine"} for axis in ("accuracy", "completeness",
                                                                                 "clarity")})
    pytester.makepyfile(lookup_probe=LOOKUP_PROBE)
    pytester.syspathinsert()
    with running_server(answer="x") as server:
        server.set_answer(lambda body: verdict if body["model"].startswith("judge") else "a note")
        args = ["-p", "no:xdist", "-s", "-p", "lookup_probe", "--medhelm-cache-dir", str(pytester.path / "cache"),
                *suite_args(server.url, shared_data, "aci_bench", 5, judges=("openai/judge-a", "openai/judge-b"))]
        first = inner(pytester, *args)  # (fills the cache: 5 answers, 10 verdicts)
        assert first.ret == 0 and server.count == 15
        server.reset()
        again = inner(pytester, *args)
        assert again.ret == 0 and server.count == 0
    # the first run: the answers at the start, then each answer's two verdicts as it arrives
    first.stdout.fnmatch_lines(["cache lookups: one by one 0, together [[]5, 2, 2, 2, 2, 2[]]"])
    # the resumed run: the answers, then the verdicts on all of them
    again.stdout.fnmatch_lines(["cache lookups: one by one 0, together [[]5, 10[]]"])
