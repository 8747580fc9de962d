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
#: the header Anthropic requires of every request (litellm sends it)
VERSION = {"anthropic-version": "2023-06-01"}


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
    srv.set_answer("A")  # (and no rules, no script)
    srv.configure(answer="A", reasoning_tokens=0, reasoning_shape="hidden", thinking_text="", api_key=None,
                  faults=[], fail_matching={}, latency=0, stop_after=None)
    return srv


def claude(srv, body: dict, headers: dict | None = None, path: str = "/v1/messages") -> tuple[int, dict]:
    """POST ``body`` to the server's Messages API with the headers Anthropic requires."""
    return post(srv.base_url + path, body, {**VERSION, **(headers or {})})


@pytest.mark.parametrize("model, extra, param, code", [
    ("o3-mini", {"max_tokens": 5}, "max_tokens", "unsupported_parameter"),
    ("openai/o1", {"temperature": 0}, "temperature", "unsupported_value"),
    ("o4-mini", {"top_p": 0.5}, "top_p", "unsupported_parameter"),
    ("o3", {"presence_penalty": 0}, "presence_penalty", "unsupported_parameter"),
    ("gpt-5", {"stop": ["\n"]}, "stop", "unsupported_parameter"),
    ("gpt-5-mini", {"frequency_penalty": 0}, "frequency_penalty", "unsupported_parameter"),
    ("o3-mini", {"reasoning_effort": "minimal"}, "reasoning_effort", "unsupported_value"),
    ("o3-mini", {"reasoning_effort": "extreme"}, "reasoning_effort", "unsupported_value"),
    ("o1", {"logprobs": True}, "logprobs", "unsupported_parameter"),
    ("azure/gpt-5-nano", {"temperature": 0.2}, "temperature", "unsupported_value"),
    ("gpt-5.1", {"max_tokens": 5}, "max_tokens", "unsupported_parameter"),
])
def test_openai_refuses_what_a_reasoning_model_does_not_take(fresh, model, extra, param, code):
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "model": model, **extra})
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"], body["error"]["type"]) == (param, code,
                                                                                       "invalid_request_error")


def test_the_refusals_say_what_openai_says(fresh):
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "max_tokens": 5})
    assert status == 400 and body["error"]["message"] == (
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
    status, body = post(fresh.url + "/chat/completions", {**OK_O3, "temperature": 0})
    assert status == 400 and body["error"]["message"] == (
        "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.")
    assert fresh.requests[0]["status"] == 400 and fresh.stats()["answered"] == 0


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


def test_without_a_limit_the_thinking_is_spent_whole_and_without_thinking_usage_has_no_details(fresh):
    fresh.configure(reasoning_tokens=500)
    body = post(fresh.url + "/chat/completions", {"model": "o3-mini", "messages": OK_O3["messages"]})[1]
    assert body["choices"][0]["message"]["content"] == "A" and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 501
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 500}
    fresh.configure(reasoning_tokens=0)
    assert "completion_tokens_details" not in post(fresh.url + "/chat/completions", OK_O3)[1]["usage"]


def test_thinking_that_takes_exactly_the_limit_ends_the_reply_even_for_an_empty_answer(fresh):
    fresh.configure(reasoning_tokens=5, answer="")
    choice = post(fresh.url + "/chat/completions", {**OK_O3, "max_completion_tokens": 5})[1]["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "length")


def test_max_tokens_is_the_limit_when_there_is_no_max_completion_tokens(fresh):
    fresh.configure(reasoning_tokens=4, reasoning_shape="reasoning_content", answer="B because")
    body = post(fresh.url + "/chat/completions", {"model": "deepseek-r1", "messages": OK_O3["messages"],
                                                  "max_tokens": 5})[1]
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "B",
                                             "reasoning_content": "hmm hmm hmm hmm"}
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 5
    body = post(fresh.url + "/chat/completions", {"model": "deepseek-r1", "messages": OK_O3["messages"],
                                                  "max_tokens": 1, "max_completion_tokens": 50})[1]
    assert body["choices"][0]["message"]["content"] == "B because"  # (max_completion_tokens wins)


def test_null_content_is_null_only_when_there_is_no_answer(fresh):
    fresh.configure(reasoning_tokens=2, reasoning_shape="null_content")
    body = {"model": "qwen3", "messages": OK_O3["messages"], "max_tokens": 10}
    message = post(fresh.url + "/chat/completions", body)[1]["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "A", "reasoning_content": "hmm hmm"}


def test_a_scripts_dict_is_the_whole_reply(fresh):
    reply = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "o3-mini",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "reasoning": "hm"},
                          "finish_reason": "length"}],
             "usage": {"prompt_tokens": 1, "completion_tokens": 7, "total_tokens": 8}}
    fresh.set_answer(lambda body: reply if body["messages"][-1]["content"] == "whole" else None)
    fresh.configure(reasoning_tokens=3, reasoning_shape="inline")
    assert post(fresh.url + "/chat/completions", {**OK_O3, "messages": [{"role": "user", "content": "whole"}]}) == (
        200, reply)
    # a script that falls through still gets the thinking and the constant answer
    assert post(fresh.url + "/chat/completions", OK_O3)[1]["choices"][0]["message"]["content"] == (
        "<think>hmm hmm hmm</think>\n\nA")
    fresh.set_answer(lambda body: {"type": "message", "content": []})
    assert claude(fresh, {**ANTHROPIC, "thinking": {"type": "disabled"}}) == (200, {"type": "message", "content": []})
    fresh.set_answer(lambda body: ["not", "a", "reply"])
    status, body = post(fresh.url + "/chat/completions", OK_O3)
    assert status == 500 and "script must return a string, a dict" in body["error"]["message"]


def test_a_bad_option_is_refused_where_it_is_given(fresh):
    with pytest.raises(ValueError, match="reasoning_shape must be one of"):
        fresh.configure(reasoning_shape="telepathy")
    with pytest.raises(ValueError, match="reasoning_tokens must be an integer >= 0"):
        fresh.configure(reasoning_tokens=-1)
    with pytest.raises(ValueError, match="reasoning_tokens must be an integer >= 0"):
        fresh.configure(reasoning_tokens=True)
    with pytest.raises(ValueError, match="thinking_text must be a string"):
        fresh.configure(thinking_text=["hmm"])
    assert fresh.configure()["reasoning_shape"] == "hidden"  # (nothing changed by the refused options)


def test_the_command_line_takes_the_reasoning_options():
    from pytest_medhelm.testing.server.cli import _parse_args

    _, config = _parse_args(["--reasoning-tokens", "7", "--reasoning-shape", "inline", "--thinking-text", "so"])
    assert config == {"reasoning_tokens": 7, "reasoning_shape": "inline", "thinking_text": "so"}
    with pytest.raises(SystemExit):
        _parse_args(["--reasoning-tokens", "-3"])


def run_batch(srv, *bodies: dict) -> dict:
    """A batch of ``bodies`` (lines k1, k2...) through the server's Files and Batches API, polled once: the batch."""
    from pytest_medhelm.sending.batch_api import batch_line  # (the plugin's own line format)
    from pytest_medhelm.testing.server.batches import configure_batches

    configure_batches(srv.url, reset=True, polls=1)
    content = b"".join(batch_line(f"k{n}", body) for n, body in enumerate(bodies, 1))
    boundary = "b0undary"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\n"
            f"Content-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
            "Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(srv.url + "/files", data=form,
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        file_id = json.load(response)["id"]
    batch = post(srv.url + "/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                        "completion_window": "24h"})[1]
    with urllib.request.urlopen(srv.url + f"/batches/{batch['id']}", timeout=10) as response:
        return json.load(response)


def test_a_batch_line_is_checked_as_a_direct_request(fresh):
    batch = run_batch(fresh, OK_O3, {**OK_O3, "max_tokens": 5})
    assert batch["status"] == "failed"
    [error] = batch["errors"]["data"]
    direct = post(fresh.url + "/chat/completions", {**OK_O3, "max_tokens": 5})[1]["error"]
    assert (error["line"], error["param"], error["code"], error["message"]) == (
        2, "max_tokens", "unsupported_parameter", direct["message"])
    assert direct["message"].startswith("Unsupported parameter: 'max_tokens' is not supported with this model.")
    assert batch_stats(fresh.url)["batches_created"] == 1


def test_a_batch_lines_reply_thinks_as_a_direct_one(fresh):
    fresh.configure(reasoning_tokens=30, reasoning_shape="reasoning_content")
    batch = run_batch(fresh, OK_O3, {**OK_O3, "max_completion_tokens": 20})
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 2
    with urllib.request.urlopen(fresh.url + f"/files/{batch['output_file_id']}/content", timeout=10) as response:
        lines = [json.loads(line) for line in response.read().splitlines()]
    replies = {line["custom_id"]: line["response"]["body"] for line in lines}
    assert replies["k1"]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 30}
    assert replies["k1"]["choices"][0]["message"]["reasoning_content"] == " ".join(["hmm"] * 30)
    assert (replies["k2"]["choices"][0]["message"]["content"], replies["k2"]["choices"][0]["finish_reason"]) == (
        "", "length")
    assert replies["k2"]["usage"]["completion_tokens"] == 20


ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 1100, "messages": [{"role": "user", "content": "Q"}],
             "thinking": {"type": "enabled", "budget_tokens": 1024}}


def test_anthropic_messages_with_thinking(fresh):
    fresh.configure(reasoning_tokens=6, thinking_text="compare the options one by one and more")
    status, body = claude(fresh, ANTHROPIC)
    assert status == 200 and body["type"] == "message" and body["stop_reason"] == "end_turn"
    thinking, text = body["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "compare the options one by one"
    assert thinking["signature"] and text == {"type": "text", "text": "A"}
    assert body["usage"] == {"input_tokens": 1, "output_tokens": 7}  # (the thinking cut to the 6 tokens spent)
    [logged] = fresh.requests
    assert logged["api"] == "anthropic" and logged["path"] == "/v1/messages"


def test_anthropic_thinking_spends_at_most_its_budget_and_max_tokens_can_end_it(fresh):
    fresh.configure(reasoning_tokens=5000)
    body = claude(fresh, ANTHROPIC)[1]
    assert [block["type"] for block in body["content"]] == ["thinking", "text"]
    assert body["usage"]["output_tokens"] == 1024 + 1
    fresh.configure(answer="a longer answer")
    body = claude(fresh, {**ANTHROPIC, "max_tokens": 1025})[1]
    assert body["stop_reason"] == "max_tokens" and body["content"][1]["text"] == "a"


@pytest.mark.parametrize("change, message", [
    ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
    ({"max_tokens": 1024}, "must be greater than `thinking.budget_tokens`"),
    ({"temperature": 0}, "`temperature` may only be set to 1"),
    ({"top_k": 5}, "`top_k` cannot be set"),
    ({"max_tokens": None}, "max_tokens"),
    ({"top_p": 0.9}, "`top_p` cannot be set"),
    ({"messages": []}, "messages: at least one message"),
    ({"model": ""}, "model: Field required"),
    ({"thinking": {"type": "enabled"}}, "thinking: expected"),
    ({"stop_sequences": "\n"}, "stop_sequences"),
])
def test_anthropic_refuses_a_thinking_request_it_does_not_take(fresh, change, message):
    status, body = claude(fresh, {**ANTHROPIC, **change})
    assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert message in body["error"]["message"]


def test_anthropic_key_is_x_api_key(fresh):
    fresh.configure(api_key="sk-ant-test")
    status, body = claude(fresh, ANTHROPIC, {"Authorization": "Bearer sk-ant-test"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert claude(fresh, ANTHROPIC, {"x-api-key": "sk-ant-test"})[0] == 200


def test_anthropic_requires_its_version_header(fresh):
    status, body = post(fresh.base_url + "/v1/messages", ANTHROPIC)
    assert status == 400 and body == {"type": "error", "error": {"type": "invalid_request_error",
                                                                 "message": "anthropic-version: header is required"}}


def test_anthropic_takes_what_it_refuses_while_thinking_when_thinking_is_off(fresh):
    fresh.configure(reasoning_tokens=50, answer="the answer")
    plain = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "Q"}],
             "temperature": 0, "top_k": 5, "top_p": 0.9, "system": [{"type": "text", "text": "be brief please"}]}
    status, body = claude(fresh, plain, path="/messages")
    assert status == 200
    assert body["content"] == [{"type": "text", "text": "the answer"}]  # no thinking block, no tokens thought
    assert body["usage"] == {"input_tokens": 4, "output_tokens": 2}  # (the system blocks count)
    assert body["id"].startswith("msg_") and body["role"] == "assistant" and body["model"] == "claude-sonnet-4-5"
    assert (body["stop_reason"], body["stop_sequence"]) == ("end_turn", None)
    assert fresh.requests[0]["path"] == "/messages" and fresh.requests[0]["api"] == "anthropic"


def test_anthropic_stops_at_a_stop_sequence(fresh):
    fresh.configure(answer="A\nBecause the abstract says so")
    body = claude(fresh, {**ANTHROPIC, "stop_sequences": ["abstract", "\n"]})[1]
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "\n")
    assert body["content"][1] == {"type": "text", "text": "A"}
    body = claude(fresh, {**ANTHROPIC, "stop_sequences": ["never"]})[1]
    assert (body["stop_reason"], body["stop_sequence"]) == ("end_turn", None)


def test_anthropic_thinking_spends_the_configured_tokens_within_the_limit(fresh):
    fresh.configure(reasoning_tokens=1024, answer="one two three")
    body = claude(fresh, {**ANTHROPIC, "max_tokens": 1026})[1]  # 2 tokens left after the thinking
    assert body["stop_reason"] == "max_tokens" and body["content"][1] == {"type": "text", "text": "one two"}
    assert body["usage"]["output_tokens"] == 1026 and len(body["content"][0]["thinking"].split()) == 1024


def test_anthropic_shares_the_faults_rules_and_stop_after_of_the_chat_endpoint(fresh):
    fresh.configure(rules={"dose": "B"}, faults=[("status", 429, {"Retry-After": "1"}), ("status", 500)],
                    fail_matching={"poison": ("status", 503)})
    status, body = claude(fresh, ANTHROPIC)
    assert status == 429 and body == {"type": "error", "error": {"type": "rate_limit_error", "message": "HTTP 429"}}
    assert claude(fresh, ANTHROPIC)[1]["error"]["type"] == "api_error"
    blocks = [{"type": "text", "text": "what dose?"}]
    assert claude(fresh, {**ANTHROPIC, "messages": [{"role": "user", "content": blocks}]})[1]["content"][1] == {
        "type": "text", "text": "B"}
    assert claude(fresh, {**ANTHROPIC, "messages": [{"role": "user", "content": "poison"}]})[0] == 503
    assert [r["status"] for r in fresh.requests] == [429, 500, 200, 503]
    assert fresh.stats()["answered"] == 1


def test_anthropic_requests_count_toward_stop_after():
    with running_server(stop_after=2) as own:  # (its own server: this one goes down)
        assert post(own.url + "/chat/completions", OK_O3)[0] == 200
        assert claude(own, ANTHROPIC)[0] == 200
        with pytest.raises(OSError):  # (reset or refused: the server went down, as after a chat request)
            claude(own, ANTHROPIC)
        with pytest.raises(OSError):
            post(own.url + "/chat/completions", OK_O3)


LITELLM_CLAUDE = {"model": "anthropic/claude-sonnet-4-5", "messages": [{"role": "user", "content": "Q"}],
                  "max_tokens": 1100, "thinking": {"type": "enabled", "budget_tokens": 1024}, "num_retries": 0}


def acompletion(**kwargs):
    """``litellm.acompletion(**kwargs)``, the real library, run to its end."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # (never the network for its price list)
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    return asyncio.run(litellm.acompletion(**kwargs))


def test_litellm_reaches_the_messages_api_and_reads_the_thinking(fresh):
    fresh.configure(reasoning_tokens=4, thinking_text="weigh each option", api_key="sk-ant-test")
    reply = acompletion(api_base=fresh.base_url, api_key="sk-ant-test", **LITELLM_CLAUDE)
    [logged] = fresh.requests
    assert (logged["path"], logged["api"], logged["status"]) == ("/v1/messages", "anthropic", 200)
    assert logged["auth_fingerprint"] is not None and logged["headers"]["anthropic-version"]
    assert logged["json"]["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    message = reply.choices[0].message
    assert message.content == "A" and message.reasoning_content == "weigh each option"
    assert [block["type"] for block in message.thinking_blocks] == ["thinking"]
    assert message.thinking_blocks[0]["thinking"] == "weigh each option" and message.thinking_blocks[0]["signature"]
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == 5  # (output_tokens: 4 thinking + 1 answer)


def test_litellm_sees_anthropic_refuse_a_thinking_request(fresh):
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    with pytest.raises(litellm.BadRequestError, match="must be greater than `thinking.budget_tokens`"):
        acompletion(api_base=fresh.base_url, api_key="k", **{**LITELLM_CLAUDE, "max_tokens": 1024})
    fresh.configure(api_key="sk-ant-test")
    with pytest.raises(litellm.AuthenticationError):
        acompletion(api_base=fresh.base_url, api_key="wrong", **LITELLM_CLAUDE)


def test_litellm_reaches_o3_mini_and_reads_its_reasoning_tokens(fresh):
    fresh.configure(reasoning_tokens=4)
    reply = acompletion(model="openai/o3-mini", api_base=fresh.url, api_key="k", num_retries=0,
                        messages=[{"role": "user", "content": "Q"}], max_completion_tokens=50)
    [logged] = fresh.requests
    assert (logged["path"], logged["status"]) == ("/v1/chat/completions", 200)
    assert logged["json"]["max_completion_tokens"] == 50 and "max_tokens" not in logged["json"]
    assert reply.choices[0].message.content == "A" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens_details.reasoning_tokens == 4 and reply.usage.completion_tokens == 5


def test_litellm_sees_o3_minis_budget_run_out(fresh):
    fresh.configure(reasoning_tokens=40)
    reply = acompletion(model="openai/o3-mini", api_base=fresh.url, api_key="k", num_retries=0,
                        messages=[{"role": "user", "content": "Q"}], max_completion_tokens=10)
    assert reply.choices[0].message.content in ("", None) and reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens_details.reasoning_tokens == 10 and reply.usage.completion_tokens == 10
