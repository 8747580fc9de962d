"""Endpoints and keys: each model under test and each judge goes where it is told, with its own key.

* whole runs against our test server, which records a fingerprint of every bearer token it receives: a key named
  for the models' endpoint reaches that endpoint only, the judges' key the judges' endpoint only, and neither
  OpenAI's key nor the retired ``MEDHELM_API_KEY`` reaches either (thread sender, sender process, xdist);
* several endpoints on the command line and in ini files; bad values are usage errors (exit 4) naming the option
  or ini key, before anything is sent;
* a model string litellm cannot route is one usage error at start-up, not a paragraph per item;
* where judges go is said at start when the models under test are local; ``--medhelm-local-only`` checks each
  judge's own endpoint;
* a refused connection is said once, and the run stops instead of repeating it on every item (with and without
  xdist).

Resolution's own unit tests are in tests/endpoints/test_resolve.py, the key a request carries in test_wire.py.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from pathlib import Path

import pytest
from pytester_runs import NO_BERTSCORE, run, starts_xdist
from pytester_runs import run as inner
from test_secrets import scan
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows, write_toy_data

from pytest_medhelm.endpoints.wire import NO_KEY
from pytest_medhelm.testing.server import key_fingerprint, running_server

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"
VERDICT = json.dumps({axis: {"score": 4, "explanation": f"{axis} is fine"}
                      for axis in ("accuracy", "completeness", "clarity")})
NOTE = "HISTORY OF PRESENT ILLNESS: the patient reports a cough. ASSESSMENT AND PLAN: rest."
OFF_NETWORK = "http://203.0.113.10/v1"  # TEST-NET-3: documentation only, never contacted


# ----------------------------------------------------------------------------------------------------------------
# resolution and keys


# ----------------------------------------------------------------------------------------------------------------
# whole runs: whose key goes where


def _count(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if v}


@pytest.mark.e2e
@pytest.mark.parametrize("how", [
    pytest.param(({}, []), id="serial"),
    pytest.param(({}, ["-n", "2"]), id="xdist-2"),
])
def test_each_key_reaches_its_own_endpoint_only(pytester, shared_data, monkeypatch, how):
    env, xdist = how
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    keys = {name: f"sk-{name}-{uuid.uuid4().hex}" for name in
            ("MODEL_ENDPOINT_KEY", "JUDGE_ENDPOINT_KEY", "OPENAI_API_KEY", "MEDHELM_API_KEY", "HOSTED_VLLM_API_KEY")}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    out = pytester.path / "r.json"
    with running_server(answer=NOTE, api_key=keys["MODEL_ENDPOINT_KEY"]) as models, \
            running_server(answer=VERDICT, api_key=keys["JUDGE_ENDPOINT_KEY"]) as judges:
        # in this process: BERTScore's torch (aci_bench's secondary metric) is imported before any inner session
        # (tests/conftest.py), so it is not imported again here
        result = run(pytester,
            str(SUITE), "-p", "no:cacheprovider", "-p", "no:randomly", "-rA",
            "--medhelm-model", "openai/writer", "--medhelm-endpoint", f"openai/writer={models.url}",
            "--medhelm-api-key-env", "MODEL_ENDPOINT_KEY",
            "--medhelm-jury", "openai/judge-a", "--medhelm-jury", "openai/judge-b",
            "--medhelm-jury-api-base", judges.url, "--medhelm-jury-api-key-env", "JUDGE_ENDPOINT_KEY",
            "--medhelm-benchmark", "aci_bench", "--medhelm-max-instances", "2", "--medhelm-retries", "0",
            "--medhelm-data-dir", str(shared_data), "--medhelm-cache-dir", str(pytester.path / "cache"),
            "--medhelm-json", str(out), *NO_BERTSCORE, *xdist)  # (BERTScore is not under test here)
        to_models, to_judges = models.requests, judges.requests
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert len(to_models) == 2 and len(to_judges) == 4  # 2 answers; 2 judges x 2 answers
    assert {r["auth_fingerprint"] for r in to_models} == {key_fingerprint(keys["MODEL_ENDPOINT_KEY"])}
    assert {r["auth_fingerprint"] for r in to_judges} == {key_fingerprint(keys["JUDGE_ENDPOINT_KEY"])}
    assert {r["json"]["model"] for r in to_judges} == {"judge-a", "judge-b"}
    text = result.stdout.str() + result.stderr.str()
    assert not [k for k in keys.values() if k in text]
    assert scan(pytester.path, list(keys.values())) == []
    options = json.loads(out.read_text())["run"]["options"]
    assert (options["api_key_env"], options["jury_api_key_env"]) == ("MODEL_ENDPOINT_KEY", "JUDGE_ENDPOINT_KEY")


def test_openais_key_and_the_retired_medhelm_api_key_never_reach_a_servers_endpoint(pytester, toy, monkeypatch):
    data = toy(4)
    openai, legacy = f"sk-openai-{uuid.uuid4().hex}", f"sk-legacy-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", openai)
    monkeypatch.setenv("MEDHELM_API_KEY", legacy)
    with running_server(answer="A") as srv:
        result = run(pytester, "--medhelm-model", "openai/toy-model",
                                    "--medhelm-api-base", srv.url, "--medhelm-data-dir", str(data))
        fingerprints = {r["auth_fingerprint"] for r in srv.requests}
    assert result.ret == 0
    assert fingerprints == {key_fingerprint(NO_KEY)}


def test_every_model_goes_to_its_own_endpoint_from_the_command_line_and_the_ini_file(pytester, toy):
    data = toy(3)
    with running_server(answer="A") as a, running_server(answer="A") as b, running_server(answer="A") as default:
        pytester.makeini(f"""
            [pytest]
            medhelm_endpoints =
                openai/a = {a.url}
                openai/b = http://127.0.0.1:9/v1
        """)
        result = run(pytester, "--medhelm-model", "openai/a", "--medhelm-model",
                                    "openai/b", "--medhelm-model", "openai/c",
                                    "--medhelm-endpoint", f"openai/b={b.url}",  # the command line wins
                                    "--medhelm-api-base", default.url, "--medhelm-data-dir", str(data))
        seen = {name: sorted({r["json"]["model"] for r in srv.requests}) for name, srv in
                (("a", a), ("b", b), ("default", default))}
        counts = (a.count, b.count, default.count)
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert seen == {"a": ["a"], "b": ["b"], "default": ["c"]} and counts == (3, 3, 3)


@pytest.mark.parametrize(("args", "ini", "expected"), [
    (["--medhelm-model", "stub-a"], "",
     "--medhelm-model 'stub-a': litellm cannot route this model string (LLM Provider NOT provided"),
    (["--medhelm-model", "stub-a", "--medhelm-api-base", "http://127.0.0.1:9/v1"], "",
     "--medhelm-model 'stub-a': litellm cannot route"),
    ([], "medhelm_model = stub-b", "ini key medhelm_model 'stub-b': litellm cannot route"),
    (["--medhelm-model", "openai/a", "--medhelm-jury", "judge-x"], "", "--medhelm-jury 'judge-x': litellm cannot"),
    (["--medhelm-model", "openai/a", "--medhelm-endpoint", "openai/typo=http://127.0.0.1:9/v1"], "",
     "--medhelm-endpoint 'openai/typo=http://127.0.0.1:9/v1': 'openai/typo' is neither a model under test"),
    (["--medhelm-model", "openai/a", "--medhelm-endpoint", "openai/a=ftp://host"], "",
     "argument --medhelm-endpoint: 'openai/a=ftp://host': expected MODEL=URL"),
    (["--medhelm-model", "openai/a"], "medhelm_endpoints = openai/a",
     "ini key medhelm_endpoints: 'openai/a': expected MODEL=URL"),
    (["--medhelm-model", "local/smollm2", "--medhelm-endpoint", "local/smollm2=http://127.0.0.1:9/v1"], "",
     "local/... models are served by the llama.cpp server the plugin starts"),
    (["--medhelm-model", "openai/a", "--medhelm-api-base", "http://127.0.0.1:9/v1", "--medhelm-api-key-env",
      "MEDHELM_TEST_UNSET_VARIABLE"], "",
     "--medhelm-api-key-env MEDHELM_TEST_UNSET_VARIABLE: the environment variable MEDHELM_TEST_UNSET_VARIABLE is "
     "not set"),
    (["--medhelm-model", "openai/a", "--medhelm-jury", "openai/j"],
     "medhelm_jury_api_base = http://127.0.0.1:9/v1\nmedhelm_jury_api_key_env = MEDHELM_TEST_UNSET_VARIABLE",
     "ini key medhelm_jury_api_key_env MEDHELM_TEST_UNSET_VARIABLE: the environment variable"),
])
def test_bad_endpoints_keys_and_model_strings_are_usage_errors(pytester, toy, server, args, ini, expected):
    data = toy(3)
    if ini:
        pytester.makeini("[pytest]\n" + ini + "\n")
    result = run(pytester, "--medhelm-data-dir", str(data), *args)
    err = result.stderr.str()
    assert result.ret == 4, result.stdout.str() + err
    assert expected in err, err
    assert "Provider List" not in result.stdout.str() + err and err.count("LLM Provider NOT provided") <= 1
    assert server.count == 0


def test_a_key_given_instead_of_a_variable_name_is_refused_without_being_repeated(pytester, toy):
    data = toy(2)
    key = f"sk-live-{uuid.uuid4().hex}"
    result = run(pytester, "--medhelm-model", "openai/a", "--medhelm-api-base", "http://127.0.0.1:9/v1",
                                "--medhelm-jury-api-key-env", key, "--medhelm-data-dir", str(data))
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4
    assert "argument --medhelm-jury-api-key-env: expected the NAME of an environment variable" in text
    assert key not in text


# ----------------------------------------------------------------------------------------------------------------
# where the judges go


JUDGED_TOY_CONFTEST = TOY_CONFTEST.replace(
    "from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH",
    "from pytest_medhelm.metrics.jury import jury_metric").replace(
    "metric=MULTIPLE_CHOICE_EXACT_MATCH", "metric=jury_metric('mediqa')").replace('kind="closed"', 'kind="open"')


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_judges_going_to_public_apis_are_named_before_any_is_asked_when_the_model_is_local(pytester, toy, xdist):
    """A judged benchmark, a model on loopback, the paper's judges: each judge's public destination is named once,
    before any judge request. (The model answers nothing, and an empty answer is never sent to a judge: no request
    leaves this machine.)"""
    data = toy(2)
    pytester.makeconftest(JUDGED_TOY_CONFTEST)
    base = ["-p", "no:cacheprovider", "-p", "no:randomly", "--medhelm-data-dir", str(data), *NO_BERTSCORE, *xdist]
    with running_server(answer="") as server:
        result = inner(pytester, *base, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url)
        out = result.stdout.str()
        line = "medhelm: judge openai/gpt-4o-2024-05-13 → OpenAI's public API (no endpoint given"
        assert out.count(line) == 1, out
        assert out.count("medhelm: judge anthropic/claude-3-7-sonnet-20250219 → Anthropic's public API") == 1
        assert server.count == 2  # the two answers; nothing else
        # the xdist variant's claim: said once by the controller, not once per worker (what is left unsaid below is
        # said, or not, by the same code in either mode: the serial variant's)
        if starts_xdist(xdist):
            return
        # judges with an endpoint: nothing to say
        quiet = inner(pytester, *base, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                                   "--medhelm-jury", "openai/j", "--medhelm-jury-api-base", server.url)
        assert "medhelm: judge" not in quiet.stdout.str()
    # a closed benchmark asks no judge: nothing to say either
    pytester.makeconftest(TOY_CONFTEST)
    with running_server(answer="A") as server:
        closed = inner(pytester, *base, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url)
    assert "medhelm: judge" not in closed.stdout.str()


GATED_OPEN_CONFTEST = TOY_CONFTEST.replace('access="public"', 'access="gated"').replace('kind="closed"', 'kind="open"')


def _gated_open(pytester: pytest.Pytester) -> Path:
    pytester.makeconftest(GATED_OPEN_CONFTEST)
    pytester.makepyfile(test_toy=TOY_TEST)
    return write_toy_data(pytester.path, toy_rows(2))


def test_local_only_checks_each_judges_own_endpoint(pytester, server):
    data = _gated_open(pytester)
    common = ["-p", "no:cacheprovider", "--collect-only", "-q", "--medhelm-local-only", "--medhelm-model",
              "openai/toy-model", "--medhelm-api-base", server.url, "--medhelm-jury", "openai/judge",
              "--medhelm-data-dir", str(data)]
    refused = run(pytester, *common, "--medhelm-jury-api-base", server.url,
                                 "--medhelm-endpoint", f"openai/judge={OFF_NETWORK}")
    assert refused.ret == 4
    assert f"toy (gated) -> judge openai/judge at {OFF_NETWORK}" in refused.stderr.str()
    allowed = run(pytester, *common, "--medhelm-jury-api-base", OFF_NETWORK,
                                 "--medhelm-endpoint", f"openai/judge={server.url}")
    assert allowed.ret == 0, allowed.stderr.str()
    assert server.count == 0


# ----------------------------------------------------------------------------------------------------------------
# a refused connection, once


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there now: connections are refused


@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_refused_connection_is_said_once_and_stops_the_run(pytester, toy, xdist):
    data = toy(20)
    url = _closed_port_url()
    result = run(pytester, "--medhelm-model",
                                "openai/toy-model", "--medhelm-api-base", url, "--medhelm-retries", "1",
                                "--medhelm-data-dir", str(data), *xdist)
    text = result.stdout.str()
    assert result.ret == 1
    headline = f"medhelm: every request to openai/toy-model fails: {url} is unreachable or not answering"
    assert text.count(headline) == 1, text
    assert "the remaining items were not run" in text
    errors = _count(result).get("errors", 0)
    workers = 2 if xdist else 1
    assert 1 <= errors <= workers, text  # one item per process that runs items, not twenty
    sections = re.findall(r"_+ ERROR at call of [^\n]*\n(?:\[gw\d\][^\n]*\n)?(.*?)(?=\n_+ ERROR at|\n=+ |\n!+ )",
                          text, re.S)
    assert len(sections) == errors and all(s.count("\n") == 0 and url in s for s in sections), sections


def test_what_counts_as_failing_every_request():
    from pytest_medhelm.sending.failures import systematic_failure
    from pytest_medhelm.values import ModelError

    assert systematic_failure(ModelError("m", "Incorrect API key", 401))
    assert systematic_failure(ModelError("m", "The model does not exist", 404))
    # an endpoint that never answered in this run: the scheduler marks its error systematic, and the mark survives
    # the cache and the sender process's pipe (a structured value, never read back from the text)
    unreachable = ModelError("openai/m", "http://127.0.0.1:9/v1 is unreachable or not answering: refused",
                             systematic=True)
    assert systematic_failure(ModelError.from_json(unreachable.to_json()))
    # an endpoint that answered earlier in the run and then went down: its answers count, nothing stops
    assert not systematic_failure(ModelError("openai/m", "http://127.0.0.1:9/v1 stopped answering: refused"))
    assert not systematic_failure(ModelError("m", "The server had an error", 500))
    assert not systematic_failure(ModelError("openai/m", "no answer within 1 s (--medhelm-timeout) (after 4 attempts)"))


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_judge_of_a_provider_at_a_gateway_is_refused_until_its_key_is_named(pytester, toy, server, monkeypatch,
                                                                             xdist):
    """Issue 30, item 9: the run used to announce that ANTHROPIC_API_KEY goes to the gateway and send it; now it is
    a usage error before anything is sent, and naming the variable makes the run go, saying which key the URL
    gets."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-shown")
    monkeypatch.setenv("GATEWAY_KEY", "sk-gateway-never-shown")
    data = toy(2)
    claude = "anthropic/claude-3-7-sonnet-20250219"
    common = ["-p", "no:cacheprovider", "--medhelm-data-dir", str(data), "--medhelm-model", "openai/toy-model",
              "--medhelm-api-base", server.url, "--medhelm-jury", claude, "--medhelm-jury-api-base", server.url,
              *xdist]
    refused = inner(pytester, *common)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    refused.stderr.fnmatch_lines([f"*judge {claude} at {server.url} (--medhelm-jury-api-base): that URL is not "
                                  "anthropic's API, and litellm would send it anthropic's key (ANTHROPIC_API_KEY); "
                                  "name the variable holding the key for that URL with --medhelm-jury-api-key-env*"])
    assert server.count == 0
    named = inner(pytester, *common, "--medhelm-jury-api-key-env", "GATEWAY_KEY")
    assert named.ret == pytest.ExitCode.OK, named.stdout.str() + named.stderr.str()
    named.stdout.fnmatch_lines([f"medhelm key: {server.url} gets the key in GATEWAY_KEY (--medhelm-jury-api-key-env) "
                                f"(judge {claude})"])
    text = refused.stdout.str() + refused.stderr.str() + named.stdout.str() + named.stderr.str()
    assert "never-shown" not in text


def test_a_model_of_a_provider_at_a_url_is_refused_naming_the_models_option(pytester, toy, server):
    data = toy(1)
    result = inner(pytester, "-p", "no:cacheprovider", "--medhelm-data-dir", str(data), "--medhelm-model",
                   "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", "--medhelm-api-base", server.url,
                   "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*model together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo at {server.url} "
                                 "(--medhelm-api-base)*TOGETHERAI_API_KEY*--medhelm-api-key-env NAME*"])
    assert server.count == 0


