"""tokens.py: prompt tokens counted offline, for the dry run's estimate and the budget's upper bounds."""

from __future__ import annotations

from report_fixtures import no_network

from pytest_medhelm.tokens import TokenCounter


def test_real_counter_is_offline_and_fetches_no_tokenizer():
    """litellm's counter, with every socket refused: OpenAI models exactly, Llama and Claude without the Hub."""
    text = "Le patient présente une douleur thoracique ; 患者胸痛。 " * 10
    with no_network() as attempts:
        counter = TokenCounter()
        gpt4o = counter("openai/gpt-4o", text)
        llama = counter("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct", text)
        claude = counter("anthropic/claude-2.1", text)
        mini = counter("gpt-4o-mini", text)
    assert attempts == []  # not even a DNS look-up
    assert counter.method == "litellm"
    import tiktoken  # the encodings litellm ships (its import set TIKTOKEN_CACHE_DIR to them)

    o200k = len(tiktoken.get_encoding("o200k_base").encode(text))
    cl100k = len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert o200k != cl100k
    # one user message: the text plus the chat format's few tokens
    assert 0 < gpt4o - o200k <= 8 and gpt4o == mini  # the "openai/" prefix does not demote to cl100k
    assert 0 < llama - cl100k <= 8 and claude == llama  # approximated with cl100k_base, offline
