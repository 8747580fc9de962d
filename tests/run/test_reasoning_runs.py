"""Reasoning models end to end (docs/reasoning.md): whole runs against our test server
validating as OpenAI validates reasoning models (400 for max_tokens, temperature, stop...), spending reasoning
tokens out of the limit, sending the thinking as a field or inline, and speaking Anthropic's Messages API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytester_runs import run as inner

#: the tests of what crosses an xdist run's processes (the budget's ledger, what the controller reports and prints) run
#: in both modes; those of one request and its reply (the wire parameters, a reply's counts) serially, since the
#: same code builds and reads them in whichever process sends
XDIST = pytest.mark.parametrize("xdist", [pytest.param(("-p", "no:xdist"), id="serial"),
                                          pytest.param(("-n", "2"), id="xdist-2", marks=pytest.mark.e2e)])
SERIAL = ("-p", "no:xdist")
#: what an OpenAI reasoning model refuses (docs/reasoning.md)
REFUSED = ("max_tokens", "temperature", "top_p", "stop", "presence_penalty", "frequency_penalty")


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setenv("MEDHELM_BATCH_POLL_S", "0.05")  # a batch run's polls (the test server ends it after a few)


def args(server, data: Path, model: str, *extra: str, api_base: str | None = None) -> list[str]:
    return ["--medhelm-model", model, "--medhelm-api-base", api_base or server.url, "--medhelm-data-dir", str(data),
            "--medhelm-cache-dir", str(data.parent / "cache"), *extra]


def results(pytester, name: str = "r.json") -> dict:
    return json.loads((pytester.path / name).read_text())


def scores(report: dict) -> dict[str, float]:
    return {rec["instance_id"]: rec["score"] for rec in report["instances"]}


def chat_bodies(server) -> list[dict]:
    return [r["json"] for r in server.requests if r["path"].endswith("/chat/completions")]


@pytest.mark.parametrize("batch", [pytest.param((), id="direct"), pytest.param(("--medhelm-batch",), id="batch")])
def test_o3_mini_is_sent_nothing_it_refuses_and_scores_as_a_plain_model(pytester, toy, server, batch):
    from pytest_medhelm.testing.server import batch_stats

    data = toy(8)
    # the baseline the scores are compared with
    plain = inner(pytester, *args(server, data, "openai/plain-model", "--medhelm-json", "plain.json", "-p", "no:xdist"))
    assert plain.ret == 0, plain.stdout.str()[-3000:]
    server.reset()
    server.configure(reasoning_tokens=50)
    result = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-reasoning-budget", "200",
                                   "--medhelm-json", "r.json", *batch, *SERIAL))
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = results(pytester)
    assert scores(report) == scores(results(pytester, "plain.json")) and len(scores(report)) == 8
    assert {rec["reasoning_tokens"] for rec in report["instances"]} == {50}
    bodies = [line["body"] for line in batch_stats(server.url)["lines"]] if batch else chat_bodies(server)
    assert len(bodies) == 8
    for body in bodies:
        assert body["max_completion_tokens"] == 201 and not set(REFUSED) & set(body), body
    assert all(r["status"] == 200 for r in server.requests if r["path"].endswith("/chat/completions"))


@XDIST
def test_a_used_up_budget_is_each_items_miss_with_its_reason_never_a_pass(pytester, toy, server, xdist):
    data = toy(6)
    server.configure(reasoning_tokens=300)
    result = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-reasoning-budget", "200",
                                   "--medhelm-json", "r.json", "-rA", *xdist))
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["MISSED *q000* - the token limit ran out before any answer: 201 reasoning tokens "
                                 "spent of a limit of 201 tokens (200 reasoning budget + the answer's); raise "
                                 "--medhelm-reasoning-budget; expected 'A' (yes), got ''"])
    report = results(pytester)
    assert all(rec["missed"] and rec["answer"] == "" for rec in report["instances"])
    assert {json.dumps(rec["ran_out"], sort_keys=True) for rec in report["instances"]} == {json.dumps(
        {"max_output_tokens": 201, "reasoning_budget": 200, "reasoning_tokens": 201, "reasoning_model": True},
        sort_keys=True)}
    result.assert_outcomes(passed=0)


def test_under_helm_compat_the_request_is_helms_and_its_empty_answers_are_said(pytester, toy, server):
    data = toy(4)
    server.configure(reasoning_tokens=50)
    result = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-compat", "helm", "--medhelm-json",
                                   "r.json", "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert {body["max_completion_tokens"] for body in chat_bodies(server)} == {1}  # HELM's request: no budget
    report = results(pytester)
    assert set(scores(report).values()) == {0.0}  # HELM's 0.0, each a miss that says why
    assert all(rec["ran_out"]["reasoning_budget"] == 0 for rec in report["instances"])


@pytest.mark.parametrize("shape", ["inline", "reasoning_content", "reasoning"])
def test_a_served_reasoners_thinking_is_kept_apart_and_its_answer_scored(pytester, toy, server, shape):
    data = toy(6)
    plain = inner(pytester, *args(server, data, "hosted_vllm/plain", "--medhelm-json", "plain.json",
                                  "-p", "no:xdist"))
    assert plain.ret == 0, plain.stdout.str()[-3000:]
    server.reset()
    server.configure(reasoning_tokens=20, reasoning_shape=shape, thinking_text="The abstract supports it.")
    result = inner(pytester, *args(server, data, "hosted_vllm/deepseek-ai/DeepSeek-R1", "--medhelm-reasoning-budget",
                                   "100", "--medhelm-json", "r.json", "--medhelm-report-text", "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = results(pytester)
    assert scores(report) == scores(results(pytester, "plain.json"))
    assert {body["max_tokens"] for body in chat_bodies(server)} == {101}
    for rec in report["instances"]:
        assert rec["answer"] in ("A", "B") and rec["thinking"].startswith("The abstract supports it.")
        assert rec["thinking_chars"] == len(rec["thinking"])


def test_an_unclosed_think_block_is_an_empty_answer(pytester, toy, server):
    data = toy(3)
    server.configure(reasoning_tokens=500, reasoning_shape="inline")
    result = inner(pytester, *args(server, data, "hosted_vllm/Qwen/Qwen3-8B", "--medhelm-reasoning-budget", "64",
                                   "--medhelm-json", "r.json", "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = results(pytester)
    assert {rec["answer"] for rec in report["instances"]} == {""}
    assert all(rec["missed"] and rec["ran_out"] for rec in report["instances"])


@XDIST
def test_the_thinking_text_stays_out_of_every_report_unless_asked(pytester, toy, server, xdist):
    data = toy(2)
    server.configure(reasoning_tokens=5, reasoning_shape="reasoning_content", thinking_text="patient Jane Doe")
    files = ("--medhelm-json", "r.json", "--medhelm-markdown", "r.md", "--medhelm-html", "r.html",
             "--junitxml", "junit.xml")
    result = inner(pytester, *args(server, data, "hosted_vllm/deepseek-r1", *files, "-rA", *xdist))
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert all(rec["thinking_chars"] > 0 for rec in results(pytester)["instances"])
    for name in ("r.json", "r.md", "r.html", "junit.xml"):
        assert "Jane Doe" not in (pytester.path / name).read_text(), name
    assert "Jane Doe" not in result.stdout.str()
    asked = inner(pytester, *args(server, data, "hosted_vllm/deepseek-r1", "--medhelm-json", "t.json",
                                  "--medhelm-report-text", *xdist))
    assert asked.ret == 0 and "patient Jane Doe" in (pytester.path / "t.json").read_text()


def test_claude_thinks_through_litellm_at_an_api_base(pytester, toy, server, monkeypatch):
    data = toy(4)
    monkeypatch.setenv("CLAUDE_GATEWAY_KEY", "sk-test-claude")
    server.configure(reasoning_tokens=30, thinking_text="Weighing the options.", api_key="sk-test-claude")
    # (litellm posts an anthropic/ model's request to {api_base}/v1/messages: Anthropic's base URL has no /v1)
    result = inner(pytester, *args(server, data, "anthropic/claude-sonnet-4-5", "--medhelm-reasoning-budget", "1500",
                                   "--medhelm-api-key-env", "CLAUDE_GATEWAY_KEY", "--medhelm-json", "r.json",
                                   *SERIAL, api_base=server.base_url))
    assert result.ret == 0, result.stdout.str()[-3000:]
    messages = [r for r in server.requests if r["path"].endswith("/messages")]
    assert len(messages) == 4 and all(r["status"] == 200 for r in messages)
    for r in messages:
        assert r["json"]["thinking"] == {"type": "enabled", "budget_tokens": 1500}
        assert r["json"]["max_tokens"] == 1501 and "temperature" not in r["json"]
    report = results(pytester)
    assert all(rec["answer"] == "A" and rec["thinking_chars"] > 0 for rec in report["instances"])


@pytest.mark.e2e
def test_a_gpt5_judge_is_sent_what_gpt5_accepts(pytester, server, shared_data):
    from pytester_runs import suite_args

    verdict = json.dumps({c: {"score": 4, "explanation": "ok"} for c in ("accuracy", "completeness", "clarity")})

    def answer_or_judge(body):
        return verdict if body["model"] == "gpt-5" else "HISTORY OF PRESENT ILLNESS: cough. ASSESSMENT AND PLAN: rest."

    server.set_answer(answer_or_judge)
    server.configure(reasoning_tokens=40)
    result = inner(pytester, *suite_args(server.url, shared_data, "aci_bench", 2, "--medhelm-cache-dir",
                                         str(pytester.path / "cache"), "--medhelm-json", str(pytester.path / "r.json"),
                                         "--medhelm-reasoning-budget", "300", judges=("openai/gpt-5",)))
    assert result.ret == 0, result.stdout.str()[-3000:]
    judged = [r for r in server.requests if r["json"]["model"] == "gpt-5"]
    assert len(judged) == 2 and all(r["status"] == 200 for r in judged)
    assert all(r["json"]["max_completion_tokens"] == 4096 + 300 and not set(REFUSED) & set(r["json"])
               for r in judged)
    report = results(pytester)
    assert {rec["score"] for rec in report["instances"]} == {0.75}
    # the judge is named a reasoning model in the results and the summary (apart from the model under test: at an
    # API base with a budget given, a served reasoner)
    assert report["run"]["reasoning"]["judges"] == {
        "openai/gpt-5": {"family": "openai", "budget": 300, "effort": None, "source": "option"}}
    assert report["run"]["reasoning"]["models"] == {
        "openai/writer": {"family": "served", "budget": 300, "effort": None, "source": "option"}}
    result.stdout.fnmatch_lines(["medhelm: Reasoning models: openai/writer (served: *); judge openai/gpt-5 (openai: "
                                 "max_completion_tokens = answer limit + 300 reasoning tokens; "
                                 "--medhelm-reasoning-budget). Reasoning tokens are priced as output tokens."])


# ------------------------------------------------------------------------------------------ said in every report
@XDIST
def test_the_header_summary_json_markdown_and_html_say_the_reasoning_and_what_ran_out(pytester, toy, server, xdist):
    data = toy(6)
    # the first three questions' thinking takes the whole limit, the others' leaves room for the answer
    server.set_answer(lambda body: "A")
    server.configure(reasoning_tokens=30)
    result = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-reasoning-budget", "20",
                                   "--medhelm-reasoning-effort", "low", "--medhelm-json", "r.json",
                                   "--medhelm-markdown", "r.md", "--medhelm-html", "r.html", "-q", *xdist))
    assert result.ret == 0, result.stdout.str()[-3000:]
    note = ("Reasoning models: openai/o3-mini (openai: max_completion_tokens = answer limit + 20 reasoning tokens, "
            "reasoning_effort low; --medhelm-reasoning-budget). Reasoning tokens are priced as output tokens.")
    result.stdout.fnmatch_lines([f"medhelm: {note}",
                                 "medhelm: openai/o3-mini: 6 of 6 answers used the whole token limit before "
                                 "answering (reasoning budget 20 tokens); raise --medhelm-reasoning-budget",
                                 "model * tokens out *reasoning tokens*ran out*", "openai/o3-mini * 126 * 126 * 6/6 *"])
    report = results(pytester)
    assert report["run"]["reasoning"] == {
        "budget": 20, "effort": "low", "default_budget": 4096, "judges": {},
        "models": {"openai/o3-mini": {"family": "openai", "budget": 20, "effort": "low", "source": "option"}}}
    [row] = report["models"]
    assert (row["reasoning_tokens"], row["n_ran_out"], row["n_answers"], row["tokens_out"]) == (126, 6, 6, 126)
    markdown = (pytester.path / "r.md").read_text()
    assert f"**{note}**" in markdown and "- openai/o3-mini: 6 of 6 answers used the whole token limit" in markdown
    html = (pytester.path / "r.html").read_text()
    assert 'id="reasoning"' in html and "6 of 6 answers used the whole token limit" in html
    assert "<th scope=\"col\">Reasoning tokens</th>" in html and "<td>6/6</td>" in html


def test_the_header_names_the_reasoning_models_before_anything_is_sent(pytester, toy, server):
    data = toy(2)
    result = inner(pytester, *args(server, data, "openai/gpt-5", "--collect-only", "-p", "no:xdist"))
    result.stdout.fnmatch_lines(["medhelm: Reasoning models: openai/gpt-5 (openai: max_completion_tokens = answer "
                                 "limit + 4,096 reasoning tokens; the default; --medhelm-reasoning-budget sets "
                                 "another)*"])
    assert server.count == 0


def test_a_plain_models_reports_have_no_reasoning_columns(pytester, toy, server):
    data = toy(2)
    result = inner(pytester, *args(server, data, "openai/plain-model", "--medhelm-json", "r.json",
                                   "--medhelm-html", "r.html", "-p", "no:xdist"))
    assert result.ret == 0
    assert "Reasoning models" not in result.stdout.str() and "reasoning tokens" not in result.stdout.str()
    assert results(pytester)["run"].get("reasoning") is None
    assert "Reasoning tokens" not in (pytester.path / "r.html").read_text()


def test_the_budget_reserves_the_reasoning_budget(pytester, toy, server, tmp_path):
    data = toy(1)
    prices = tmp_path / "prices.toml"
    # $1 per token out: the answer's 1 token fits a $5 budget; 1 + 4,096 reasoning tokens do not
    prices.write_text('["openai/o3-mini"]\ninput_per_million = 0\noutput_per_million = 1000000\n'
                      '["openai/plain-model"]\ninput_per_million = 0\noutput_per_million = 1000000\n')
    common = ("--medhelm-budget", "5", "--medhelm-prices", str(prices), "-p", "no:xdist", "-rs")
    plain = inner(pytester, *args(server, data, "openai/plain-model", *common))
    assert plain.ret == 0 and server.count == 1, plain.stdout.str()[-2000:]
    thinking = inner(pytester, *args(server, data, "openai/o3-mini", *common))
    assert server.count == 1, thinking.stdout.str()[-2000:]  # refused before it was sent
    thinking.stdout.fnmatch_lines(["*--medhelm-budget*"])


def test_the_dry_run_reserves_the_budget_and_names_the_reasoning_models(pytester, toy, server):
    data = toy(3)
    plain = inner(pytester, *args(server, data, "openai/plain-model", "--medhelm-dry-run", "-p", "no:xdist"))
    thinking = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-reasoning-budget", "100",
                                     "--medhelm-dry-run", "-p", "no:xdist"))
    assert plain.ret == thinking.ret == 0 and server.count == 0
    thinking.stdout.fnmatch_lines(["medhelm dry run: openai/o3-mini is a reasoning model (openai): 100 reasoning "
                                   "tokens reserved on top of each answer limit",
                                   "toy * openai/o3-mini * 3 * 303 *",
                                   "Upper bound: *; a reasoning model's or judge's reasoning budget on top of each*"])
    plain.stdout.fnmatch_lines(["toy * openai/plain-model * 3 * 3 *"])
    assert "reasoning model" not in plain.stdout.str()


@pytest.mark.parametrize("message, said", [
    ({"content": "A", "reasoning_content": "x" * 3_000_000},
     "malformed reply: body over 321,568 bytes (the bound for max_tokens=8001"),
    ({"content": "A", "reasoning_content": {"steps": 1}}, "message.reasoning_content is {'steps': 1}"),
    ({"content": "A", "reasoning": ["a"]}, "message.reasoning is ['a']; expected a string"),
])
def test_a_hostile_thinking_is_its_own_items_error(pytester, toy, server, message, said):
    data = toy(2)
    body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", **message},
                                    "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    server.configure(faults=[("malformed", body)])  # the first request only: the other item is answered
    result = inner(pytester, *args(server, data, "hosted_vllm/deepseek-r1", "--medhelm-reasoning-budget", "8000",
                                   "--medhelm-json", "r.json", "--medhelm-retries", "0", "-p", "no:xdist"))
    assert result.ret == 1, result.stdout.str()[-3000:]
    errors = [rec for rec in results(pytester)["instances"] if rec.get("error")]
    assert len(errors) == 1 and said in errors[0]["error"]
    assert sum(rec.get("answer") == "A" for rec in results(pytester)["instances"]) == 1


def test_reasoning_tokens_are_counted_apart_and_priced_as_output(pytester, toy, server, tmp_path):
    data = toy(4)
    prices = tmp_path / "prices.toml"
    # $1 a token in, $2 a token out: each answer's 50 reasoning tokens cost what 50 answer tokens would
    prices.write_text('["openai/o3-mini"]\ninput_per_million = 1000000\noutput_per_million = 2000000\n')
    server.configure(reasoning_tokens=50)
    result = inner(pytester, *args(server, data, "openai/o3-mini", "--medhelm-reasoning-budget", "200",
                                   "--medhelm-prices", str(prices), "--medhelm-json", "r.json", "--medhelm-markdown",
                                   "r.md", "-q", *SERIAL))
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = results(pytester)
    instances = report["instances"]
    assert [(rec["tokens_out"], rec["reasoning_tokens"]) for rec in instances] == [(51, 50)] * 4
    assert all(rec["cost_usd"] == rec["tokens_in"] * 1.0 + 51 * 2.0 for rec in instances)
    [row] = report["models"]
    assert (row["tokens_out"], row["reasoning_tokens"], row["n_answers"], row["n_ran_out"]) == (204, 200, 4, 0)
    assert row["cost_usd"] == sum(rec["tokens_in"] for rec in instances) + 204 * 2.0
    assert "n_ran_out" not in report["benchmarks"][0]  # nothing ran out: the row is a plain model's
    result.stdout.fnmatch_lines(["medhelm: Reasoning models: openai/o3-mini *Reasoning tokens are priced as output "
                                 "tokens.", "openai/o3-mini * 204 * 200 * 0 *"])
    assert "answers used the whole token limit" not in result.stdout.str()
    assert "Reasoning tokens are priced as output tokens." in (pytester.path / "r.md").read_text()
