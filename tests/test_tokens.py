"""tokens.py: prompt tokens counted offline, for the dry run's estimate and the budget's upper bounds."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from report_fixtures import no_network

from pytest_medhelm.thirdparty import litellm_price_table
from pytest_medhelm.tokens import CHAT_FORMAT_TOKENS, TokenCounter, encoding_name

#: a text the two encodings count differently (o200k_base reads French, Chinese and Russian in fewer tokens)
MIXED = ("Le patient présente une douleur thoracique — 患者胸痛。 Лечение: аспирин 325 мг; HbA1c 7.2%  \n\n"
         "  tachycardia!!! <|endoftext|>")  # (special-token text in a prompt is counted as text, never refused)


def test_real_counter_is_offline_and_fetches_no_tokenizer():
    """OpenAI models exactly, Llama and Claude approximated with cl100k_base, with every socket refused."""
    text = "Le patient présente une douleur thoracique ; 患者胸痛。 " * 10
    with no_network() as attempts:
        counter = TokenCounter()
        gpt4o = counter("openai/gpt-4o", text)
        llama = counter("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct", text)
        claude = counter("anthropic/claude-2.1", text)
        mini = counter("gpt-4o-mini", text)
    assert attempts == []  # not even a DNS look-up
    assert counter.method == "tiktoken"
    import tiktoken  # (the encodings the counter loaded are tiktoken's, kept in this process)

    o200k = len(tiktoken.get_encoding("o200k_base").encode(text))
    cl100k = len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert o200k != cl100k
    # one user message: the text plus the chat format's 7 tokens
    assert gpt4o == o200k + CHAT_FORMAT_TOKENS and gpt4o == mini  # the "openai/" prefix does not demote to cl100k
    assert llama == cl100k + CHAT_FORMAT_TOKENS and claude == llama  # approximated with cl100k_base, offline


@pytest.mark.parametrize(("model", "encoding"), [
    ("openai/gpt-4o", "o200k_base"), ("azure/eu/gpt-4o-mini", "o200k_base"), ("gpt-4.1-nano", "o200k_base"),
    ("openai/o3", "o200k_base"), ("o4-mini", "o200k_base"), ("openai/gpt-5", "o200k_base"),
    ("gpt-5-mini-2025-08-07", "o200k_base"), ("openai/gpt-6.2", "o200k_base"),  # (a release after tiktoken's table)
    ("ft:gpt-4o-mini:acme::abc123", "o200k_base"), ("ft:o4-mini-2025-04-16", "o200k_base"),  # (a fine-tune's base)
    ("openai/gpt-4", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"), ("azure/gpt-35-turbo", "cl100k_base"),
    ("anthropic/claude-sonnet-4-20250514", "cl100k_base"), ("deepseek/deepseek-reasoner", "cl100k_base"),
    ("hosted_vllm/Qwen/Qwen3-8B", "cl100k_base"), ("local/smollm2", "cl100k_base"), ("openai/toy-model", "cl100k_base"),
    ("gradient_ai/openai-gpt-4o", "cl100k_base"),  # (another provider's model named after one of OpenAI's)
])
def test_the_encoding_is_the_models_where_known_and_cl100k_base_otherwise(model, encoding):
    assert encoding_name(model) == encoding


def test_every_model_of_litellms_price_table_is_counted_as_litellm_counts_it():
    """The count litellm.token_counter gives offline (its Hugging Face tokenizers switched off, as a dry run did
    when it counted with litellm), for each of the 9,700-odd model strings of litellm's price table with and without
    an "openai/" prefix, on a text whose count tells the two encodings apart. Where they differ, litellm is wrong:
    it counts gpt-oss (o200k_harmony, tiktoken says) and a fine-tune of o4-mini with cl100k_base, and one string is
    not a model. (Compared with litellm 1.110; a later one may choose otherwise: the message names its version.)"""
    from pytest_medhelm.thirdparty import import_litellm

    litellm = import_litellm()
    table = litellm_price_table()
    models = sorted({*table, *(f"openai/{name}" for name in table)})
    counter = TokenCounter()
    before = litellm.disable_hf_tokenizer_download
    litellm.disable_hf_tokenizer_download = True  # (never a download from the Hub)
    try:
        differ = [model for model in models
                  if counter(model, MIXED) != litellm.token_counter(model=model,
                                                                    messages=[{"role": "user", "content": MIXED}])]
    finally:
        litellm.disable_hf_tokenizer_download = before
    assert len(models) > 5000
    litellms_mistakes = [model for model in differ if "ft:o4-mini" in model or "gpt-oss" in model
                         or model == "openai/openai/container"]
    drifted = sorted(set(differ) - set(litellms_mistakes))
    assert not drifted, f"litellm {version('litellm')} chooses another encoding than ours for: {', '.join(drifted)}"
