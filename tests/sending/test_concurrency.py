"""Local llama.cpp servers as the README's main job uses them: never more requests in flight than the server has
slots (the others wait before they are sent, their timeout not running), and local judges constrained to the
judgement's JSON schema while hosted judges get HELM's plain request. Against our real OpenAI-compatible test server;
the endpoints get their slot count through the plugin's ``pytest_medhelm_model_spec`` hook, as a ``local/...``
model gets it from the server the run starts (``llama.servers.attach``)."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import NO_BERTSCORE

from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.endpoints.llama import servers as llama_servers
from pytest_medhelm.jury import JUDGE_MAX_TOKENS, judge_requests, llama_judges, parse_judgement, rubric_for
from pytest_medhelm.sending.background import BackgroundSender
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler, Settings
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import ChatRequest, Completion, ModelSpec

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"
CRITERIA = ("accuracy", "completeness", "clarity")
VERDICT = json.dumps({c: {"score": 4, "explanation": f"{c} is good"} for c in CRITERIA})


def _jobs(url: str, n: int, slots: int | None) -> list[Job]:
    spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=url, slots=slots)
    return [Job(spec, ChatRequest.for_prompt(spec, f"question {i}", 4)) for i in range(n)]


# ------------------------------------------------------------------------------------------------------------------
# slots


@pytest.mark.parametrize("slots", [1, 2])
def test_never_more_in_flight_than_the_endpoint_has_slots(tmp_path, slots):
    with running_server(answer="A", latency=0.1) as server:
        scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), Settings(concurrency=16, timeout=30))
        failures = scheduler.send_all(_jobs(server.url, 8, slots))
        assert failures == {} and server.count == 8
        assert server.max_in_flight == slots  # 16 allowed by the run, the endpoint's slots by the scheduler


def test_without_slots_the_run_concurrency_applies(tmp_path):
    """The control: the same jobs without a slot count overlap up to the run's concurrency."""
    with running_server(answer="A", latency=0.3) as server:
        scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), Settings(concurrency=6, timeout=30))
        assert scheduler.send_all(_jobs(server.url, 12, None)) == {}
        assert server.max_in_flight == 6


def test_a_request_waiting_for_a_slot_does_not_spend_its_timeout(tmp_path):
    """6 requests of 0.3 s each through one slot take 1.8 s; each has 1.2 s, counted from when it is sent. Were the
    queueing counted (as when a single-slot server queues them itself), the later ones would time out and be re-sent."""
    with running_server(answer="A", latency=0.3) as server:
        scheduler = Scheduler(AnswerCache(tmp_path / "cache", run_id="r"),
                              Settings(concurrency=16, timeout=1.2, retries=0))
        failures = scheduler.send_all(_jobs(server.url, 6, 1))
        assert failures == {}
        assert server.count == 6 and server.max_in_flight == 1
    assert scheduler.stats["retries"] == 0 and scheduler.stats["connection_errors"] == 0


def test_the_background_sender_keeps_to_the_slots(tmp_path):
    """Sending while items run keeps to them too."""
    settings = Settings(concurrency=8, timeout=30, retries=0)
    with running_server(answer="A", latency=0.1) as server:
        jobs = _jobs(server.url, 10, 2)
        sender = BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), settings))
        sender.start(jobs)
        results = [sender.wait(job.key) for job in jobs]
        sender.stop()
        assert all(isinstance(r, Completion) for r in results)
        assert server.count == 10 and server.max_in_flight == 2


def test_a_question_asked_while_the_sender_runs_keeps_to_the_slots_and_goes_first(tmp_path):
    """An item's own question, asked while the planned answers are still being sent, goes through the same sender:
    one slot stays one request in flight, and the question is sent before the answers that only wait their turn.
    Once the sender has ended, it takes nothing more (the item then sends it itself)."""
    settings = Settings(concurrency=8, timeout=30, retries=0)
    with running_server(answer="A", latency=0.1) as server:
        jobs = _jobs(server.url, 10, 1)
        ended = threading.Event()
        sender = BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), settings),
                                  on_finished=ended.set)
        try:
            sender.start(jobs)
            sender.wait(jobs[0].key)
            spec = jobs[0].spec
            own = Job(spec, ChatRequest.for_prompt(spec, "my own question", 4), urgent=True)
            received_before = server.count
            answer = sender.ask(own)
            assert isinstance(answer, Completion) and answer.text == "A"
            results = [sender.wait(job.key) for job in jobs]
            assert all(isinstance(r, Completion) for r in results)
            order = [r["json"]["messages"][0]["content"] for r in server.requests]
            assert server.count == 11 and server.max_in_flight == 1
            # it takes the slot as soon as the request in flight (or given the slot) when it was asked is done
            assert order.index("my own question") <= received_before + 1, order
            assert ended.wait(10)
            late = Job(spec, ChatRequest.for_prompt(spec, "asked after the end", 4), urgent=True)
            assert sender.ask(late) is None and server.count == 11
        finally:
            sender.stop()


def test_a_question_asked_while_the_sender_runs_goes_first_when_the_answers_go_to_several_endpoints(tmp_path):
    """The same with the answers going to two endpoints (a model's two replicas here; two models' servers alike): the
    workers hold every connection of the run's concurrency and take each one again as they finish, alternating
    between the endpoints; the question must not wait for a connection behind them (it once waited for the whole
    sending)."""
    from pytest_medhelm.values import REPLICA_SEPARATOR

    settings = Settings(concurrency=2, timeout=30, retries=0)
    with running_server(answer="A", latency=0.1) as server:
        group = REPLICA_SEPARATOR.join([server.url, server.url.replace("127.0.0.1", "localhost")])
        jobs = _jobs(group, 20, None)
        sender = BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), settings))
        try:
            sender.start(jobs)
            sender.wait(jobs[0].key)
            spec = jobs[0].spec
            received_before = server.count
            answer = sender.ask(Job(spec, ChatRequest.for_prompt(spec, "my own question", 4), urgent=True))
            assert isinstance(answer, Completion)
            order = [r["json"]["messages"][0]["content"] for r in server.requests]
            # sent at once: only what the two workers were starting as it was asked goes before it (a slow machine's
            # margin of two rounds), not the answers still waiting
            assert order.index("my own question") <= received_before + 4, order
            assert all(isinstance(sender.wait(job.key), Completion) for job in jobs)
        finally:
            sender.stop()


def test_a_started_local_server_gives_its_spec_the_url_and_one_slot():
    spec = ModelSpec(name="local/smollm2", litellm_model="openai/smollm2", identity="local/x.gguf:1")
    entry = {"url": "http://127.0.0.1:5/v1", "model": "smollm2", "slots": str(llama_servers.SERVER_SLOTS)}
    attached = llama_servers.attach(spec, entry)
    assert attached.api_base == "http://127.0.0.1:5/v1" and attached.slots == 1
    assert attached.cache_identity == spec.cache_identity  # the port never reaches the cache key


# ------------------------------------------------------------------------------------------------------------------
# local judges: the judgement's JSON schema


def _instance():
    from pytest_medhelm.values import Instance

    return Instance(id="i1", input="Doctor: how are you? Patient: a cough.", references=("HPI: cough.",),
                    benchmark="aci_bench")


def test_a_local_judge_request_carries_the_schema_and_a_hosted_one_does_not():
    local = ModelSpec(name="local/smollm2", litellm_model="openai/smollm2", identity="local/s.gguf:1")
    hosted = ModelSpec(name="openai/gpt-4o", litellm_model="openai/gpt-4o")
    (_l, local_req), (_h, hosted_req) = judge_requests("aci_bench", _instance(), "HPI: a cough.", [local, hosted])
    assert local_req.prompt_text == hosted_req.prompt_text  # the rubric is HELM's either way
    assert hosted_req.response_format == "" and hosted_req.max_tokens == JUDGE_MAX_TOKENS
    assert "response_format" not in hosted_req.to_json()  # hosted keys are what they were before
    fmt = json.loads(local_req.response_format)
    assert fmt["type"] == "json_object"
    schema = fmt["schema"]
    assert list(schema["properties"]) == list(rubric_for("aci_bench").criteria) == schema["required"]
    criterion = schema["properties"]["accuracy"]
    assert list(criterion["properties"]) == ["score", "explanation"]
    assert criterion["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert criterion["properties"]["explanation"]["maxLength"] == llama_judges.EXPLANATION_MAX_CHARS
    assert local_req.max_tokens == llama_judges.max_tokens_for(CRITERIA) < JUDGE_MAX_TOKENS
    # the constraint is part of the cache key: the same prompt without it is another request
    import dataclasses

    plain = dataclasses.replace(local_req, response_format="", max_tokens=local_req.max_tokens)
    assert plain.cache_key() != local_req.cache_key()
    assert ChatRequest.from_json(local_req.to_json()).cache_key() == local_req.cache_key()


def test_the_largest_judgement_the_schema_allows_fits_its_max_tokens():
    widest = {c: {"score": 5, "explanation": "x" * llama_judges.EXPLANATION_MAX_CHARS} for c in CRITERIA}
    text = json.dumps(widest)
    assert len(text) <= llama_judges.max_tokens_for(CRITERIA)  # a token is at least one character
    assert parse_judgement(text, CRITERIA)["clarity"][0] == 5.0


HOOK_PLUGIN = textwrap.dedent('''
    from pytest_medhelm.values import ModelSpec

    URL = {url!r}

    def pytest_medhelm_model_spec(name, api_base, config):
        # every model and judge on one server with two slots, as a local llama.cpp server would be
        if name in ("openai/writer", "openai/judge-h") or name.startswith("local/"):
            return ModelSpec(name=name, litellm_model="openai/" + name.split("/")[-1], api_base=URL, slots=2,
                             identity=name)
''')


@pytest.mark.e2e
def test_end_to_end_local_judge_gets_the_schema_hosted_judge_does_not_and_slots_hold(pytester, shared_data):
    def script(body):
        if body["model"].startswith("judge"):
            return VERDICT
        return "HISTORY OF PRESENT ILLNESS: the patient reports a cough. ASSESSMENT AND PLAN: rest."

    out = pytester.path / "r.json"
    with running_server(answer="x", latency=0.1) as server:
        server.set_answer(script)
        pytester.makepyfile(medhelm_endpoints=HOOK_PLUGIN.format(url=server.url))
        pytester.syspathinsert()
        # in this process: BERTScore's torch is imported before any inner session (tests/conftest.py)
        result = pytester_runs.run(
            pytester, str(SUITE), "-p", "medhelm_endpoints", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--medhelm-model", "openai/writer",
            "--medhelm-jury", "local/judge-l", "--medhelm-jury", "openai/judge-h", "--medhelm-jury-api-base",
            server.url, "--medhelm-benchmark", "aci_bench", "--medhelm-max-instances", "5",
            "--medhelm-data-dir", str(shared_data), "--medhelm-cache-dir", str(pytester.path / "cache"),
            "--medhelm-json", str(out), "--medhelm-concurrency", "16", *NO_BERTSCORE)  # (not under test here)
        assert result.ret == 0, result.stdout.str()[-3000:]
        bodies = [r["json"] for r in server.requests]
        max_in_flight = server.max_in_flight
    local = [b for b in bodies if b["model"] == "judge-l"]
    hosted = [b for b in bodies if b["model"] == "judge-h"]
    assert len(local) == len(hosted) == 5
    assert all(b["response_format"]["schema"]["required"] == list(CRITERIA) for b in local)
    assert all(b["max_tokens"] == llama_judges.max_tokens_for(CRITERIA) for b in local)
    assert all("response_format" not in b and b["max_tokens"] == JUDGE_MAX_TOKENS for b in hosted)
    assert [b["messages"] for b in local] == [b["messages"] for b in hosted]  # the same prompts
    # the writer and both judges share the endpoint's two slots, with up to 16 requests allowed in flight
    assert max_in_flight == 2
    result.stdout.fnmatch_lines(["*local judge local/judge-l: replies constrained to the judgement's JSON schema*"])
    report = json.loads(out.read_text())
    assert report["benchmarks"][0]["raw_mean"] == pytest.approx(4.0)


def test_the_judge_of_an_answer_goes_before_the_answers_still_waiting(tmp_path):
    """One slot, four requests allowed in flight, twelve answers; the judge of answer 0 is queued when it arrives.
    It is sent as soon as the slot is free again after the answer already granted it (answer 1), not after the
    answers queued before it (they would all come first: the judge's item would wait for the whole run)."""
    with running_server(answer="A", latency=0.1) as server:
        spec = ModelSpec(name="openai/toy", litellm_model="openai/toy", api_base=server.url, slots=1)
        answers = [Job(spec, ChatRequest.for_prompt(spec, f"answer {i}", 4)) for i in range(12)]
        judge = Job(spec, ChatRequest.for_prompt(spec, "judge it", 4, purpose="judge:toy:1"))

        def follow_up(job, result):
            return [judge] if job is answers[0] else []

        settings = Settings(concurrency=4, timeout=30)
        sender = BackgroundSender(Scheduler(AnswerCache(tmp_path / "cache", run_id="r"), settings), follow_up)
        sender.start(answers)
        assert isinstance(sender.wait(judge.key), Completion)
        sender.wait(answers[-1].key)
        sender.stop()
        order = [r["json"]["messages"][-1]["content"] for r in server.requests]
    assert order[:3] == ["answer 0", "answer 1", "judge it"], order
