"""The parts of ``--medhelm-batch`` that need no run: the batch price, which models go as batches, the batch
protocol's result lines and status objects (fuzzed: a server's reply is untrusted), the records of submitted
batches."""

from __future__ import annotations

import json
import os
import stat

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from pytest_medhelm.cache.batch_records import BatchRecord, BatchRecords
from pytest_medhelm.cost import Prices, PricesError
from pytest_medhelm.sending import batch_api
from pytest_medhelm.sending import batching as batches
from pytest_medhelm.sending.batch_api import (
    BadLine,
    BatchState,
    LineError,
    ResultLines,
    batch_line,
    chunks,
    parse_result_line,
    same_model,
)
from pytest_medhelm.sending.batching import batch_rates, batchable, unbatchable_line
from pytest_medhelm.sending.transport import RequestFailed
from pytest_medhelm.values import Completion, ModelSpec

KEY = "k" * 64


def spec(name: str, api_base: str | None = None, litellm_model: str | None = None) -> ModelSpec:
    return ModelSpec(name=name, litellm_model=litellm_model or name, api_base=api_base)


# ---------------------------------------------------------------------------------------------------- prices
def test_a_prices_file_gives_a_models_batch_factor_and_the_run_prices_it_at_that_rate(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('["openai/ft"]\ninput_per_million = 2.0\noutput_per_million = 8.0\nbatch = 0.25\n')
    prices = Prices.load(path)
    ft = spec("openai/ft", "http://10.0.0.5:8000/v1")
    assert prices.price_for("openai/ft") == (2e-6, 8e-6)  # a direct run: the list price
    prices.batched = batch_rates([ft], prices)
    assert prices.batched == {"openai/ft": 0.25}
    assert prices.price_for("openai/ft") == (0.5e-6, 2e-6)
    assert prices.cost("openai/ft", None, 1000, 100) == 1000 * 0.5e-6 + 100 * 2e-6
    assert prices.completion_cost("openai/ft", None, 1000, 100, reported=99.0) == 1000 * 0.5e-6 + 100 * 2e-6


def test_openai_and_anthropic_public_apis_are_half_price_and_a_server_of_ones_own_is_not_unless_the_file_says():
    prices = Prices(use_litellm=False)
    assert prices.batch_factor("openai/gpt-4o", "openai/gpt-4o", public_api=True) == 0.5
    assert prices.batch_factor("anthropic/claude", "anthropic/claude", public_api=True) == 0.5
    assert prices.batch_factor("openai/ft", "openai/ft", public_api=False) == 1.0
    assert prices.batch_factor("hosted_vllm/x", "hosted_vllm/x", public_api=False) == 1.0
    assert prices.batch_factor("together_ai/x", "together_ai/x", public_api=True) == 1.0
    # a reported cost (litellm's) is scaled as well
    prices.batched = {"openai/gpt-4o": 0.5}
    assert prices.completion_cost("openai/gpt-4o", "openai/gpt-4o", 10, 10, reported=0.02) == 0.01


def test_a_model_sent_elsewhere_by_litellms_environment_is_batched_there_and_not_at_the_providers_rate(monkeypatch):
    """With OPENAI_BASE_URL set, a direct request for openai/... reaches that server (and the cache names it): the
    batch goes there too, and it is not OpenAI's bill, so OpenAI's batch discount does not apply."""
    gpt = spec("openai/gpt-4o")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    assert batches._base(gpt) == batches.OPENAI_PUBLIC
    assert batch_rates([gpt], Prices(use_litellm=False)) == {"openai/gpt-4o": 0.5}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1/")
    assert batches._base(gpt) == "http://127.0.0.1:8000/v1"
    assert batch_rates([gpt], Prices(use_litellm=False)) == {"openai/gpt-4o": 1.0}


@pytest.mark.parametrize("value", ["0", "1.5", "-0.5", '"half"', "true", "nan"])
def test_a_batch_factor_outside_0_to_1_is_refused_naming_the_file_the_table_and_the_key(tmp_path, value):
    path = tmp_path / "prices.toml"
    path.write_text(f'["openai/x"]\ninput_per_million = 1\noutput_per_million = 1\nbatch = {value}\n')
    with pytest.raises(PricesError) as info:
        Prices.load(path)
    message = str(info.value)
    assert str(path) in message and '["openai/x"]' in message and "key batch" in message and "(0, 1]" in message


# ---------------------------------------------------------------------------------------------------- which models
def test_which_models_go_as_batches():
    assert batchable(spec("openai/gpt-4o"))  # OpenAI's own Batch API
    assert batchable(spec("openai/ft", "http://10.0.0.5:8000/v1"))  # a vLLM or a gateway
    assert batchable(spec("hosted_vllm/llama", "http://10.0.0.7:8000/v1"))
    local = ModelSpec(name="local/smollm2", litellm_model="openai/smollm2", api_base="http://127.0.0.1:5000/v1")
    assert not batchable(local)  # a llama.cpp server we start answers one request at a time: no Batch API
    assert not batchable(spec("anthropic/claude-3-7-sonnet-20250219"))  # (Message Batches: not implemented)
    assert not batchable(spec("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"))
    line = unbatchable_line([spec("openai/gpt-4o"), local, spec("anthropic/claude")])
    assert line == ("medhelm: --medhelm-batch: local/smollm2, anthropic/claude have no Batch API (local models, "
                    "models served by several replicas, and litellm's other providers): their requests are sent "
                    "directly")
    # replicas: each request goes to the least busy one, which a batch (submitted to one server) cannot do
    assert not batchable(spec("openai/ft", "http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1"))
    assert unbatchable_line([spec("openai/gpt-4o")]) is None


def test_batches_are_cut_at_the_providers_limits(monkeypatch):
    monkeypatch.setattr(batch_api, "MAX_LINES", 3)
    monkeypatch.setattr(batch_api, "MAX_BYTES", 100)
    lines = [(f"k{i}", b"x" * 30) for i in range(7)]
    assert [len(c) for c in chunks(lines)] == [3, 3, 1]
    big = [("a", b"x" * 60), ("b", b"x" * 60), ("c", b"x" * 10)]
    assert [[k for k, _ in c] for c in chunks(big)] == [["a"], ["b", "c"]]
    line = json.loads(batch_line(KEY, {"model": "m", "messages": []}))
    assert line == {"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": "m", "messages": []}}


# ---------------------------------------------------------------------------------------------------- result lines
def ok_line(key: str = KEY, content: object = "B", usage: object = None) -> bytes:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage if usage is not None else {"prompt_tokens": 12, "completion_tokens": 1}}
    return json.dumps({"id": "r", "custom_id": key, "response": {"status_code": 200, "body": body},
                       "error": None}).encode()


def test_a_result_line_gives_the_answer_or_the_providers_error():
    key, answer = parse_result_line(ok_line(), {KEY})
    assert key == KEY and isinstance(answer, Completion)
    assert (answer.text, answer.tokens_in, answer.tokens_out, answer.finish_reason) == ("B", 12, 1, "stop")
    rejected = json.dumps({"custom_id": KEY, "response": {"status_code": 400, "body": {
        "error": {"message": "max_tokens is too large"}}}, "error": None})
    assert parse_result_line(rejected, {KEY}) == (KEY, LineError("max_tokens is too large", 400))
    expired = json.dumps({"custom_id": KEY, "response": None,
                          "error": {"code": "batch_expired", "message": "not executed in time"}})
    assert parse_result_line(expired, {KEY}) == (KEY, LineError("not executed in time"))


@pytest.mark.parametrize("raw, why", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (ok_line(key="someone else's"), "did not hold"),
    (json.dumps({"custom_id": KEY}).encode(), "neither a response nor an error"),
    (ok_line(content=[{"type": "image_url", "image_url": "x"}]), "not text"),
    (ok_line(usage={"prompt_tokens": -5, "completion_tokens": 1}), "expected an integer from 0 to 1,000,000,000"),
    (ok_line(usage={"prompt_tokens": 1e308, "completion_tokens": 1}), r"prompt_tokens is 1e\+308; expected an integer"),
    (ok_line(usage={"prompt_tokens": 1, "completion_tokens": int("9" * 4299)}),
     "completion_tokens is an integer of 4,299 digits; expected an integer from 0 to 1,000,000,000"),
    (json.dumps({"custom_id": KEY, "response": {"status_code": "200", "body": {}}}).encode(), "not a number"),
])
def test_a_line_that_is_not_a_result_is_named_and_never_an_answer(raw, why):
    with pytest.raises(BadLine, match=why):
        parse_result_line(raw, {KEY})


def test_text_parts_are_joined_and_absent_usage_is_unknown_as_for_a_direct_reply():
    _key, answer = parse_result_line(ok_line(content=[{"type": "text", "text": "B"}, "!"], usage={}), {KEY})
    assert (answer.text, answer.tokens_in, answer.tokens_out, answer.usage_known) == ("B!", 0, 0, False)


def test_a_line_nested_too_deeply_is_its_own_items_error_when_its_custom_id_can_be_read():
    nested = b'{"custom_id": "' + KEY.encode() + b'", "response": {"status_code": 200, "body": ' + b"[" * 20_000 \
        + b"]" * 20_000 + b"}}"
    with pytest.raises(BadLine, match="nested too deeply") as info:
        parse_result_line(nested, {KEY})
    assert info.value.key == KEY
    with pytest.raises(BadLine) as unknown:  # (a custom_id the batch did not hold, or none: no item to blame)
        parse_result_line(nested.replace(KEY.encode(), b"someone"), {KEY})
    assert unknown.value.key is None
    deep_content = ok_line(content={"a": None}).replace(b'{"a": null}', b"[" * 20_000 + b"]" * 20_000)
    with pytest.raises(BadLine, match="nested too deeply") as in_body:
        parse_result_line(deep_content, {KEY})
    assert in_body.value.key == KEY


@pytest.mark.parametrize("replied, asked, same", [
    ("writer", "writer", True), ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", True), ("gpt-4-0613", "gpt-4", True),
    ("gpt-4o-mini", "gpt-4o", False), ("someone-else", "writer", False), ("writer-2024", "writer", True),
    ("writer-x", "writer", False), ("WRITER", "writer", False),
])
def test_a_reply_is_the_batchs_model_or_a_dated_snapshot_of_it(replied, asked, same):
    assert same_model(replied, asked) is same
    line = json.loads(ok_line())
    line["response"]["body"]["model"] = replied
    if same:
        assert isinstance(parse_result_line(json.dumps(line), {KEY}, asked)[1], Completion)
    else:
        with pytest.raises(BadLine, match=f"answers for model '{replied}', not '{asked}'"):
            parse_result_line(json.dumps(line), {KEY}, asked)


def test_a_custom_id_twice_is_refused_for_its_item_and_a_foreign_one_is_said():
    other = "o" * 64
    lines = ResultLines("batch-1", {KEY, other}, {}, 100_000)
    lines.add(ok_line() + b"\n" + ok_line(content="C") + b"\n" + ok_line(key=other) + b"\n" + ok_line(key="x") + b"\n")
    assert isinstance(lines.results[other], Completion)
    assert isinstance(lines.results[KEY], BadLine) and "on 2 lines" in str(lines.results[KEY])
    assert lines.lines == {KEY: 2, other: 1}
    assert any("did not hold: custom_id 'x'" in n for n in lines.notes)
    assert any("is on more than one result line" in n for n in lines.notes)
    lines.add(ok_line())  # a third: still refused, said once
    assert "on 3 lines" in str(lines.results[KEY]) and len(lines.notes) == 2


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                    max_size=5), max_leaves=20)


USAGE_NUMBERS = (st.integers() | st.floats(allow_nan=False) | st.integers(1, 4299).map(lambda d: int("9" * d))
                 | st.sampled_from([1e308, 10**9, 10**9 + 1]))


@fuzz(600)
@given(st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"custom_id": st.sampled_from([KEY, "other"]), "response": JSON, "error": JSON})
    .map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"custom_id": st.just(KEY), "error": st.none(), "response": st.fixed_dictionaries(
        {"status_code": st.integers(100, 599) | JSON, "body": JSON})}).map(lambda v: json.dumps(v).encode()),
    # a well-formed line whose usage numbers are anything (issue 30, item 1): 1e308, 4,299 digits, negatives...
    st.fixed_dictionaries({"prompt_tokens": USAGE_NUMBERS, "completion_tokens": USAGE_NUMBERS}).map(
        lambda usage: ok_line(usage=usage)),
))
def test_fuzz_any_line_a_server_sends_is_a_result_or_a_bad_line(raw):
    try:
        key, result = parse_result_line(raw, {KEY})
    except BadLine:
        return
    assert key == KEY and isinstance(result, (Completion, LineError))
    if isinstance(result, Completion):
        assert isinstance(result.text, str) and 0 <= result.tokens_in <= 10**9 and 0 <= result.tokens_out <= 10**9


@fuzz(400)
@given(JSON | st.fixed_dictionaries({"id": st.text(max_size=8), "status": st.sampled_from(
    ["validating", "in_progress", "completed", "failed", "expired", "bogus"]), "request_counts": JSON,
    "output_file_id": JSON, "error_file_id": JSON, "errors": JSON, "created_at": JSON, "completed_at": JSON}))
def test_fuzz_any_batch_object_is_read_or_refused_with_a_request_failure(data):
    try:
        state = BatchState.of(data)
    except RequestFailed as exc:
        assert exc.message
        return
    assert state.id and state.status in batch_api.KNOWN_STATUSES
    assert 0 <= min(state.total, state.completed, state.failed) <= max(state.total, state.completed,
                                                                        state.failed) <= 10**9
    assert state.took_s is None or 0 <= state.took_s <= 1e6
    assert state.output_file_id is None or "/" not in state.output_file_id


def test_a_batch_objects_absurd_counts_and_times_are_not_believed():
    """Issue 30, item 1: a count over 10^9 reads as 0, a duration over 10^6 s (or negative) as not said."""
    base = {"id": "batch-1", "status": "completed"}
    state = BatchState.of({**base, "request_counts": {"total": int("9" * 4299), "completed": 10**9 + 1,
                                                      "failed": 3}, "created_at": 0, "completed_at": 1e308})
    assert (state.total, state.completed, state.failed, state.took_s) == (0, 0, 3, None)
    assert BatchState.of({**base, "created_at": 100, "completed_at": 160}).took_s == 60.0
    assert BatchState.of({**base, "created_at": 160, "completed_at": 100}).took_s is None


# ---------------------------------------------------------------------------------------------------- records
def test_a_submitted_batch_is_recorded_privately_until_collected_and_a_bad_record_is_skipped(tmp_path):
    records = BatchRecords(tmp_path)
    records.save(BatchRecord(batch_id="batch-1", base="http://s/v1", model="openai/m", keys=[KEY]))
    records.save(BatchRecord(batch_id="batch-2", base="http://other/v1", model="openai/m", keys=["x"]))
    (records.folder / "broken.json").write_text("{")
    [mine] = records.pending("http://s/v1", "openai/m")
    assert (mine.batch_id, mine.keys) == ("batch-1", [KEY])
    assert len(records.problems) == 1 and "broken.json: not a batch record" in records.problems[0]
    assert stat.S_IMODE(os.stat(records.folder).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600
               for p in records.folder.glob("*.json") if p.name != "broken.json")
    records.remove("batch-1")
    assert records.pending("http://s/v1", "openai/m") == []
