"""The fault matrix: every way a model endpoint misbehaves, against our test server over loopback.

Two levels:

* the scheduler alone (no pytest run): AIMD concurrency on 429s as the server sees it, Retry-After, bounded
  retries with exponential backoff and jitter, systematic failures, dead endpoints, key redaction;
* whole pytest runs (pytester, the toy benchmark): each fault either recovers (every instance scored, exit 0) or
  leaves the instances it hit as *errors* (E, not misses) carrying the provider's message, exit 1; the run always
  finishes.

``FIGURES`` counts what the suite injected and what it measured: the answers the server gave (completions sent in
full) and those the run kept (scored, or stored in the cache). Each test counts first, then asserts that nothing
was lost; the module prints the measured totals when its last test is done (``_report_figures``).
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections import Counter
from pathlib import Path

import pytest
from pytester_runs import run
from terminal_lines import figures_reported
from toy_benchmark import toy_rows

from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.sending.failures import redact
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler, Settings
from pytest_medhelm.testing.server import running_server, start_subprocess_server
from pytest_medhelm.values import ChatRequest, ModelSpec

FIGURES: Counter = Counter()


_report_figures = figures_reported(FIGURES, lambda f: (
    f"\nfault matrix (measured): {f['faults injected']} faults injected, {f['runs completed']} pytest runs completed, "
    f"{f['answers received']} answers received, {f['answers kept']} kept, {f['answers lost']} lost"))


def tally(received: int, kept: int) -> int:
    """Count the answers the server gave and those the run kept; returns how many were lost (to assert on)."""
    FIGURES["answers received"] += received
    FIGURES["answers kept"] += kept
    FIGURES["answers lost"] += received - kept
    return received - kept


def answered(stats: dict) -> int:
    """The answers a test server gave (chat completions sent in full; a malformed 200 is not one)."""
    return int(stats["answered"])


def stored(sched: Scheduler, jobs: list[Job]) -> int:
    return sum(1 for j in jobs if sched.cache.get(j.key) is not None)


def n_scored(report_path: Path) -> int:
    return sum(1 for i in json.loads(report_path.read_text())["instances"] if i["score"] is not None)


# ----------------------------------------------------------------------------------------------------------------
# helpers


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jobs_for(url: str, n: int, model: str = "openai/m") -> list[Job]:
    spec = ModelSpec(model, model, url)
    return [Job(spec, ChatRequest.for_prompt(spec, f"question {i}?", 1)) for i in range(n)]


def scheduler(tmp_path: Path, **settings) -> Scheduler:
    defaults = dict(concurrency=8, timeout=5.0, retries=3, backoff_base=0.01, backoff_max=0.1)
    defaults.update(settings)
    return Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), Settings(**defaults))


def model_args(url: str, data: Path, *extra: str) -> list[str]:
    return ["--medhelm-model", "openai/toy-model", "--medhelm-api-base", url, "--medhelm-data-dir", str(data),
            "--medhelm-retries", "2", *extra]


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if v and k not in ("warnings", "warning")}


def expected_scores(n: int) -> dict[str, float]:
    """The toy benchmark's scores when the server always answers A: 1 where the answer is "yes" (even ids)."""
    return {r["id"]: 1.0 if r["correct"] == 0 else 0.0 for r in toy_rows(n)}


# ----------------------------------------------------------------------------------------------------------------
# the scheduler alone


def test_a_429_burst_halves_concurrency_once_then_it_grows_back(tmp_path):
    """AIMD as the server sees it: 8 in flight; a burst of 8 429s halves the window once (to 4, not to 1: the
    429s of one burst are one signal); a window's worth of successes adds one back, up to 8."""
    faults = [("status", 429, {"Retry-After": "0"})] * 8
    with running_server(answer="A", latency=0.05, faults=faults) as srv:
        seen: list[int] = []  # requests in flight at the server when each answered request arrived

        def script(body):
            seen.append(srv.stats()["in_flight"])
            return None

        srv.set_answer(script)
        sched = scheduler(tmp_path, concurrency=8)
        jobs = jobs_for(srv.url, 80)
        failures = sched.send_all(jobs)
        stats = srv.stats()
    FIGURES["faults injected"] += 8
    assert tally(answered(stats), stored(sched, jobs)) == 0
    assert failures == {}
    assert stats["count"] == 88 and stats["by_status"] == {"429": 8, "200": 80}
    assert sched.stats["rate_limited"] == 8 and sched.stats["concurrency_min"] == 4
    # right after the burst at most 4 were in flight (the server counts the arriving request itself) ...
    assert max(seen[:8]) <= 4, seen
    # ... and the window grew back to the configured 8
    assert max(seen[-20:]) == 8, seen
    assert sched.stats["answers"] == 80 and sched.stats["retries"] == 8
    assert sched.summary() == "8 retries, 8 rate-limit response(s) (concurrency lowered to 4 of 8)"


def test_repeated_429s_bring_concurrency_down_to_one_never_zero(tmp_path):
    # 8 (window 8 -> 4), 4 (-> 2), 2 (-> 1), then 2 more at 1 (stays 1)
    faults = [("status", 429, {"Retry-After": "0"})] * 16
    with running_server(answer="A", latency=0.02, faults=faults) as srv:
        sched = scheduler(tmp_path, concurrency=8, retries=10)
        failures = sched.send_all(jobs_for(srv.url, 12))
        assert srv.stats()["by_status"] == {"429": 16, "200": 12}
    FIGURES["faults injected"] += 16
    assert failures == {}
    assert sched.stats["concurrency_min"] == 1


def test_retry_after_pauses_every_request_and_is_honoured(tmp_path):
    faults = [("status", 429, {"Retry-After": "0.6"})]
    with running_server(answer="A", faults=faults) as srv:
        sched = scheduler(tmp_path, concurrency=1)
        started = time.monotonic()
        assert sched.send_all(jobs_for(srv.url, 3)) == {}
        elapsed = time.monotonic() - started
        arrivals = [r["received_at"] for r in srv.requests]
    FIGURES["faults injected"] += 1
    assert elapsed >= 0.6
    assert arrivals[1] - arrivals[0] >= 0.55  # the retry came after Retry-After, not after the 10 ms backoff
    assert sched.stats["waited_s"] >= 0.6


def test_a_huge_retry_after_is_capped(tmp_path):
    faults = [("status", 429, {"Retry-After": "3600"})]
    with running_server(answer="A", faults=faults) as srv:
        sched = scheduler(tmp_path, concurrency=2, retry_after_max=0.2)
        started = time.monotonic()
        assert sched.send_all(jobs_for(srv.url, 2)) == {}
    FIGURES["faults injected"] += 1
    assert time.monotonic() - started < 5


def test_retries_are_bounded_with_exponential_backoff_and_jitter(tmp_path):
    with running_server(answer="A", fail_matching={"question 0?": ("status", 503)}) as srv:
        sched = scheduler(tmp_path, concurrency=1, retries=4, backoff_base=0.05, backoff_max=10)
        failures = sched.send_all(jobs_for(srv.url, 1))
        arrivals = [r["received_at"] for r in srv.requests]
    FIGURES["faults injected"] += 5
    [error] = failures.values()
    assert "(after 5 attempts)" in str(error) and "overloaded" in str(error) and error.status == 503
    assert len(arrivals) == 5  # 1 + retries, then it gives up
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    for k, gap in enumerate(gaps):  # 0.05 * 2**k, times a jitter factor in [0.5, 1.5)
        assert 0.05 * 2**k * 0.5 - 0.01 <= gap <= 0.05 * 2**k * 1.5 + 0.25, gaps
    assert sched.stats["retries"] == 4 and sched.stats["failed"] == 1


def test_a_wrong_key_stops_sending_at_once(tmp_path):
    with running_server(answer="A", api_key="sk-right") as srv:
        sched = scheduler(tmp_path, concurrency=4)
        failures = sched.send_all(jobs_for(srv.url, 200))
        count = srv.count
    FIGURES["faults injected"] += 1
    assert len(failures) == 200
    assert count <= 4  # the requests in flight when the first 401 came back, nothing after
    assert "Incorrect API key" in sched.broken["openai/m"]
    assert all("Incorrect API key" in str(e) for e in failures.values())


def test_connection_refused_fails_fast_after_bounded_retries(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    sched = scheduler(tmp_path, concurrency=4, retries=2)
    started = time.monotonic()
    failures = sched.send_all(jobs_for(url, 100))
    elapsed = time.monotonic() - started
    FIGURES["faults injected"] += 1
    assert len(failures) == 100
    assert elapsed < 10
    # the first wave used its retries; then the endpoint is marked down and the rest fail without a request
    assert sched.stats["requests"] <= 4 * 3 + 4
    messages = {str(e) for e in failures.values()}
    assert all(re.search(r"Cannot connect to host|Connect call failed|refused", m) for m in messages), messages
    assert url in sched.down and "unreachable" in sched.down[url]


def test_a_down_endpoint_is_tried_again_later(tmp_path, monkeypatch):
    from pytest_medhelm.sending import scheduler as scheduler_module

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    sched = scheduler(tmp_path, concurrency=2, retries=1)
    assert len(sched.send_all(jobs_for(url, 6))) == 6 and url in sched.down
    with start_subprocess_server(answer="A", port=port) as srv:
        assert len(sched.send_all(jobs_for(url, 6))) == 6  # still marked down: fails at once ...
        assert srv.count == 0  # ... without a request
        monkeypatch.setattr(scheduler_module, "DOWN_RECHECK_S", 0.0)  # (as if DOWN_RECHECK_S had passed)
        assert sched.send_all(jobs_for(url, 6)) == {}  # the mark expired: the endpoint is back
        assert srv.count == 6
    assert url not in sched.down


def test_a_server_that_dies_mid_run(tmp_path):
    # one at a time, so that the request in flight when the server goes down is always the 6th (never answered)
    with running_server(answer="A", latency=0.01, stop_after=5) as srv:
        sched = scheduler(tmp_path, concurrency=1, retries=2)
        started = time.monotonic()
        failures = sched.send_all(jobs_for(srv.url, 20))
        elapsed = time.monotonic() - started
        assert srv.stopped
        stats = srv.stats()
    FIGURES["faults injected"] += 1
    assert tally(answered(stats), stored(sched, jobs_for(srv.url, 20))) == 0  # every answer given was kept
    assert elapsed < 15
    assert sched.stats["answers"] == 5 and len(failures) == 15
    cache = sched.cache
    assert sum(1 for j in jobs_for(srv.url, 20) if cache.get(j.key) is not None) == 5  # every answer kept
    for error in failures.values():
        assert re.search(r"Cannot connect|Connect call failed|Disconnect|unreachable|refused", str(error)), error


def test_malformed_bodies_are_retried_then_fail(tmp_path):
    with running_server(answer="A", faults=[("malformed",)] * 2,
                        fail_matching={"question 1?": ("malformed", "<html>502 Bad Gateway</html>")}) as srv:
        sched = scheduler(tmp_path, concurrency=1, retries=2)
        failures = sched.send_all(jobs_for(srv.url, 3))
    FIGURES["faults injected"] += 5
    assert list(failures) == [jobs_for(srv.url, 3)[1].key]
    [error] = failures.values()
    assert "malformed response body" in str(error) and "502 Bad Gateway" in str(error)
    assert sched.stats["malformed"] == 5


def test_a_provider_echoing_the_key_is_redacted(tmp_path, monkeypatch):
    secret = "sk-test-ECHOED-0123456789abcdef"
    monkeypatch.setenv("MEDHELM_API_KEY", secret)
    with running_server(answer="A", fail_matching={"question": ("status", 400, {}, f"bad key {secret} given")}) as srv:
        sched = scheduler(tmp_path, concurrency=1, retries=0)
        failures = sched.send_all(jobs_for(srv.url, 1))
    [error] = failures.values()
    assert secret not in str(error) and "bad key *** given" in str(error)
    assert redact(f"x {secret} y") == "x *** y"


# ----------------------------------------------------------------------------------------------------------------
# whole runs: recoverable faults (every instance scored, exit 0)

@pytest.fixture
def quick_backoff(monkeypatch):
    """For the whole runs whose subject is where a fault ends (a score, or the item's error with the provider's
    message), not the wait between tries: the in-process run's backoff 25x shorter (the backoff itself is
    test_retries_are_bounded_with_exponential_backoff_and_jitter's subject); 0.5-1.5 s less per run."""
    from pytest_medhelm.run.context import RunContext

    settings = RunContext.settings

    def quick(self):
        chosen = settings(self)
        chosen.backoff_base /= 25
        return chosen

    monkeypatch.setattr(RunContext, "settings", quick)


RECOVERABLE = {
    "429-retry-after": ([("status", 429, {"Retry-After": "0.2"})] * 4, []),
    "500s": ([("status", 500), ("status", 502), ("status", 503), ("status", 504)], []),
    "timeouts": ([("timeout", 3)] * 3, ["--medhelm-timeout", "0.3"]),
    "malformed": ([("malformed",), ("malformed", "")], []),
    "disconnects": ([("disconnect",)] * 3, []),
    "mixed": ([("status", 429, {"Retry-After": "0"}), ("disconnect",), ("malformed",), ("status", 500),
               ("timeout", 3)], ["--medhelm-timeout", "0.3"]),
}


@pytest.mark.parametrize("case", list(RECOVERABLE))
def test_recoverable_faults_score_every_instance(pytester, toy, case, quick_backoff):
    faults, extra = RECOVERABLE[case]
    data = toy(10)
    out = pytester.path / "r.json"
    with running_server(answer="A", faults=faults) as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-json", str(out), *extra))
        count = srv.count
        stats = srv.stats()
    FIGURES["faults injected"] += len(faults)
    FIGURES["runs completed"] += 1
    assert tally(answered(stats), n_scored(out)) == 0
    assert result.ret == 0, result.stdout.str()
    assert outcomes(result) == {"passed": 5, "missed": 5}
    assert count == 10 + len(faults)  # each fault cost exactly one extra request
    report = json.loads(out.read_text())
    assert {i["instance_id"]: i["score"] for i in report["instances"]} == expected_scores(10)
    assert report["benchmarks"][0]["n_errors"] == 0
    assert "INTERNALERROR" not in result.stdout.str()


def test_first_5_answers_429_next_3_500_all_20_scored_exit_0(pytester, toy):
    """The issue's acceptance check, verbatim."""
    data = toy(20)
    out = pytester.path / "r.json"
    faults = [("status", 429, {"Retry-After": "0.1"})] * 5 + [("status", 500)] * 3
    with running_server(answer="A", faults=faults) as srv:
        result = run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", srv.url,
                     "--medhelm-data-dir", str(data), "--medhelm-json", str(out))
        stats = srv.stats()
    FIGURES["faults injected"] += 8
    FIGURES["runs completed"] += 1
    assert tally(answered(stats), n_scored(out)) == 0
    assert result.ret == 0, result.stdout.str()
    assert stats["by_status"] == {"429": 5, "500": 3, "200": 20}
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_errors"]) == (20, 0)
    assert len([i for i in report["instances"] if i["score"] is not None]) == 20
    assert outcomes(result) == {"passed": 10, "missed": 10}


@pytest.mark.e2e
def test_recovery_under_xdist(pytester, toy):
    data = toy(12)
    out = pytester.path / "r.json"
    faults = [("status", 429, {"Retry-After": "0.1"})] * 3 + [("status", 500), ("disconnect",), ("malformed",)]
    with running_server(answer="A", faults=faults) as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-json", str(out)), "-n", "2")
        count = srv.count
        stats = srv.stats()
    FIGURES["faults injected"] += len(faults)
    FIGURES["runs completed"] += 1
    assert tally(answered(stats), n_scored(out)) == 0
    assert result.ret == 0, result.stdout.str()
    assert count == 12 + len(faults)
    assert {i["instance_id"]: i["score"] for i in json.loads(out.read_text())["instances"]} == expected_scores(12)


# ----------------------------------------------------------------------------------------------------------------
# whole runs: unrecoverable faults (the instances hit are errors with the provider's message, exit 1)

UNRECOVERABLE = {
    # case: (fault applied to every request for question 3, extra options, text the error must show)
    "500": (("status", 500, {}, "upstream exploded (request id 42)"), [], "upstream exploded (request id 42)"),
    "429": (("status", 429, {"Retry-After": "0"}, "Rate limit reached for gpt-x"), [], "Rate limit reached for gpt-x"),
    "timeout": (("timeout", 2), ["--medhelm-timeout", "0.2"], "no answer within 0.2 s"),
    "malformed": (("malformed", "<html>oops</html>"), [], "malformed response body"),
    "disconnect": (("disconnect",), [], "Disconnect"),
}


@pytest.mark.parametrize("case", list(UNRECOVERABLE))
def test_unrecoverable_faults_are_errors_with_the_providers_message(pytester, toy, case, quick_backoff):
    fault, extra, message = UNRECOVERABLE[case]
    data = toy(6)
    out = pytester.path / "r.json"
    with running_server(answer="A", fail_matching={"question 3?": fault}) as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-json", str(out), *extra), "-rE")
        hit = [r for r in srv.requests if "question 3?" in r["json"]["messages"][0]["content"]]
    FIGURES["faults injected"] += len(hit)
    FIGURES["runs completed"] += 1
    assert len(hit) == 3  # 1 + --medhelm-retries 2, and no more
    assert result.ret == 1, result.stdout.str()
    assert outcomes(result) == {"passed": 3, "missed": 2, "errors": 1}
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert re.search(r"ERROR at call of test_toy\[toy-model-q003\]", text)
    assert message in text
    report = json.loads(out.read_text())
    errors = {i["instance_id"]: i["error"] for i in report["instances"] if i["error"]}
    assert list(errors) == ["q003"] and message in errors["q003"] and "after 3 attempts" in errors["q003"]
    assert report["benchmarks"][0]["n_errors"] == 1 and report["benchmarks"][0]["n"] == 5
    assert result.stdout.str().count("MISSED") <= 2 + 2  # q003 is not counted as a miss


def test_connection_refused_every_item_errors_and_the_run_finishes(pytester, toy):
    data = toy(8)
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    result = run(pytester, *model_args(url, data, "--medhelm-retries", "1"))
    FIGURES["faults injected"] += 1
    FIGURES["runs completed"] += 1
    assert time.monotonic() - started < 60
    assert result.ret == 1
    # an endpoint that never answers fails every item alike: said once, the run stops after the first item
    assert outcomes(result) == {"errors": 1}
    text = result.stdout.str()
    assert "the remaining items were not run" in text
    assert re.search(r"Cannot connect to host 127\.0\.0\.1|Connect call failed", text)
    assert "INTERNALERROR" not in text and "Traceback" not in text


def test_a_server_that_dies_mid_run_leaves_answered_items_scored(pytester, toy):
    data = toy(20)
    out = pytester.path / "r.json"
    with running_server(answer="A", latency=0.02, stop_after=6) as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-json", str(out), "--medhelm-concurrency", "1"))
        assert srv.stopped
        stats = srv.stats()
    FIGURES["faults injected"] += 1
    FIGURES["runs completed"] += 1
    assert tally(answered(stats), n_scored(out)) == 0  # the answers given before the outage are all scored
    assert result.ret == 1, result.stdout.str()
    counts = outcomes(result)
    assert counts.get("passed", 0) + counts.get("missed", 0) == 6 and counts["errors"] == 14
    report = json.loads(out.read_text())
    scored = [i for i in report["instances"] if i["score"] is not None]
    assert len(scored) == 6
    for inst in report["instances"]:
        if inst["error"]:
            assert re.search(r"Cannot connect|Connect call failed|Disconnect|unreachable", inst["error"]), inst
    # the answers received before the outage are kept: the same command, once the server is back (same address:
    # the endpoint is part of the cache key), asks only for the rest
    with start_subprocess_server(answer="A", port=srv.port) as again:
        second = run(pytester, *model_args(again.url, data, "--medhelm-json", str(out)))
        assert again.count == 14
    FIGURES["runs completed"] += 1
    assert second.ret == 0
    assert {i["instance_id"]: i["score"] for i in json.loads(out.read_text())["instances"]} == expected_scores(20)


def test_a_wrong_key_is_one_clear_message_and_exit_1(pytester, toy):
    data = toy(40)
    with running_server(answer="A", api_key="sk-right") as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-concurrency", "4"))
        count = srv.count
    FIGURES["faults injected"] += count
    FIGURES["runs completed"] += 1
    assert result.ret == 1
    assert count <= 4  # a 401 is not retried, and the queued requests are never sent
    text = result.stdout.str()
    headline = re.findall(r"medhelm: every request to openai/toy-model fails: Incorrect API key", text)
    assert len(headline) == 1, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    counts = outcomes(result)
    # every item that ran is an error (the session may stop after the first one: nothing else can succeed)
    assert set(counts) == {"errors"} and 1 <= counts["errors"] <= 40, counts
    # and every error section is the one-line message, never a traceback
    sections = re.findall(r"_+ ERROR at call of [^\n]*\n(.*?)(?=\n_+ ERROR at|\n=+ |\n!+ )", text, re.S)
    assert len(sections) == counts["errors"] and all(s.count("\n") == 0 for s in sections), sections[:3]


def test_a_wrong_key_prints_the_providers_message_once(pytester, toy):
    data = toy(40)
    with running_server(answer="A", api_key="sk-right") as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-concurrency", "4"))
    assert result.ret == 1
    # once in the one item's error section, once in the headline; pytest's own short summary (which shows the
    # whole message on CI, a truncated one on a terminal) is not ours to count
    ours = result.stdout.str().split("short test summary info")[0]
    assert ours.count("Incorrect API key") == 2, ours
    assert outcomes(result) == {"errors": 1}


def test_an_unknown_model_is_one_clear_message(pytester, toy):
    data = toy(10)
    faults = [("status", 404, {}, "The model `toy-model` does not exist")] * 2
    with running_server(answer="A", faults=faults) as srv:
        result = run(pytester, *model_args(srv.url, data, "--medhelm-concurrency", "1"))
        count = srv.count
    FIGURES["faults injected"] += count
    FIGURES["runs completed"] += 1
    assert count == 1
    assert result.ret == 1
    text = result.stdout.str()
    assert text.count("medhelm: every request to openai/toy-model fails: The model `toy-model` does not exist") == 1
