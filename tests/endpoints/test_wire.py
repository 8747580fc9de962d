"""endpoints/wire.py: how a model is reached (OpenAI's wire to a URL, or litellm) and which key goes with it."""

from __future__ import annotations

from pytest_medhelm.endpoints.wire import NO_KEY, api_key_for
from pytest_medhelm.values import ModelSpec


def test_the_key_sent_is_the_named_variables_and_never_openais_to_someone_elses_server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.setenv("MEDHELM_API_KEY", "sk-legacy-for-everything")
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-vllm")
    monkeypatch.setenv("FT_KEY", "sk-ft")
    assert api_key_for(ModelSpec("openai/ft", "openai/ft", "http://10.0.0.5/v1", api_key_env="FT_KEY")) == "sk-ft"
    # an OpenAI-compatible server of someone else's, no variable named: a placeholder, not OpenAI's key
    assert api_key_for(ModelSpec("openai/ft", "openai/ft", "http://10.0.0.5/v1")) == NO_KEY
    assert api_key_for(ModelSpec("hosted_vllm/m", "hosted_vllm/m", "http://10.0.0.5/v1")) == "sk-vllm"
    # the provider's public API: nothing from us, litellm reads that provider's own variable
    assert api_key_for(ModelSpec("openai/gpt-4o", "openai/gpt-4o")) is None
    assert api_key_for(ModelSpec("anthropic/claude", "anthropic/claude")) is None
    monkeypatch.delenv("HOSTED_VLLM_API_KEY")
    assert api_key_for(ModelSpec("hosted_vllm/m", "hosted_vllm/m", "http://10.0.0.5/v1")) == NO_KEY
