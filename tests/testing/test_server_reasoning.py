"""pytest_medhelm/testing/server/reasoning.py and wire.py: the test server plays reasoning models as the providers
document them (OpenAI's 400s for reasoning models, reasoning tokens spent out of the limit, the thinking's shapes,
Anthropic's Messages API with thinking), so that the plugin's support is tested against what it will meet."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from pytest_medhelm.testing.server import batch_stats, running_server

OK_O3 = {"model": "o3-mini", "messages": [{"role": "user", "content": "Q"}], "max_completion_tokens": 100}


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def srv():
    with running_server(answer="A") as server:
        yield server


@pytest.fixture
def fresh(srv):
    srv.reset()
    srv.configure(answer="A", reasoning_tokens=0, reasoning_shape="hidden", thinking_text="", api_key=None)
    return srv


@pytest.mark.parametrize("model, extra, param, code", [
    ("o3-mini", {"max_tokens": 5}, "max_tokens", "unsupported_parameter"),
    ("openai/o1", {"temperature": 0}, "temperature", "unsupported_value"),
    ("o4-mini", {"top_p": 0.5}, "top_p", "unsupported_parameter"),
    ("o3", {"presence_penalty": 0}, "presence_penalty", "unsupported_parameter"),
    ("gpt-5", {"stop": ["\n"]}, "stop", "unsupported_parameter"),
    ("gpt-5-mini", {"frequency_penalty": 0}, "frequency_penalty", "unsupported_parameter"),
    ("o3-mini", {"reasoning_effort": "minimal"}, "reasoning_effort", "unsupported_value"),
    ("o3-mini", {"reasoning_effort": "extreme"}, "reasoning_effort", "unsupported_value"),
])
def test_openai_refuses_what_a_reasoning_model_does_not_take(fresh, model, extra, param, code):
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "model": model, **extra})
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"], body["error"]["type"]) == (param, code,
                                                                                       "invalid_request_error")


@pytest.mark.parametrize("extra", [{}, {"temperature": 1}, {"reasoning_effort": "low"}, {"stop": ["\n"]}])
def test_a_request_a_reasoning_model_takes_is_answered(fresh, extra):
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, **extra})
    assert status == 200 and body["choices"][0]["message"]["content"] == "A"


def test_gpt5_takes_minimal_effort_and_plain_models_are_not_checked(fresh):
    assert post(fresh.url + "/chat/completions", {**OK_O3, "model": "gpt-5", "reasoning_effort": "minimal"})[0] == 200
    plain = {"model": "gpt-4o", "messages": OK_O3["messages"], "max_tokens": 1, "temperature": 0, "stop": ["\n"]}
    assert post(fresh.url + "/chat/completions", plain)[0] == 200


def test_reasoning_tokens_are_spent_out_of_the_limit_and_reported(fresh):
    fresh.configure(reasoning_tokens=50, answer="the answer is A")
    status, body = post(fresh.url + "/chat/completions", OK_O3)
    assert status == 200
    assert body["choices"][0] == {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "the answer is A"}}
    assert body["usage"]["completion_tokens"] == 54
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 50}
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "max_completion_tokens": 52})
    assert body["choices"][0]["message"]["content"] == "the answer" and body["choices"][0]["finish_reason"] == "length"


def test_a_limit_the_thinking_takes_whole_gives_no_answer(fresh):
    fresh.configure(reasoning_tokens=50)
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "max_completion_tokens": 1})
    assert status == 200
    assert (body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"]) == ("", "length")
    assert body["usage"]["completion_tokens"] == 1
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}


@pytest.mark.parametrize("shape, message", [
    ("reasoning_content", {"role": "assistant", "content": "A", "reasoning_content": "weigh the abstract"}),
    ("reasoning", {"role": "assistant", "content": "A", "reasoning": "weigh the abstract"}),
    ("inline", {"role": "assistant", "content": "<think>weigh the abstract</think>\n\nA"}),
])
def test_the_thinkings_shapes(fresh, shape, message):
    fresh.configure(reasoning_tokens=3, reasoning_shape=shape, thinking_text="weigh the abstract carefully")
    body = {"model": "deepseek-r1", "messages": OK_O3["messages"], "max_tokens": 10}
    assert post(fresh.url + "/chat/completions", body)[1]["choices"][0]["message"] == message


def test_inline_thinking_cut_by_the_limit_is_an_unclosed_block_and_null_content_is_null(fresh):
    fresh.configure(reasoning_tokens=20, reasoning_shape="inline")
    body = {"model": "qwen3", "messages": OK_O3["messages"], "max_tokens": 3}
    choice = post(fresh.url + "/chat/completions", body)[1]["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("<think>hmm hmm hmm", "length")
    fresh.configure(reasoning_shape="null_content")
    choice = post(fresh.url + "/chat/completions", body)[1]["choices"][0]
    assert choice["message"]["content"] is None and choice["message"]["reasoning_content"] == "hmm hmm hmm"


def test_a_bad_option_is_refused_where_it_is_given(fresh):
    with pytest.raises(ValueError, match="reasoning_shape must be one of"):
        fresh.configure(reasoning_shape="telepathy")
    with pytest.raises(ValueError, match="reasoning_tokens must be an integer >= 0"):
        fresh.configure(reasoning_tokens=-1)


def test_a_batch_line_is_checked_as_a_direct_request(fresh):
    from pytest_medhelm.models.batch_api import batch_line  # (the plugin's own line format)
    from pytest_medhelm.testing.server.batches import configure_batches

    configure_batches(fresh.url, reset=True, polls=1)
    content = batch_line("k1", {**OK_O3, "max_tokens": 5})
    boundary = "b0undary"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\n"
            f"Content-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
            "Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(fresh.url + "/files", data=form,
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        file_id = json.load(response)["id"]
    batch = post(fresh.url + "/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                          "completion_window": "24h"})[1]
    with urllib.request.urlopen(fresh.url + f"/batches/{batch['id']}", timeout=10) as response:
        batch = json.load(response)
    assert batch["status"] == "failed"
    [error] = batch["errors"]["data"]
    assert (error["param"], error["code"]) == ("max_tokens", "unsupported_parameter")
    assert batch_stats(fresh.url)["batches_created"] == 1


ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 1100, "messages": [{"role": "user", "content": "Q"}],
             "thinking": {"type": "enabled", "budget_tokens": 1024}}


def test_anthropic_messages_with_thinking(fresh):
    fresh.configure(reasoning_tokens=6, thinking_text="compare the options one by one and more")
    status, body = post(fresh.base_url + "/v1/messages", ANTHROPIC)
    assert status == 200 and body["type"] == "message" and body["stop_reason"] == "end_turn"
    thinking, text = body["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "compare the options one by one"
    assert thinking["signature"] and text == {"type": "text", "text": "A"}
    assert body["usage"] == {"input_tokens": 1, "output_tokens": 7}  # (the thinking cut to the 6 tokens spent)
    [logged] = fresh.requests
    assert logged["api"] == "anthropic" and logged["path"] == "/v1/messages"


def test_anthropic_thinking_spends_at_most_its_budget_and_max_tokens_can_end_it(fresh):
    fresh.configure(reasoning_tokens=5000)
    body = post(fresh.base_url + "/v1/messages", ANTHROPIC)[1]
    assert [block["type"] for block in body["content"]] == ["thinking", "text"]
    assert body["usage"]["output_tokens"] == 1024 + 1
    fresh.configure(answer="a longer answer")
    body = post(fresh.base_url + "/v1/messages", {**ANTHROPIC, "max_tokens": 1025})[1]
    assert body["stop_reason"] == "max_tokens" and body["content"][1]["text"] == "a"


@pytest.mark.parametrize("change, message", [
    ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
    ({"max_tokens": 1024}, "must be greater than `thinking.budget_tokens`"),
    ({"temperature": 0}, "`temperature` may only be set to 1"),
    ({"top_k": 5}, "`top_k` cannot be set"),
    ({"max_tokens": None}, "max_tokens"),
])
def test_anthropic_refuses_a_thinking_request_it_does_not_take(fresh, change, message):
    status, body = post(fresh.base_url + "/v1/messages", {**ANTHROPIC, **change})
    assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert message in body["error"]["message"]


def test_anthropic_key_is_x_api_key(fresh):
    fresh.configure(api_key="sk-ant-test")
    status, body = post(fresh.base_url + "/v1/messages", ANTHROPIC, {"Authorization": "Bearer sk-ant-test"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert post(fresh.base_url + "/v1/messages", ANTHROPIC, {"x-api-key": "sk-ant-test"})[0] == 200


def test_litellm_reaches_both_apis_and_reads_the_thinking(fresh, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    fresh.configure(reasoning_tokens=4, thinking_text="weigh each option")

    async def both():
        claude = await litellm.acompletion(model="anthropic/claude-sonnet-4-5", api_base=fresh.base_url, api_key="k",
                                           messages=[{"role": "user", "content": "Q"}], max_tokens=1100,
                                           thinking={"type": "enabled", "budget_tokens": 1024}, num_retries=0)
        o3 = await litellm.acompletion(model="openai/o3-mini", api_base=fresh.url, api_key="k",
                                       messages=[{"role": "user", "content": "Q"}], max_completion_tokens=50,
                                       num_retries=0)
        return claude, o3

    claude, o3 = asyncio.run(both())
    message = claude.choices[0].message
    assert message.content == "A" and message.reasoning_content == "weigh each option"
    assert message.thinking_blocks[0]["thinking"] == "weigh each option"
    assert o3.choices[0].message.content == "A"
    assert o3.usage.completion_tokens_details.reasoning_tokens == 4
