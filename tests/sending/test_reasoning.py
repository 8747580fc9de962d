"""pytest_medhelm/sending/reasoning.py: which models think, what each family is sent, what of a reply is the answer."""

from __future__ import annotations

import dataclasses

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from pytest_medhelm.sending.reasoning import (
    ANTHROPIC_MIN_BUDGET,
    DEFAULT_BUDGET,
    answer_of,
    family_of,
    generation_parameters,
    reasoning_for,
    stops_after,
)
from pytest_medhelm.sending.replies import MalformedReply, reply_reasoning_tokens, reply_thinking
from pytest_medhelm.sending.transport import chat_body
from pytest_medhelm.values import ChatRequest, Completion, ModelSpec, split_thinking


def spec(name: str, api_base: str | None = None, *, budget: int | None = None, effort: str | None = None,
         reproduce: bool = False) -> ModelSpec:
    plain = ModelSpec(name=name, litellm_model=name, api_base=api_base)
    return dataclasses.replace(plain, reasoning=reasoning_for(plain, budget=budget, effort=effort,
                                                              reproduce=reproduce))


@pytest.mark.parametrize("name", ["openai/o3-mini", "openai/o1", "o4-mini", "azure/o4-mini", "openai/gpt-5",
                                  "openai/gpt-5-mini", "openrouter/openai/gpt-5.1", "openai/o3-2025-04-16"])
def test_openai_reasoning_models_by_helms_rule(name):
    assert family_of(ModelSpec(name, name), thinking_asked=False, budget_given=False) == "openai"


@pytest.mark.parametrize("name", ["openai/gpt-4o", "openai/gpt-4.1-2025-04-14", "openai/omni-moderation-latest",
                                  "anthropic/claude-3-7-sonnet-20250219", "hosted_vllm/llama-3.3-70b",
                                  "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", "local/smollm2",
                                  "hosted_vllm/Qwen/Qwen3-30B-A3B-Instruct-2507"])
def test_plain_models_stay_plain(name):
    assert spec(name).reasoning is None


@pytest.mark.parametrize("name", ["hosted_vllm/deepseek-ai/DeepSeek-R1", "deepseek/deepseek-reasoner",
                                  "hosted_vllm/Qwen/Qwen3-8B", "openai/QwQ-32B", "hosted_vllm/openai/gpt-oss-20b",
                                  "together_ai/deepseek-ai/DeepSeek-R1-Distill-Llama-70B"])
def test_served_reasoners_known_by_name(name):
    reasoning = spec(name, "http://127.0.0.1:8000/v1").reasoning
    assert reasoning is not None and reasoning.family == "served"
    assert (reasoning.budget, reasoning.source) == (DEFAULT_BUDGET, "default")


def test_a_budget_given_makes_any_model_at_a_url_a_served_reasoner_but_not_a_provider_model():
    assert spec("hosted_vllm/my-finetune", "http://10.0.0.5:8000/v1", budget=300).reasoning.family == "served"
    assert spec("hosted_vllm/my-finetune", "http://10.0.0.5:8000/v1").reasoning is None
    assert spec("openai/gpt-4o", budget=300).reasoning is None  # OpenAI's own gpt-4o does not think


def test_claude_thinks_only_when_asked_and_never_below_anthropics_minimum():
    assert spec("anthropic/claude-sonnet-4-5").reasoning is None
    asked = spec("anthropic/claude-sonnet-4-5", budget=200).reasoning
    assert (asked.family, asked.budget, asked.source) == ("anthropic", ANTHROPIC_MIN_BUDGET, "option")
    by_effort = spec("anthropic/claude-sonnet-4-5", effort="medium").reasoning
    assert (by_effort.budget, by_effort.source) == (2048, "effort")


def test_the_options_change_no_judges_mode_but_a_reasoning_judge_gets_its_room():
    def judge(name: str, api_base: str | None = None, **options) -> object:
        return reasoning_for(ModelSpec(name, name, api_base=api_base), reproduce=False, judge=True,
                             **{"budget": None, "effort": None, **options})

    assert judge("anthropic/claude-3-7-sonnet-20250219", budget=2000, effort="high") is None  # MedHELM's jury
    assert judge("hosted_vllm/llama-3.3-70b", "http://127.0.0.1:8000/v1", budget=2000) is None
    gpt5 = judge("openai/gpt-5", budget=300, effort="low")
    assert (gpt5.family, gpt5.budget, gpt5.effort) == ("openai", 300, "low")
    assert judge("openai/gpt-5").budget == DEFAULT_BUDGET


def test_claude_without_extended_thinking_is_never_sent_thinking_and_bedrock_claude_is_found():
    assert spec("anthropic/claude-3-5-haiku-20241022", budget=2000).reasoning is None  # litellm refuses thinking
    assert spec("anthropic/claude-3-5-sonnet-20241022", effort="high").reasoning is None
    bedrock = spec("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", budget=2000).reasoning
    assert (bedrock.family, bedrock.budget) == ("anthropic", 2000)
    assert spec("vertex_ai/claude-opus-4-1@20250805", budget=2000).reasoning.family == "anthropic"


def test_a_budget_of_0_turns_nothing_on():
    assert spec("anthropic/claude-sonnet-4-5", budget=0).reasoning is None
    assert spec("hosted_vllm/my-finetune", "http://127.0.0.1:8000/v1", budget=0).reasoning is None
    o3 = spec("openai/o3-mini", budget=0).reasoning
    assert (o3.family, o3.budget) == ("openai", 0)  # an o-series still refuses max_tokens: its family stays


def test_gemini_25_thinks_by_default():
    assert spec("gemini/gemini-2.5-pro").reasoning.family == "gemini"
    assert spec("gemini/gemini-2.0-flash").reasoning is None
    # at an OpenAI-compatible URL Gemini takes no thinking field: it is sent as a served reasoner is
    at_url = spec("openai/gemini-2.5-flash", "https://generativelanguage.example/v1beta/openai")
    assert at_url.reasoning.family == "served"
    assert "thinking" not in chat_body(at_url, ChatRequest.for_prompt(at_url, "Q", 1))


def test_compat_modes_send_the_references_request_unless_a_budget_is_given():
    helm = spec("openai/o3-mini", reproduce=True).reasoning
    assert (helm.family, helm.budget, helm.source) == ("openai", 0, "none")
    request = ChatRequest.for_prompt(spec("openai/o3-mini", reproduce=True), "Q", 1)
    assert generation_parameters(spec("openai/o3-mini", reproduce=True), request) == {"max_completion_tokens": 1}
    assert spec("openai/o3-mini", budget=50, reproduce=True).reasoning.budget == 50


def test_openai_reasoning_request_carries_nothing_the_model_refuses():
    model = spec("openai/o3-mini", budget=200, effort="low")
    request = ChatRequest.for_prompt(model, "Q", 1, stop=("\n",))
    body = chat_body(model, request)
    assert body == {"model": "o3-mini", "messages": [{"role": "user", "content": "Q"}],
                    "max_completion_tokens": 201, "reasoning_effort": "low"}
    assert stops_after(model, request) == ("\n",)


def test_anthropic_thinking_request():
    model = spec("anthropic/claude-sonnet-4-5", budget=2000)
    request = ChatRequest.for_prompt(model, "Q", 10, stop=("END",))
    assert generation_parameters(model, request) == {"max_tokens": 2010, "stop": ["END"],
                                                     "thinking": {"type": "enabled", "budget_tokens": 2000}}
    assert stops_after(model, request) == ()


def test_served_reasoner_gets_the_budget_in_max_tokens_and_its_stops_applied_after():
    model = spec("hosted_vllm/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1", budget=100)
    request = ChatRequest.for_prompt(model, "Q", 5, stop=("\n",))
    assert generation_parameters(model, request) == {"temperature": 0.0, "max_tokens": 105}


def test_gemini_thinking_budget_or_effort():
    model = spec("gemini/gemini-2.5-flash", budget=64)
    request = ChatRequest.for_prompt(model, "Q", 1)
    assert generation_parameters(model, request) == {"temperature": 0.0, "max_tokens": 65,
                                                     "thinking": {"type": "enabled", "budget_tokens": 64}}
    model = spec("gemini/gemini-2.5-flash", effort="high")
    assert generation_parameters(model, ChatRequest.for_prompt(model, "Q", 1))["reasoning_effort"] == "high"


def test_a_plain_models_request_and_cache_key_are_what_they_were():
    model = spec("openai/gpt-4o-mini")
    request = ChatRequest.for_prompt(model, "Q", 5, stop=("\n",))
    assert generation_parameters(model, request) == {"temperature": 0.0, "max_tokens": 5, "stop": ["\n"]}
    assert "reasoning_budget" not in request.to_json() and "reasoning_effort" not in request.to_json()
    # (the key of this request as every earlier version computed it, pinned: existing caches keep their answers)
    assert request.cache_key() == "888d6d3b18d6c6c1fdf52358fe91081bfd9fdde623c968f5cbf5304b8409c0be"


def test_the_budget_and_effort_are_in_the_cache_key_and_survive_a_round_trip():
    low = ChatRequest.for_prompt(spec("openai/o3-mini", budget=100, effort="low"), "Q", 1)
    high = ChatRequest.for_prompt(spec("openai/o3-mini", budget=100, effort="high"), "Q", 1)
    more = ChatRequest.for_prompt(spec("openai/o3-mini", budget=200, effort="low"), "Q", 1)
    assert len({low.cache_key(), high.cache_key(), more.cache_key()}) == 3
    assert ChatRequest.from_json(low.to_json()) == low
    assert low.max_output_tokens == 101


@pytest.mark.parametrize("content, answer, thinking", [
    ("A", "A", ""),
    ("<think>The abstract supports it.</think>\n\nA", "A", "The abstract supports it."),
    ("  <think>x</think>B", "B", "x"),
    ("<think>still thinking when the limit came", "", "still thinking when the limit came"),
    ("opened by the template</think>\n\nC", "C", "opened by the template"),
    ("The answer is <think>not a block</think> here", "The answer is <think>not a block</think> here", ""),
])
def test_the_answer_is_the_content_without_its_thinking(content, answer, thinking):
    assert split_thinking(content) == (answer, thinking)


def test_reasoning_fields_and_stops_not_sent():
    assert answer_of("A\nbecause", ["deliberation"], ("\n",)) == ("A", "deliberation")
    assert answer_of("<think>t</think>\n\nB", ["r"]) == ("B", "r\n\nt")


def test_reply_thinking_reads_each_shape_and_refuses_others():
    assert reply_thinking({"content": "A", "reasoning_content": "because"}) == ["because"]
    assert reply_thinking({"content": "A", "reasoning": "vllm"}) == ["vllm"]
    assert reply_thinking({"thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                               {"type": "redacted_thinking", "data": "xx"}]}) == ["t"]
    assert reply_thinking({"content": "A"}) == []
    with pytest.raises(MalformedReply, match="message.reasoning_content is 42"):
        reply_thinking({"reasoning_content": 42})
    with pytest.raises(MalformedReply, match="thinking block 0"):
        reply_thinking({"thinking_blocks": [{"type": "thinking"}]})


def test_reasoning_tokens_beyond_the_completion_they_are_part_of_are_malformed():
    with pytest.raises(MalformedReply, match="more than the completion_tokens"):
        reply_reasoning_tokens({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 6}})
    with pytest.raises(MalformedReply, match="expected an integer from 0 to 1,000,000,000"):
        reply_reasoning_tokens({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 10**20}})


def test_an_empty_answer_cut_by_the_limit_never_passes_whatever_the_metric_says():
    from pytest_medhelm.assertions import Missed, assert_metric
    from pytest_medhelm.metrics.base import Score
    from pytest_medhelm.values import Instance

    class EmptyIsRight:  # a metric that gives an empty answer full marks
        name, binary, pass_mark = "empty_is_right", True, 1.0

        def score(self, answer, instance, compat="default"):
            return Score(1.0 if not answer else 0.0)

    instance = Instance(id="q", input="?", references=("",), benchmark="x")
    assert assert_metric(Completion(text="", finish_reason="stop"), instance, EmptyIsRight()).value == 1.0
    with pytest.raises(Missed, match="the token limit ran out before any answer"):
        assert_metric(Completion(text="", finish_reason="length", reasoning_tokens=9), instance, EmptyIsRight())


def test_reasoning_tokens_from_usage():
    assert reply_reasoning_tokens({"completion_tokens": 60, "completion_tokens_details":
                                   {"reasoning_tokens": 50}}) == 50
    assert reply_reasoning_tokens({"completion_tokens": 1}) is None
    with pytest.raises(MalformedReply, match="reasoning_tokens"):
        reply_reasoning_tokens({"completion_tokens_details": {"reasoning_tokens": -3}})


def test_an_empty_answer_cut_by_the_length_ran_out():
    assert Completion(text="", finish_reason="length", reasoning_tokens=100).ran_out
    assert not Completion(text="A", finish_reason="length").ran_out
    assert not Completion(text="", finish_reason="stop").ran_out


PIECES = st.lists(st.sampled_from(["<think>", "</think>", "\n", " ", "A", "b", "<", ">", "/", "think"]),
                  max_size=20).map("".join)


@fuzz(500)
@given(PIECES, st.lists(st.text(max_size=5), max_size=3))
def test_fuzz_the_split_invents_no_text_and_keeps_no_unclosed_block(content, stops):
    answer, thinking = answer_of(content, [], tuple(stops))
    assert len(answer) + len(thinking) <= len(content)
    assert answer in content and thinking in content
    if content.lstrip().startswith("<think>") and "</think>" not in content:
        assert answer == ""
    if "<think>" not in content and "</think>" not in content:
        assert thinking == "" and content.startswith(answer)
    for stop in stops:
        if stop:
            assert stop not in answer


def test_the_miss_says_what_ran_out_with_what_it_knows():
    from pytest_medhelm.assertions import ran_out_reason

    assert ran_out_reason({"reasoning_tokens": 201, "reasoning_budget": 200, "max_output_tokens": 201}) == (
        "the token limit ran out before any answer: 201 reasoning tokens spent of a limit of 201 tokens (200 "
        "reasoning budget + the answer's); raise --medhelm-reasoning-budget")
    assert "a limit of 1 tokens (no reasoning budget)" in ran_out_reason(
        {"reasoning_tokens": None, "reasoning_budget": 0, "max_output_tokens": 1})
    assert "the thinking took it all" in ran_out_reason({})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "thinking", "reasoning_content", "reasoning", "thinking_blocks",
                                         "completion_tokens_details", "reasoning_tokens", "x"]), inner, max_size=4),
                    max_leaves=12)


@fuzz(300, database=None)
@given(message=JSON, usage=JSON)
def test_fuzz_a_replys_thinking_and_reasoning_tokens_are_read_or_malformed(message, usage):
    try:
        assert all(isinstance(text, str) for text in reply_thinking(message))
    except MalformedReply as exc:
        assert exc.reason.startswith("malformed reply: ")
    try:
        tokens = reply_reasoning_tokens(usage)
        assert tokens is None or (isinstance(tokens, int) and tokens >= 0)
    except MalformedReply as exc:
        assert exc.reason.startswith("malformed reply: ")


def test_an_answer_cached_before_the_split_is_split_when_read(tmp_path):
    from pytest_medhelm.cache.store import AnswerCache

    cache = AnswerCache(tmp_path / "cache", run_id="earlier")
    # written as the last version wrote it: the whole content, no thinking field
    cache.put("k", Completion(text="<think>The abstract supports it.</think>\n\nA", tokens_out=9))
    reader = AnswerCache(tmp_path / "cache", run_id="now")
    answer = reader.get("k")
    assert (answer.text, answer.thinking, answer.cached) == ("A", "The abstract supports it.", True)
    cache.put("plain", Completion(text="B"))
    assert (reader.get("plain").text, reader.get("plain").thinking) == ("B", "")
