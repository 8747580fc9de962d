"""The item's record (pytest_medhelm.item_record): the typed value the model fixture and the assertion write, and
what the results make of it, in one process and across xdist's workers alike."""

from __future__ import annotations

import json
import textwrap

import pytest
from pytester_runs import run as inner

from pytest_medhelm.item_record import ItemRecord, RanOut
from pytest_medhelm.report.records import InstanceRecord
from pytest_medhelm.values import ChatRequest, Completion, ModelSpec


def _request(max_tokens: int = 1, reasoning_budget: int = 0) -> ChatRequest:
    spec = ModelSpec(name="openai/m", litellm_model="openai/m")
    return ChatRequest.for_prompt(spec, "question?", max_tokens, (), reasoning_budget=reasoning_budget)


def test_a_record_without_a_call_or_a_score_writes_nothing():
    assert ItemRecord().fields(keep_thinking=True) == {}


def test_every_calls_accounting_adds_up_and_an_unknown_cost_stays_unknown():
    record = ItemRecord()
    record.add_call(Completion("A", tokens_in=10, tokens_out=1, cost_usd=0.25))
    assert record.fields(False) == {"tokens_in": 10, "tokens_out": 1, "cost_usd": 0.25, "reasoning_tokens": None}
    record.add_call(Completion("B", tokens_in=5, tokens_out=2, cost_usd=0.5, reasoning_tokens=2))
    assert (record.tokens_in, record.tokens_out, record.cost_usd, record.reasoning_tokens) == (15, 3, 0.75, 2)
    record.add_call(Completion("C", tokens_in=1, tokens_out=1, cost_usd=None))
    record.add_call(Completion("D", tokens_in=1, tokens_out=1, cost_usd=1.0))
    assert record.cost_usd is None  # never counted as 0, and never forgotten by a later known cost


def test_the_answer_kept_is_hashed_and_its_thinking_written_only_when_asked():
    record = ItemRecord()
    answer = Completion("A", latency_s=0.1234567, thinking="let me think", cached=True)
    record.keep_answer(answer, "question?", _request(), reasoning_model=True)
    import hashlib

    assert record.prompt_sha256 == hashlib.sha256(b"question?").hexdigest()
    assert record.fields(keep_thinking=False) == {"prompt_sha256": record.prompt_sha256, "answer": "A",
                                                  "latency_s": 0.123457, "cached": True, "thinking_chars": 12}
    assert record.fields(keep_thinking=True)["thinking"] == "let me think"


def test_one_builder_of_ran_out_with_and_without_the_request():
    empty = Completion("", tokens_out=201, finish_reason="length", reasoning_tokens=201)
    assert RanOut.of(Completion("A", finish_reason="length")) is None  # an answer was written
    full = RanOut.of(empty, _request(1, reasoning_budget=200), reasoning_model=True)
    assert full is not None and full.as_json() == {"max_output_tokens": 201, "reasoning_budget": 200,
                                                   "reasoning_tokens": 201, "reasoning_model": True}
    assert full.reason() == ("the token limit ran out before any answer: 201 reasoning tokens spent of a limit of "
                             "201 tokens (200 reasoning budget + the answer's); raise --medhelm-reasoning-budget")
    bare = RanOut.of(empty)  # a Completion a test made itself: only its own counts are known
    assert bare is not None and bare.as_json() == {"max_output_tokens": None, "reasoning_budget": None,
                                                   "reasoning_tokens": 201}
    assert bare.reason().endswith("raise --medhelm-reasoning-budget")
    plain = RanOut.of(empty, _request(1), reasoning_model=False)
    assert plain is not None and "raise" not in plain.reason()


def test_the_results_record_of_an_item_lifts_the_jurys_accounting_and_refuses_what_its_fields_refuse():
    record = ItemRecord(metric="jury", score=0.5, raw_score=3.0, missed=False, expected=None, detail="",
                        metrics={"jury_tokens_in": 7, "jury_cost_usd": 0.01, "jury_instrument": "helm@x"})
    made = InstanceRecord.of_item(record, benchmark="b", model="m", instance_id="1")
    assert (made.jury_tokens_in, made.jury_cost_usd, made.jury_instrument) == (7, 0.01, "helm@x")
    record.tokens_in = 3.5  # type: ignore[assignment]  # (an item's own code may write anything)
    refused = InstanceRecord.of_item(record, benchmark="b", model="m", instance_id="1")
    assert refused.tokens_in is None and "tokens_in" in (refused.metrics or {})["invalid_fields"]


FOLLOW_UP_TEST = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        medhelm_model.complete("First, a question of the test's own: " + medhelm_instance.input, max_tokens=1)
        answer = medhelm_model.answer(medhelm_instance)
        assert_metric(answer, medhelm_instance)
''')

#: the fields of a scored toy item's record, as the results file has always written them
SCORED_ITEM_FIELDS = {"benchmark", "instance_id", "model", "prompt_sha256", "answer", "score", "raw_score",
                      "tokens_in", "tokens_out", "cost_usd", "latency_s", "cached", "error", "subset", "missed",
                      "expected", "metric", "detail", "metrics", "reasoning_tokens", "thinking_chars"}


@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_the_record_reaches_the_results_the_same_from_a_worker_and_from_the_main_process(pytester, toy, server,
                                                                                           mode):
    data = toy(4)
    pytester.makepyfile(test_toy=FOLLOW_UP_TEST)
    out = pytester.path / "r.json"
    result = inner(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                   "--medhelm-data-dir", str(data), "--medhelm-json", str(out), *mode)
    assert result.ret == 0, result.stdout.str()
    records = sorted(json.loads(out.read_text(encoding="utf-8"))["instances"], key=lambda r: r["instance_id"])
    assert [set(rec) for rec in records] == [SCORED_ITEM_FIELDS] * 4
    import hashlib

    for rec in records:
        # both calls accounted; the answer and its prompt are the benchmark's, not the first call's
        assert (rec["tokens_out"], rec["answer"], rec["metric"]) == (2, "A", "exact_match")
        assert rec["tokens_in"] > 0 and rec["reasoning_tokens"] is None and rec["thinking_chars"] == 0
        assert rec["prompt_sha256"] != hashlib.sha256(b"First").hexdigest()
    assert [(rec["score"], rec["missed"]) for rec in records] == [(1.0, False), (0.0, True)] * 2
