"""``--medhelm-batch`` end to end: the toy benchmark's requests as a batch on our test server, which speaks OpenAI's
Files and Batches endpoints (pytest_medhelm.testing.server.batches) and counts direct chat requests apart.

The inner runs are in-process (pytester_runs.run): nothing checked here needs a fresh interpreter, and each one cost
seconds of start-up and litellm's import. Only the Ctrl-C test's first run is a process of its own (its signal)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from pytester_runs import run as inner

from pytest_medhelm.testing.server import batch_stats, configure_batches

XDIST = pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                          pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
#: a run in this process whatever the variant: one whose mode is not what its test checks (a baseline, or a run
#: reading what the checked run left), and which under xdist cost ~2 CPU-s of interpreters
SERIAL = ["-p", "no:xdist"]
#: the test server stands for OpenAI: its batch factor given as for a server of one's own (0.5 is OpenAI's own default)
PRICES = '["openai/writer"]\ninput_per_million = 2.50\noutput_per_million = 10.00\nbatch = 0.5\n'


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setenv("MEDHELM_BATCH_POLL_S", "0.05")  # the test server ends a batch after a few polls


@pytest.fixture
def project(pytester, toy, server):
    data = toy(10)
    (pytester.path / "prices.toml").write_text(PRICES)

    def args(cache: str, out: str, *extra: str) -> list[str]:
        return ["-p", "no:cacheprovider", "--medhelm-model", "openai/writer", "--medhelm-api-base", server.url,
                "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(pytester.path / cache),
                "--medhelm-prices", str(pytester.path / "prices.toml"), "--medhelm-json", str(pytester.path / out),
                *extra]

    return args


def results(pytester, name: str) -> dict:
    return json.loads((pytester.path / name).read_text())


def scores(report: dict) -> dict[str, float | None]:
    return {i["instance_id"]: i["score"] for i in report["instances"]}


@pytest.mark.e2e
@XDIST
def test_a_batch_run_sends_no_chat_request_scores_as_a_direct_run_and_costs_half(pytester, server, project, xdist):
    # (the baseline, in this process in both variants: the batch run is what is checked in each mode)
    direct = inner(pytester, *project("direct-cache", "direct.json"), *SERIAL)
    assert direct.ret == 0, direct.stdout.str()[-3000:]
    assert server.count == 10 and batch_stats(server.url)["batches_created"] == 0

    batched = inner(pytester, *project("batch-cache", "batch.json", "--medhelm-batch"), *xdist)
    assert batched.ret == 0, batched.stdout.str()[-3000:]
    assert server.count == 10  # not one chat request more: every answer came from the batch
    stats = batch_stats(server.url)
    assert stats["batches_created"] == 1 and len(stats["lines"]) == 10
    assert {line["body"]["model"] for line in stats["lines"]} == {"writer"}
    batched.stdout.fnmatch_lines(["medhelm batch batch-* (answers, openai/writer at *): completed; 10/10 answered"])

    direct_report, batch_report = results(pytester, "direct.json"), results(pytester, "batch.json")
    assert scores(batch_report) == scores(direct_report)
    assert sorted(scores(batch_report).values()) == [0.0] * 5 + [1.0] * 5  # (the server answers A to all)
    [direct_row], [batch_row] = direct_report["models"], batch_report["models"]
    assert direct_row["cost_usd"] > 0
    assert batch_row["cost_usd"] == direct_row["cost_usd"] / 2  # (exact: halving is exact in binary)
    assert batch_report["run"]["options"]["batch"] is True

    # the same cache keys as a direct run: a direct run on the batch run's cache asks nothing (in this process: it
    # reads what the batch run stored, which its own mode does not change)
    again = inner(pytester, *project("batch-cache", "again.json"), *SERIAL)
    assert again.ret == 0 and server.count == 10
    assert all(i["cached"] for i in results(pytester, "again.json")["instances"])
    assert scores(results(pytester, "again.json")) == scores(direct_report)


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.e2e
@XDIST
def test_ctrl_c_after_submitting_then_the_same_command_collects_the_batch_instead_of_paying_twice(
        pytester, server, project, xdist):
    configure_batches(server.url, polls=10**6)  # the batch never ends while the first run waits
    args = project("cache", "out.json", "--medhelm-batch", *xdist)
    first = pytester.popen([sys.executable, "-m", "pytest", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: batch_stats(server.url)["polls"] >= 2, "the first run to submit and poll its batch")
        os.killpg(first.pid, signal.SIGINT)  # Ctrl-C at a terminal: pytest and its xdist workers get it
        output = first.communicate(timeout=60)[0].decode()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 2, output[-3000:]  # interrupted
    if xdist:  # the controller said what it waits for, as it began to
        assert re.search(r"medhelm batch batch-\S+: waiting for its 10 result\(s\) from openai/writer, at most 86400 s "
                         r"\(--medhelm-batch-timeout\)", output), output[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    assert len(list((pytester.path / "cache" / "batches").glob("*.json"))) == 1  # its id is kept

    configure_batches(server.url, polls=1)  # the provider has finished it meanwhile
    second = inner(pytester, *args)
    assert second.ret == 0, second.stdout.str()[-3000:]
    stats = batch_stats(server.url)
    assert stats["batch_ids"] == [batch_id] and len(stats["lines"]) == 10  # no second batch, nothing paid twice
    assert server.count == 0
    second.stdout.fnmatch_lines([f"medhelm batch {batch_id}: submitted by an earlier run, collected (10 request(s), "
                                 "not submitted again)"])
    assert sorted(scores(results(pytester, "out.json")).values()) == [0.0] * 5 + [1.0] * 5
    assert not list((pytester.path / "cache" / "batches").glob("*.json"))  # collected: the record is gone


@pytest.mark.e2e
@XDIST
def test_lines_the_provider_failed_are_errors_of_their_items_with_its_message_and_are_asked_again(
        pytester, server, project, xdist):
    message = "Invalid 'max_tokens': integer below minimum value."
    configure_batches(server.url, fail_lines={"question 3?": message, "question 7?": message})
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"), *xdist)
    assert run.ret == 1, run.stdout.str()[-3000:]
    report = results(pytester, "out.json")
    errors = {i["instance_id"]: i["error"] for i in report["instances"] if i["error"]}
    assert set(errors) == {"q003", "q007"}
    assert all(message in error and "HTTP 400" in error for error in errors.values())
    assert report["benchmarks"][0]["n"] == 8 and report["benchmarks"][0]["n_errors"] == 2
    run.stdout.fnmatch_lines(["medhelm batch * (answers, openai/writer at *): completed; 8/10 answered, 2 failed"])

    configure_batches(server.url, fail_lines={})
    # (in this process: it reads what the first run cached, which its own mode does not change)
    again = inner(pytester, *project("cache", "again.json", "--medhelm-batch"), *SERIAL)
    assert again.ret == 0, again.stdout.str()[-3000:]
    stats = batch_stats(server.url)
    assert stats["batches_created"] == 2 and len(stats["lines"]) == 12  # the two errors were not cached: asked again
    assert {line["custom_id"] for line in stats["lines"][10:]} < {line["custom_id"] for line in stats["lines"][:10]}
    assert server.count == 0


@pytest.mark.e2e
def test_a_batch_answer_that_cannot_be_stored_is_its_items_error_only(pytester, server, project, monkeypatch):
    """A batch's results go into the cache in one transaction; when it fails, they are stored one by one, so that
    only the answer that could not be stored is an error (its item's)."""
    import diskcache

    from pytest_medhelm.cache.store import AnswerCache

    put_many = AnswerCache.put_many
    writes = []

    def locked_for_question_3(self, stored):
        writes.append(len(stored))
        if any(one.request_json and any("question 3?" in text for _role, text in one.request_json["messages"])
               for one in stored):
            raise diskcache.Timeout("database is locked")
        return put_many(self, stored)

    monkeypatch.setattr(AnswerCache, "put_many", locked_for_question_3)
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    assert writes == [10] + [1] * 10  # the batch's transaction, then each of its answers in one of its own
    errors = {i["instance_id"]: i["error"] for i in results(pytester, "out.json")["instances"] if i["error"]}
    assert list(errors) == ["q003"], run.stdout.str()[-3000:]
    assert "could not be stored in the cache: Timeout: database is locked" in errors["q003"]
    assert server.count == 0


@pytest.mark.e2e
@pytest.mark.parametrize("outcome, answered, why", [
    ("failed", 0, "batch batch-* failed: The batch failed: the test server was told to fail it."),
    ("expired", 5, "This request could not be executed before the completion window expired."),
])
def test_the_requests_a_failed_or_expired_batch_did_not_answer_are_item_errors(pytester, server, project, outcome,
                                                                               answered, why):
    configure_batches(server.url, outcome=outcome)
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    instances = results(pytester, "out.json")["instances"]
    assert sum(i["error"] is None for i in instances) == answered
    failed = [i["error"] for i in instances if i["error"]]
    assert len(failed) == 10 - answered and all(re.search(re.escape(why).replace(r"\*", ".*"), e) for e in failed)
    assert server.count == 0


@pytest.mark.e2e
def test_a_server_without_a_batch_api_gets_the_requests_directly_and_the_run_says_so(pytester, server, project):
    configure_batches(server.url, available=False)  # POST /v1/files: 404
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert server.count == 10 and batch_stats(server.url)["batches_created"] == 0
    run.stdout.fnmatch_lines([f"medhelm: --medhelm-batch: {server.url} has no Batch API (POST /files: HTTP 404); its "
                              "requests were sent directly"])


@pytest.mark.e2e
def test_the_dry_run_prices_a_batch_run_at_the_batch_rate(pytester, project):
    def upper_bound(*extra: str) -> float:
        run = inner(pytester, *project("cache", "out.json", "--medhelm-dry-run", *extra))
        assert run.ret == 0, run.stdout.str()[-3000:]
        found = re.search(r"Estimated upper bound: \$([0-9.,]+) ", run.stdout.str())
        assert found, run.stdout.str()[-3000:]
        return float(found.group(1).replace(",", ""))

    (pytester.path / "prices.toml").write_text(  # prices large enough to print exactly
        '["openai/writer"]\ninput_per_million = 250000\noutput_per_million = 1000000\nbatch = 0.25\n')
    direct = upper_bound()
    assert direct > 0 and upper_bound("--medhelm-batch") == pytest.approx(direct * 0.25)


VERDICT = json.dumps({axis: {"score": 4, "explanation": f"{axis} is good"}
                      for axis in ("accuracy", "completeness", "clarity")})


def answer_or_judge(body):
    if body["model"].startswith("judge"):
        return VERDICT
    return "HISTORY OF PRESENT ILLNESS: the patient reports a cough. ASSESSMENT AND PLAN: rest."


@pytest.mark.e2e
@XDIST
def test_the_judges_requests_follow_their_answers_batch_as_a_second_batch(pytester, server, shared_data, xdist):
    from pytester_runs import suite_args

    server.set_answer(answer_or_judge)

    def run(cache: str, out: str, *extra: str, mode: list[str] = xdist):
        result = inner(pytester, *suite_args(server.url, shared_data, "aci_bench", 2,
                                                           "--medhelm-cache-dir", str(pytester.path / cache),
                                                           "--medhelm-json", str(pytester.path / out), *extra,
                                                           *mode))
        assert result.ret == 0, result.stdout.str()[-3000:]
        return result

    run("direct-cache", "direct.json", mode=SERIAL)  # (the baseline: the batch run is what is checked in each mode)
    assert server.count == 4  # 2 answers, 2 judgements
    batched = run("batch-cache", "batch.json", "--medhelm-batch")
    assert server.count == 4
    stats = batch_stats(server.url)
    assert stats["batches_created"] == 2
    answers, judgements = ([line for line in stats["lines"] if line["batch"] == bid] for bid in stats["batch_ids"])
    assert [line["body"]["model"] for line in answers] == ["writer"] * 2
    assert [line["body"]["model"] for line in judgements] == ["judge-a"] * 2
    assert all("ASSESSMENT AND PLAN: rest." in line["body"]["messages"][-1]["content"] for line in judgements)
    batched.stdout.fnmatch_lines(["medhelm batch * (answers, openai/writer at *): completed; 2/2 answered",
                                  "medhelm batch * (jury, openai/judge-a at *): completed; 2/2 answered"])
    direct, batch = results(pytester, "direct.json"), results(pytester, "batch.json")
    assert scores(batch) == scores(direct) and set(scores(batch).values()) == {0.75}


@pytest.mark.e2e
def test_a_budget_holds_for_a_batch_and_counts_its_answers_at_the_batch_price(pytester, server, project):
    refused = inner(pytester, *project("cache", "none.json", "--medhelm-batch", "--medhelm-budget", "0"))
    assert batch_stats(server.url)["batches_created"] == 0 and server.count == 0  # nothing fits: nothing submitted
    refused.assert_outcomes(skipped=10)
    assert results(pytester, "none.json")["run"]["budget"]["not_sent"] == 10

    paid = inner(pytester, *project("cache", "out.json", "--medhelm-batch", "--medhelm-budget", "1"))
    assert paid.ret == 0, paid.stdout.str()[-3000:]
    assert batch_stats(server.url)["batches_created"] == 1 and server.count == 0
    report = results(pytester, "out.json")
    assert report["run"]["budget"]["spent_usd"] == pytest.approx(report["models"][0]["cost_usd"], rel=1e-12)
    assert report["run"]["budget"]["not_sent"] == 0


@pytest.mark.e2e
def test_a_result_line_longer_than_its_max_tokens_allows_is_its_items_error_as_a_direct_reply_would_be(
        pytester, server, project):
    server.set_answer({"question 4?": "word " * 20_000})  # 100 kB for a request of max_tokens=1
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    errors = {i["instance_id"]: i["error"] for i in results(pytester, "out.json")["instances"] if i["error"]}
    assert list(errors) == ["q004"] and "malformed reply: the result line is 100," in errors["q004"]
    assert "its request's max_tokens allow: not an answer" in errors["q004"]


def test_an_item_waiting_in_a_batch_run_sees_the_batches_in_flight(tmp_path):
    """The waiting item's status line names the batches of the sender's way (``Batching``), and nothing more without
    one."""
    from pytest_medhelm.cache.store import AnswerCache
    from pytest_medhelm.sending.background import BackgroundSender
    from pytest_medhelm.sending.batching import Batching
    from pytest_medhelm.sending.scheduler import Scheduler, Settings
    from pytest_medhelm.sending.waiting import status_text

    scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), Settings(concurrency=1, timeout=10.0))
    batching = Batching(scheduler, tmp_path / "batches")
    batching.batches["batch_1"] = "in_progress 3/12"
    assert status_text(BackgroundSender(scheduler, way=batching), 2.0) == \
        "medhelm: waiting 2 s; batch batch_1 in_progress 3/12"
    assert status_text(BackgroundSender(scheduler), 2.0) == "medhelm: waiting 2 s"
