"""endpoints/resolve.py: where each model under test and each judge is sent, and with which key; the problems said
before a run."""

from __future__ import annotations

import pytest

from pytest_medhelm.endpoints.resolve import (
    destination,
    endpoint_problems,
    key_problem,
    resolve_spec,
    route_problem,
    startup_lines,
)
from pytest_medhelm.endpoints.wire import NO_KEY, api_key_for
from pytest_medhelm.values import ModelSpec

OFF_NETWORK = "http://203.0.113.10/v1"  # TEST-NET-3: documentation only, never contacted


def test_a_models_own_endpoint_wins_over_its_roles_default_and_carries_its_roles_key_variable():
    endpoints = {"openai/ft": "http://10.0.0.5:8000/v1"}
    ft = resolve_spec("openai/ft", role="model", api_base="http://127.0.0.1:1/v1", endpoints=endpoints,
                      api_key_env="FT_KEY")
    assert (ft.api_base, ft.api_key_env) == ("http://10.0.0.5:8000/v1", "FT_KEY")
    other = resolve_spec("openai/base", role="model", api_base="http://127.0.0.1:1/v1", endpoints=endpoints,
                         api_key_env="FT_KEY")
    assert other.api_base == "http://127.0.0.1:1/v1" and other.cache_identity == "openai/base@http://127.0.0.1:1/v1"
    # a model sent to a provider's public API gets no named variable: the provider's own, read by litellm
    cloud = resolve_spec("openai/gpt-4o", role="judge", api_base=None, endpoints=endpoints, api_key_env="J_KEY")
    assert (cloud.api_base, cloud.api_key_env) == (None, None)
    local = resolve_spec("local/smollm2", role="judge", api_base=OFF_NETWORK, endpoints={}, api_key_env="J_KEY")
    assert (local.api_base, local.api_key_env, local.litellm_model) == (None, None, "openai/smollm2")
    with pytest.raises(ValueError, match="role"):
        resolve_spec("openai/x", role="jury", api_base=None, endpoints={}, api_key_env=None)


def test_a_providers_key_never_goes_to_a_url_that_is_not_its_api(monkeypatch):
    """Issue 30, item 9: ``anthropic/...`` at a gateway, no key variable named: refused (a usage error naming the
    model, the URL and the option), and the sending side sends a placeholder, never ANTHROPIC_API_KEY."""
    from pytest_medhelm.endpoints.resolve import foreign_key_problems, key_lines

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    claude = "anthropic/claude-3-7-sonnet-20250219"
    gateway = ModelSpec(claude, claude, "https://gateway.example/v1")
    [problem] = foreign_key_problems([gateway], "judge", {})
    assert problem == (f"judge {claude} at https://gateway.example/v1 (--medhelm-jury-api-base): that URL is not "
                       "anthropic's API, and litellm would send it anthropic's key (ANTHROPIC_API_KEY); name the "
                       "variable holding the key for that URL with --medhelm-jury-api-key-env NAME "
                       "(--medhelm-jury-api-key-env ANTHROPIC_API_KEY to send anthropic's key there after all)")
    assert api_key_for(gateway) == NO_KEY
    together = ModelSpec("together_ai/m", "together_ai/m", "http://10.0.0.5:8000/v1")
    [own] = foreign_key_problems([together], "model", {"together_ai/m": "http://10.0.0.5:8000/v1"})
    assert own.startswith("model together_ai/m at http://10.0.0.5:8000/v1 (--medhelm-endpoint): ")
    assert "TOGETHERAI_API_KEY" in own and "--medhelm-api-key-env NAME" in own
    # the provider's own API, a named variable, an OpenAI-compatible server, no URL: nothing to refuse
    fine = [ModelSpec(claude, claude, "https://api.anthropic.com/v1"), ModelSpec(claude, claude),
            ModelSpec(claude, claude, "https://gateway.example/v1", api_key_env="GATEWAY_KEY"),
            ModelSpec("openai/j", "openai/j", "https://gateway.example/v1"),
            ModelSpec("azure/gpt", "azure/gpt", "https://mine.openai.azure.com")]
    assert foreign_key_problems(fine, "judge", {}) == []
    assert api_key_for(fine[0]) is None  # (litellm reads the provider's own variable for its own API)
    # http:// to the provider's host is not its API either (the key would cross the network in clear)
    assert foreign_key_problems([ModelSpec(claude, claude, "http://api.anthropic.com/v1")], "judge", {})
    monkeypatch.setenv("GATEWAY_KEY", "sk-gw")
    assert api_key_for(fine[2]) == "sk-gw"
    # said at start-up: which key each URL gets (variables' names, never a key)
    lines = key_lines([ModelSpec("openai/ft", "openai/ft", "http://10.0.0.5/v1", api_key_env="FT_KEY")],
                      [fine[2], fine[3], fine[0]])
    assert lines == [
        "medhelm key: http://10.0.0.5/v1 gets the key in FT_KEY (--medhelm-api-key-env) (model openai/ft)",
        f"medhelm key: https://gateway.example/v1 gets the key in GATEWAY_KEY (--medhelm-jury-api-key-env) (judge "
        f"{claude})",
        "medhelm key: https://gateway.example/v1 gets no key (a placeholder; OPENAI_API_KEY is OpenAI's, never sent "
        "elsewhere) (judge openai/j)",
        f"medhelm key: https://api.anthropic.com/v1 gets the key in ANTHROPIC_API_KEY (anthropic's own API) (judge "
        f"{claude})"]
    assert "sk-" not in "".join(lines)


def test_endpoint_and_key_problems_name_the_option_and_never_a_key():
    problems = endpoint_problems([("openai/a", "http://127.0.0.1:1/v1"), ("openai/a", "http://127.0.0.1:2/v1"),
                                  ("local/smollm2", "http://127.0.0.1:3/v1"), ("openai/typo", "http://x/v1")],
                                 source="--medhelm-endpoint", models=["openai/a"], judges=["openai/j"],
                                 strict_names=True)
    assert len(problems) == 3 and all(p.startswith("--medhelm-endpoint '") for p in problems)
    assert "already has the endpoint http://127.0.0.1:1/v1" in problems[0]
    assert "local/... models are served by the llama.cpp server" in problems[1]
    assert "'openai/typo' is neither a model under test" in problems[2]
    # an ini file may list more endpoints than a run uses
    assert endpoint_problems([("openai/other", "http://x/v1")], source="ini key medhelm_endpoints", models=[],
                             judges=[], strict_names=False) == []
    specs = [ModelSpec("openai/a", "openai/a", "http://x/v1", api_key_env="UNSET_VAR")]
    problem = key_problem("model", "UNSET_VAR", specs, "--medhelm-api-key-env", environ={})
    assert problem.startswith("--medhelm-api-key-env UNSET_VAR: the environment variable UNSET_VAR is not set")
    assert key_problem("model", "UNSET_VAR", specs, "x", environ={"UNSET_VAR": "sk-1"}) is None
    assert key_problem("judge", "UNUSED", specs, "x", environ={}) is None  # no judge sends it


def test_an_unroutable_model_string_is_said_in_one_sentence():
    problem = route_problem(ModelSpec("stub-a", "stub-a"), "--medhelm-model")
    assert problem.startswith("--medhelm-model 'stub-a': litellm cannot route this model string")
    assert "openai/stub-a with --medhelm-api-base URL" in problem and "\n" not in problem
    assert route_problem(ModelSpec("stub-a", "stub-a", "http://127.0.0.1:1/v1"), "--medhelm-model")  # no provider
    for fine in (ModelSpec("gpt-4o-mini", "gpt-4o-mini"), ModelSpec("openai/x", "openai/x", "http://127.0.0.1:1/v1"),
                 ModelSpec("anthropic/claude-3-7-sonnet-20250219", "anthropic/claude-3-7-sonnet-20250219"),
                 ModelSpec("local/smollm2", "openai/smollm2")):
        assert route_problem(fine, "--medhelm-model") is None


def test_judges_without_an_endpoint_are_named_with_their_destination_when_a_model_is_local():
    judges = [ModelSpec("openai/gpt-4o-2024-05-13", "openai/gpt-4o-2024-05-13"),
              ModelSpec("together_ai/m", "together_ai/m"), ModelSpec("openai/j", "openai/j", "http://10.0.0.9/v1"),
              ModelSpec("local/smollm2", "openai/smollm2")]
    local_model = [ModelSpec("openai/ft", "openai/ft", "http://127.0.0.1:8000/v1")]
    assert startup_lines(local_model, judges) == [
        "medhelm: judge openai/gpt-4o-2024-05-13 → OpenAI's public API (no endpoint given; open-ended benchmarks "
        "only)",
        "medhelm: judge together_ai/m → Together AI's public API (no endpoint given; open-ended benchmarks only)",
    ]
    assert startup_lines([ModelSpec("openai/gpt-4o", "openai/gpt-4o")], judges) == []  # nothing local to keep
    assert destination(ModelSpec("gpt-4o", "gpt-4o")).startswith("the public API of the provider litellm picks")


def test_a_judge_of_another_provider_at_a_url_is_refused_not_just_said() -> None:
    """Issue 30, item 9: the judge whose provider's key litellm would send to a gateway was announced and its key
    sent; now it is refused (a usage error's text), a judge with its key variable named is not, and the start-up
    lines say which key the gateway gets."""
    from pytest_medhelm.endpoints.resolve import foreign_key_problems, key_lines, startup_lines
    from pytest_medhelm.values import ModelSpec

    model = ModelSpec("openai/x", "openai/x", "http://10.0.0.5/v1")
    claude = ModelSpec("anthropic/claude-3-7-sonnet-20250219", "anthropic/claude-3-7-sonnet-20250219",
                       "https://gateway.example/v1")
    named = ModelSpec("anthropic/c", "anthropic/c", "https://gateway.example/v1", api_key_env="GATEWAY_KEY")
    compatible = ModelSpec("openai/judge", "openai/judge", "https://gateway.example/v1")
    assert startup_lines([model], [claude, named, compatible]) == []  # (no announcement: a refusal instead)
    [refused] = foreign_key_problems([claude, named, compatible], "judge", {})
    assert refused.startswith("judge anthropic/claude-3-7-sonnet-20250219 at https://gateway.example/v1 "
                              "(--medhelm-jury-api-base): that URL is not anthropic's API")
    assert "--medhelm-jury-api-key-env NAME" in refused
    assert ("medhelm key: https://gateway.example/v1 gets the key in GATEWAY_KEY (--medhelm-jury-api-key-env) "
            "(judge anthropic/c)") in key_lines([model], [named, compatible])
