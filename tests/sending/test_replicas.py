"""Several endpoints for one model (``--medhelm-endpoint MODEL=URL1,URL2``), against two of our test servers.

Whole pytest runs of the toy benchmark: the requests of one model reach both servers (counted at each) and a run
survives one of them going down mid-run (every item answered, exit 0), serial and under ``-n 2``; the least busy
replica gets the next request (a slow server gets fewer) and a re-run with the URLs in another order sends nothing
(the cache identity is the model served, not the replica), serially, since whichever process sends chooses the
replica and keys the cache with the same code. Then the parts: the option's parsing into one canonical
value, the usage errors, ``--medhelm-local-only`` on a group, a judge served by replicas.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import starts_xdist, suite_args
from toy_benchmark import toy_rows

from pytest_medhelm.options import parse_endpoint
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import ModelSpec, replica_group

XDIST = [pytest.param(["-p", "no:xdist"], id="serial"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]
MODEL = "openai/toy-model"


def run(pytester: pytest.Pytester, data: Path, urls: list[str], *extra: str) -> pytest.RunResult:
    return pytester_runs.run(pytester, "--medhelm-model", MODEL, "--medhelm-endpoint", f"{MODEL}={','.join(urls)}",
                             "--medhelm-data-dir", str(data), *extra)


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if v and k not in ("warnings", "warning")}


def scores(report_path: Path) -> dict[str, float | None]:
    return {i["instance_id"]: i["score"] for i in json.loads(report_path.read_text())["instances"]}


def expected_scores(n: int) -> dict[str, float]:
    """The toy benchmark's scores when every server answers A: 1 for the "yes" questions (even ids)."""
    return {r["id"]: 1.0 if r["correct"] == 0 else 0.0 for r in toy_rows(n)}


@pytest.mark.parametrize("xdist", XDIST)
def test_one_model_on_two_servers_gets_requests_on_both(pytester, toy, xdist):
    data = toy(20)
    out = pytester.path / "r.json"
    with running_server(answer="A", latency=0.05) as a, running_server(answer="A", latency=0.05) as b:
        result = run(pytester, data, [a.url, b.url], "--medhelm-json", str(out), *xdist)
        counts = (a.count, b.count)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert outcomes(result) == {"passed": 10, "missed": 10}
    assert sum(counts) == 20, counts  # each answer asked once, of one replica
    assert min(counts) >= 8, counts  # as many in flight to each: they share the work (10 and 10 when all start at once)
    assert scores(out) == expected_scores(20)


def test_the_least_busy_replica_gets_the_next_request(pytester, toy):
    """A server that takes 0.6 s per answer beside one that takes 0.02 s: with 4 requests in flight, the slow one
    holds its first two while the fast one answers the rest (round robin would give each 20)."""
    data = toy(40)
    with running_server(answer="A", latency=0.6) as slow, running_server(answer="A", latency=0.02) as fast:
        result = run(pytester, data, [slow.url, fast.url], "--medhelm-concurrency", "4", "-p", "no:xdist")
        counts = {"slow": slow.count, "fast": fast.count}
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert counts["slow"] + counts["fast"] == 40, counts
    assert 1 <= counts["slow"] <= 8 and counts["fast"] >= 32, counts


@pytest.mark.parametrize("xdist", XDIST)
def test_a_run_survives_one_replica_going_down(pytester, toy, xdist):
    """One server answers 6 requests, then goes down like a crashed process (its requests in flight dropped, every
    later connection refused): the others go to the second server at once, every item is answered, exit 0."""
    data = toy(30)
    out = pytester.path / "r.json"
    with running_server(answer="A", latency=0.05, stop_after=6) as dying, \
            running_server(answer="A", latency=0.05) as staying:
        result = run(pytester, data, [dying.url, staying.url], "--medhelm-json", str(out), "--medhelm-retries", "0",
                     "--medhelm-concurrency", "4", *xdist)
        assert dying.stopped
        answered = (dying.stats()["answered"], staying.stats()["answered"])
    text = result.stdout.str()
    assert result.ret == 0, text[-3000:]
    assert outcomes(result) == {"passed": 15, "missed": 15}
    assert scores(out) == expected_scores(30)  # every item answered and scored, none an error
    # the dying one answered its 6 less those still in flight when the 7th came (dropped with it, on a loaded
    # machine): in one process at most 3 besides the 7th (--medhelm-concurrency 4); the other all the rest, each
    # item once
    assert answered[0] >= (0 if starts_xdist(xdist) else 3) and answered[0] + answered[1] == 30, answered
    # no retries were allowed (--medhelm-retries 0): the requests the dead server dropped or refused went to the
    # other replica as failovers, said in the summary with the replica that rests
    assert "sent again to another replica" in text and dying.url in text, text[-3000:]


def test_a_rerun_with_the_replicas_in_another_order_sends_nothing(pytester, toy):
    data = toy(12)
    out = pytester.path / "r.json"
    with running_server(answer="A") as a, running_server(answer="A") as b:
        # (it fills the cache)
        first = run(pytester, data, [a.url, b.url], "-p", "no:xdist")
        assert first.ret == 0, first.stdout.str()[-3000:]
        sent = a.count + b.count
        second = run(pytester, data, [f"{b.url}/", a.url], "--medhelm-json", str(out), "-p", "no:xdist")
        resent = a.count + b.count - sent
    assert sent == 12
    assert second.ret == 0, second.stdout.str()[-3000:]
    assert resent == 0
    assert all(i["cached"] for i in json.loads(out.read_text())["instances"])
    assert scores(out) == expected_scores(12)


def test_a_replica_list_is_one_canonical_value():
    assert parse_endpoint("openai/m = http://10.0.0.6:8000/v1/ , http://10.0.0.5:8000/v1") == (
        "openai/m", "http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1")
    assert parse_endpoint("openai/m=http://10.0.0.5:8000/v1/") == ("openai/m", "http://10.0.0.5:8000/v1")
    group = replica_group(["http://b/v1", "http://a/v1/"])
    assert group == replica_group(["http://a/v1", "http://b/v1"]) == "http://a/v1,http://b/v1"
    spec = ModelSpec("openai/m", "openai/m", group)
    assert spec.urls == ("http://a/v1", "http://b/v1") and spec.is_replica_group
    one = spec.at("http://b/v1")
    assert one.api_base == "http://b/v1" and one.cache_identity == spec.cache_identity == f"openai/m@{group}"
    assert not ModelSpec("openai/m", "openai/m", "http://a/v1").is_replica_group


@pytest.mark.parametrize(("value", "expected"), [
    ("openai/m=http://a/v1,ftp://b", "'ftp://b' is not one"),
    ("openai/m=http://a/v1,", "'' is not one"),
    ("openai/m=http://a/v1,http://a/v1/", "http://a/v1 is listed twice"),
])
def test_a_bad_replica_list_is_a_usage_error_naming_the_url(pytester, toy, value, expected):
    data = toy(2)
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/m", "--medhelm-endpoint", value,
                                "--medhelm-data-dir", str(data))
    assert result.ret == 4
    err = result.stderr.str()
    assert "expected MODEL=URL or MODEL=URL1,URL2,... (replicas of one model)" in err and expected in err, err


def test_two_endpoint_options_for_one_model_say_how_to_list_replicas(pytester, toy):
    data = toy(2)
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/m", "--medhelm-data-dir",
                                str(data), "--medhelm-endpoint", "openai/m=http://127.0.0.1:1/v1",
                                "--medhelm-endpoint", "openai/m=http://127.0.0.1:2/v1")
    assert result.ret == 4
    assert "give all its URLs at once, 'openai/m=URL1,URL2' (replicas of one model)" in result.stderr.str()


def test_local_only_checks_every_replica():
    from pytest_medhelm.governance import endpoint_problem

    assert endpoint_problem(ModelSpec("openai/m", "openai/m", replica_group(["http://10.0.0.5/v1",
                                                                              "http://127.0.0.1:8/v1"]))) is None
    problem = endpoint_problem(ModelSpec("openai/m", "openai/m", replica_group(["http://10.0.0.5/v1",
                                                                                 "http://8.8.8.8/v1"])))
    assert problem == "openai/m at http://8.8.8.8/v1 (not a loopback or private-network address)"


def judge_or_write(body: dict) -> str:
    """A model that writes a note, and a judge that gives every criterion a 4."""
    if body["model"] == "judge-a":
        return json.dumps({c: {"score": 4, "explanation": "ok"} for c in ("accuracy", "completeness", "clarity")})
    return "HISTORY OF PRESENT ILLNESS: cough. ASSESSMENT AND PLAN: rest."


@pytest.mark.e2e
def test_a_judge_served_by_replicas(pytester, shared_data, monkeypatch):
    """The judge of an open-ended benchmark on two servers: both judge, the model's own server judges nothing."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # (BERTScore beside the jury is not under test here)
    out = pytester.path / "r.json"
    with running_server() as writer, running_server() as j1, running_server() as j2:
        for srv in (writer, j1, j2):
            srv.set_answer(judge_or_write)
        # in this process: BERTScore's torch is imported before any inner session (tests/conftest.py)
        result = pytester_runs.run(pytester, *suite_args(
            writer.url, shared_data, "aci_bench", 4, "-p", "no:xdist", "--medhelm-endpoint",
            f"openai/judge-a={j1.url},{j2.url}", "--medhelm-json", str(out)))
        models = {name: [r["json"]["model"] for r in srv.requests] for name, srv in
                  (("writer", writer), ("j1", j1), ("j2", j2))}
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert models["writer"] == ["writer"] * 4, models
    assert models["j1"] and models["j2"] and set(models["j1"] + models["j2"]) == {"judge-a"}, models
    assert len(models["j1"]) + len(models["j2"]) == 4, models
    assert all(i["score"] == 0.75 for i in json.loads(out.read_text())["instances"])  # (4 - 1) / 4


def test_a_replica_group_is_sent_directly_under_batch():
    """A Batch API job goes to one server; a group's requests go each to the least busy replica instead."""
    from pytest_medhelm.sending.batching import batchable

    group = ModelSpec("openai/ft", "openai/ft", replica_group(["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"]))
    assert not batchable(group)
    assert batchable(group.at("http://10.0.0.5:8000/v1"))  # (one of its servers alone would be)
