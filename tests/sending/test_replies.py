"""A server's reply is validated before it is cached (issue 20, points 5, 6 and 8): content a string or text parts
joined, anything else, a body over its size bound or malformed usage is a malformed reply (an item error with the
reason, never cached); a reply without usage costs its reserved upper bound in a budget, never $0."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from test_budget import DOLLAR_PER_ANSWER, budget_run

from pytest_medhelm.sending.replies import (
    REPLY_OVERHEAD_BYTES,
    MalformedReply,
    Usage,
    believed_cost,
    bounded_count,
    bounded_float,
    max_reply_bytes,
    reply_reasoning_tokens,
    reply_text,
    reply_usage,
)
from pytest_medhelm.sending.transport import OpenAIWire, RequestFailed
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import MAX_TOKEN_COUNT, ChatRequest, ModelSpec


# ------------------------------------------------------------------------------------------------- the rules
def test_content_is_a_string_or_text_parts_joined() -> None:
    assert reply_text("ok") == "ok" and reply_text(None) == ""
    assert reply_text([{"type": "text", "text": "B"}, {"type": "text", "text": " because"}]) == "B because"
    assert reply_text(["A", {"text": "B"}]) == "AB"
    for content, why in [({"text": "A"}, "content is dict"), (4, "content is int"),
                         ([{"type": "image_url", "image_url": {"url": "x"}}], "content part 0 is not text"),
                         ([{"type": "text", "text": None}], "content part 0 is not text")]:
        with pytest.raises(MalformedReply, match=why):
            reply_text(content)


def test_usage_counts_are_integers_at_least_zero_or_unknown() -> None:
    assert reply_usage({"prompt_tokens": 3, "completion_tokens": 1}) == Usage(3, 1, known=True)
    assert reply_usage(None) == Usage(0, 0, known=False)
    assert reply_usage({"prompt_tokens": 3}) == Usage(3, 0, known=False)  # a count missing: unknown
    for usage, why in [({"prompt_tokens": -1, "completion_tokens": 1}, "usage.prompt_tokens is -1"),
                       ({"prompt_tokens": 1, "completion_tokens": "many"}, "usage.completion_tokens is 'many'"),
                       ({"prompt_tokens": True, "completion_tokens": 1}, "usage.prompt_tokens is True"),
                       ({"prompt_tokens": 1.5, "completion_tokens": 1}, "usage.prompt_tokens is 1.5"),
                       ("lots", "usage is 'lots'")]:
        with pytest.raises(MalformedReply, match=why):
            reply_usage(usage)


def test_usage_numbers_are_bounded_where_they_enter() -> None:
    """Issue 30, item 1: a count is an integer from 0 to 10^9; a cost or a duration a finite number from 0 to its
    bound; an absurd one is malformed (a count, a duration) or unknown (a cost), never a number to sum."""
    assert bounded_count(MAX_TOKEN_COUNT, "x") == 10**9 and bounded_count(12.0, "x") == 12
    assert bounded_count(None, "x") is None
    for value, shown in [(10**9 + 1, "1000000001"), (1e308, "1e+308"), (float("inf"), "inf"),
                         (float("nan"), "nan"), (int("9" * 4299), "an integer of 4,299 digits"),
                         (10**5000, "an integer of more than 4,300 digits")]:
        with pytest.raises(MalformedReply, match=re.escape(f"usage.prompt_tokens is {shown}; expected an integer "
                                                           "from 0 to 1,000,000,000")):
            bounded_count(value, "prompt_tokens")
    with pytest.raises(MalformedReply, match="usage.completion_tokens_details.reasoning_tokens is 1e"):
        reply_reasoning_tokens({"completion_tokens_details": {"reasoning_tokens": 1e300}})
    with pytest.raises(MalformedReply, match="usage.completion_tokens is 1e"):
        reply_usage({"prompt_tokens": 1, "completion_tokens": 1e100})
    assert bounded_float(2.5, "latency", 10.0) == 2.5 and bounded_float(None, "latency", 10.0) is None
    for value in (-1.0, 11.0, float("inf"), float("nan"), True, "1"):
        with pytest.raises(MalformedReply, match="latency is .*; expected a finite number from 0 to 10"):
            bounded_float(value, "latency", 10.0)
    assert believed_cost(0.25) == 0.25
    assert [believed_cost(v) for v in (1e300, float("inf"), float("nan"), -0.5, None)] == [None] * 5


def test_the_size_bound_follows_max_tokens() -> None:
    assert max_reply_bytes(5) == REPLY_OVERHEAD_BYTES + 5 * 32 == 65_696
    assert max_reply_bytes(4096) == 196_608
    assert max_reply_bytes(None) == max_reply_bytes(-3) == REPLY_OVERHEAD_BYTES


# ------------------------------------------------------------------------------------------------- on the wire
def send(url: str, max_tokens: int = 5):
    spec = ModelSpec("openai/m", "openai/m", url)

    async def go():
        wire = OpenAIWire(4)
        try:
            return await wire.send(spec, ChatRequest.for_prompt(spec, "question?", max_tokens), 10.0)
        finally:
            await wire.close()
    return asyncio.run(go())


def test_a_reply_in_text_parts_is_read_as_its_text() -> None:
    with running_server(answer="B because of x", reply_shape="content_parts") as server:
        completion = send(server.url)
    assert completion.text == "B because of x" and completion.usage_known


@pytest.mark.parametrize(("shape", "answer", "why"), [
    ("content_object", "A", r"^malformed reply: content is dict \({'text': 'A'}\); expected a string or a list"),
    ("negative_usage", "A", r"^malformed reply: usage.prompt_tokens is -1000; expected an integer from 0 to "
                            r"1,000,000,000$"),
    ("huge_usage", "A", r"^malformed reply: usage.prompt_tokens is 1e\+308; expected an integer from 0 to "),
    ("long_usage", "A", r"^malformed reply: usage.prompt_tokens is an integer of 4,299 digits; expected an "
                        r"integer from 0 to 1,000,000,000$"),
    ("standard", "x " * 40_000, r"^malformed reply: body over 65,696 bytes \(the bound for max_tokens=5; got "),
])
def test_a_malformed_reply_fails_its_request_with_the_reason(shape: str, answer: str, why: str) -> None:
    with running_server(answer=answer, reply_shape=shape) as server:
        with pytest.raises(RequestFailed, match=why) as info:
            send(server.url)
    assert info.value.status == 200 and not info.value.retryable


def test_a_reply_without_usage_is_an_answer_with_unknown_usage() -> None:
    with running_server(answer="A", reply_shape="no_usage") as server:
        completion = send(server.url)
    assert completion.text == "A" and not completion.usage_known and completion.tokens_out == 0


# ------------------------------------------------------------------------------------------------- in a run
#: a run in this process whatever the variant: one whose mode is not what its test checks (it fills the cache the
#: checked run reads, or reads what it left), and which under xdist cost ~2 CPU-s of interpreters
SERIAL = ["-p", "no:xdist"]


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_text_parts_are_cached_as_text_and_replay(pytester, toy, xdist) -> None:
    data = toy(6)
    out = pytester.path / "r.json"
    with running_server(answer="A", reply_shape="content_parts") as server:
        # (it fills the cache, in this process in both variants: the replay is what is checked in each mode)
        first = budget_run(pytester, data, server, "--medhelm-json", str(out), *SERIAL)
        assert first.ret == 0, first.stdout.str()[-2000:]
        sent = server.count
        again = budget_run(pytester, data, server, "--medhelm-json", str(out), *xdist)  # from the cache
        assert again.ret == 0, again.stdout.str()[-2000:]
        assert server.count == sent == 6
    report = json.loads(out.read_text())
    assert {i["answer"] for i in report["instances"]} == {"A"} and all(i["cached"] for i in report["instances"])


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_malformed_reply_is_an_item_error_and_never_cached(pytester, toy, xdist) -> None:
    data = toy(4)
    out = pytester.path / "r.json"
    with running_server(answer="A", reply_shape="content_object") as server:
        result = budget_run(pytester, data, server, "--medhelm-json", str(out), *xdist)
        assert result.ret == 1
        result.stdout.fnmatch_lines(["*malformed reply: content is dict*"])
        sent = server.count
        assert sent == 4  # not retried: the same server would send the same
        server.configure(reply_shape="standard")
        # (in this process in both variants: it reads what the first run cached, which its own mode does not change)
        again = budget_run(pytester, data, server, "--medhelm-json", str(out), *SERIAL)
        assert again.ret == 0, again.stdout.str()[-2000:]
        assert server.count == sent + 4  # nothing of the malformed replies was kept
    assert [i["error"] for i in json.loads(out.read_text())["instances"]] == [None] * 4


@pytest.mark.parametrize("shape", ["no_usage", "negative_usage"])
def test_a_budget_never_believes_missing_or_negative_usage(pytester, toy, shape) -> None:
    # every request is bounded by exactly $1 (max_tokens=1 at $1 a completion token): $4 fits four of the 40.
    # Serial only: what a reply's usage is worth is settled by Budget.settle whichever ledger holds the counts;
    # tests/run/test_run_core.py holds the budget across an xdist run's processes
    data = toy(40)
    prices = pytester.path / "prices.toml"
    prices.write_text(DOLLAR_PER_ANSWER)
    out = pytester.path / "r.json"
    with running_server(answer="A", reply_shape=shape) as server:
        result = budget_run(pytester, data, server, "--medhelm-prices", str(prices), "--medhelm-budget", "4",
                            "--medhelm-concurrency", "4", "--medhelm-json", str(out), *SERIAL)
        assert server.count == 4, result.stdout.str()[-2000:]
    budget = json.loads(out.read_text())["run"]["budget"]
    assert budget["spent_usd"] == 4.0 and budget["not_sent"] == 36
