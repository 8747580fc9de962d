"""The plugin as users run it: pytester sessions against our OpenAI-compatible test server."""

from __future__ import annotations

import json
import os
import stat

import pytest
from pytester_runs import run
from toy_benchmark import toy_rows

XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-p", "no:xdist"], id="p-no-xdist"),
               pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


def model_args(server, data, *extra: str) -> list[str]:
    return ["--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
            *extra]


def test_help_lists_the_contract_options(pytester):
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(["*MedHELM benchmarks*", "*--medhelm-model=MODEL*", "*--medhelm-threshold=SPEC*",
                                 "*--medhelm-compat=default|helm*", "*medhelm_thresholds*"])


def test_markers_are_registered_for_strict_markers(pytester):
    result = run(pytester, "--markers")
    for marker in ("medhelm", "clinical_decision_support", "clinical_note_generation", "patient_communication",
                   "medical_research", "administration_workflow", "public", "gated", "private"):
        result.stdout.fnmatch_lines([f"@pytest.mark.{marker}*"])


def test_without_a_model_items_skip_and_nothing_is_called(pytester, toy, server):
    data = toy(5)
    result = run(pytester, "--medhelm-data-dir", str(data), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no model under test: pass --medhelm-model MODEL*"])
    assert server.count == 0


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_toy_run_scores_writes_json_and_rerun_hits_the_cache(pytester, toy, server, mode):
    data = toy(10)  # answers: A for even ids (5 of 10); the server always says A
    out = pytester.path / "r.json"
    result = run(pytester, *model_args(server, data, "--medhelm-json", str(out)), *mode)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*5 passed*5 missed*"])
    assert server.count == 10
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert (bench["slug"], bench["n"], bench["mean"], bench["raw_mean"]) == ("toy", 10, 0.5, 0.5)
    assert bench["ci_low"] <= 0.5 <= bench["ci_high"]
    assert bench["category"] == "Medical Research Assistance"
    assert report["categories"] == [{"category": "Medical Research Assistance", "model": "openai/toy-model",
                                     "score": 0.5, "n_benchmarks": 1, "category_slug": "medical_research"}]
    [model] = report["models"]
    assert model["macro_avg"] == 0.5 and model["win_rate"] is None and model["tokens_out"] == 10
    assert model["cost_usd"] is None  # unknown price: unknown, never 0
    assert len(report["instances"]) == 10
    inst = report["instances"][0]
    for key in ("benchmark", "instance_id", "model", "prompt_sha256", "answer", "score", "raw_score", "tokens_in",
                "tokens_out", "cost_usd", "latency_s", "cached", "error"):
        assert key in inst
    assert inst["answer"] == "A" and inst["cached"] is False and inst["error"] is None
    import hashlib

    prompt = "Answer A or B.\n\nQuestion: question 0?\nA. yes\nB. no\nAnswer:"
    assert inst["prompt_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    # the exact prompt went out as one user message, no system prompt (requests arrive in any order)
    assert {"messages": [{"role": "user", "content": prompt}]}.items() <= next(
        r["json"] for r in server.requests if r["json"]["messages"][0]["content"] == prompt).items()

    again = run(pytester, *model_args(server, data, "--medhelm-json", str(out)), *mode)
    assert again.ret == 0
    assert server.count == 10  # nothing new reached the server
    assert json.loads(out.read_text())["benchmarks"] == report["benchmarks"]
    assert all(i["cached"] for i in json.loads(out.read_text())["instances"])


def test_requests_are_sent_ahead_concurrently(pytester, toy):
    from pytest_medhelm.testing.server import running_server

    data = toy(40)
    with running_server(answer="A", latency=0.2) as srv:
        result = run(pytester, *model_args(srv, data, "--medhelm-concurrency", "8"))
        assert result.ret == 0
        assert srv.count == 40
        assert srv.max_in_flight == 8  # the answers-ahead phase keeps exactly the requested concurrency busy
    result.stdout.fnmatch_lines(["*medhelm answers: 40/40*"])


@pytest.mark.e2e
def test_xdist_sends_each_request_once_and_matches_a_serial_run(pytester, toy, server):
    data = toy(30, yes_every=3)
    serial, dist = pytester.path / "serial.json", pytester.path / "dist.json"
    assert run(pytester, *model_args(server, data, "--medhelm-json", str(serial), "--medhelm-cache", "off")).ret == 0
    assert server.count == 30
    assert run(pytester, *model_args(server, data, "--medhelm-json", str(dist), "--medhelm-cache-dir",
                                      str(pytester.path / "other-cache")), "-n", "2").ret == 0
    assert server.count == 60  # each of the 30 requests exactly once more, not once per worker
    a, b = json.loads(serial.read_text()), json.loads(dist.read_text())
    assert a["benchmarks"] == b["benchmarks"] and a["models"] == b["models"]
    assert [i["score"] for i in a["instances"]] == [i["score"] for i in b["instances"]]


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_thresholds_decide_the_exit_status(pytester, toy, server, mode):
    data = toy(10)
    failing = run(pytester, *model_args(server, data, "--medhelm-threshold", "toy>=0.9"), *mode)
    assert failing.ret == 1
    failing.stdout.fnmatch_lines(["*medhelm gate FAILED: toy>=0.9 for openai/toy-model: 0.500*"])
    passing = run(pytester, *model_args(server, data, "--medhelm-threshold", "toy>=0.1",
                                        "--medhelm-threshold", "Medical Research Assistance>=0.5",
                                        "--medhelm-threshold", "overall>=0.5"), *mode)
    assert passing.ret == 0
    passing.stdout.fnmatch_lines(["*medhelm gates: all 3 passed*"])


def test_thresholds_from_the_ini_file(pytester, toy, server):
    data = toy(10)
    pytester.makeini("[pytest]\nmedhelm_thresholds =\n    toy>=0.4\n    overall>=0.95\n")
    result = run(pytester, *model_args(server, data))
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gate FAILED: overall>=0.95*"])


@pytest.mark.parametrize("args, message", [
    (["--medhelm-threshold", "pubmedqa>=abc"], "*'abc' is not a number*"),
    (["--medhelm-threshold", "pubmedqa>=1.5"], "*outside [[]0, 1[]]*"),
    (["--medhelm-threshold", "pubmedqa=0.5"], "*expected NAME>=VALUE*"),
    (["--medhelm-threshold", "nosuchthing>=0.5"], "*'nosuchthing' is not a benchmark slug, a category or 'overall'*"),
    (["--medhelm-concurrency", "0"], "*expected a number >= 1*"),
    (["--medhelm-cache", "maybe"], "*expected one of on, off, refresh*"),
    (["--medhelm-benchmark", "nosuch"], "*unknown benchmark*"),
    (["--medhelm-api-base", "localhost:8000"], "*expected an http:// or https:// URL*"),
    (["--medhelm-data-dir", "does/not/exist"], "*not a directory*"),
])
def test_bad_values_are_usage_errors(pytester, server, args, message):
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester, "--medhelm-model", "openai/x", *args)
    assert result.ret == 4
    result.stderr.fnmatch_lines([message])
    assert server.count == 0


def test_bad_ini_value_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nmedhelm_concurrency = lots\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*medhelm_concurrency*expected a whole number*"])


def test_misses_are_their_own_outcome_and_rerun_with_lf(pytester, toy, server):
    data = toy(6)
    args = model_args(server, data)
    first = run(pytester, *args, "-v", pytest_cache=True)
    assert first.ret == 0
    first.stdout.fnmatch_lines(["*test_toy*q001* MISSED*", "*medhelm misses*",
                                "MISSED *q001* - expected 'B' (no), got 'A'", "*3 passed, 3 missed*"])
    rerun = run(pytester, *args, "--lf", pytest_cache=True)
    rerun.stdout.fnmatch_lines(["*rerun previous 3 failures*", "test_toy.py mmm*", "*= 3 missed in *"])


def test_strict_makes_misses_fail(pytester, toy, server):
    data = toy(4)
    result = run(pytester, *model_args(server, data, "--medhelm-strict"))
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*MISSED: expected 'B' (no), got 'A'*"])


def test_two_models_give_a_win_rate_table(pytester, toy):
    from pytest_medhelm.testing.server import running_server

    data = toy(8)
    out = pytester.path / "r.json"
    # the model named "openai/good" answers right, "openai/bad" always says A
    answers = {f"question {r['id'][1:].lstrip('0') or '0'}?": "AB"[r["correct"]] for r in toy_rows(8)}

    def script(body):
        prompt = body["messages"][0]["content"]
        if body["model"] == "good":
            return next(a for q, a in answers.items() if f"Question: {q}\n" in prompt)
        return "A"

    with running_server(answer="A") as srv:
        srv.set_answer(script)
        result = run(pytester, "--medhelm-model", "openai/good", "--medhelm-model", "openai/bad",
                     "--medhelm-api-base", srv.url, "--medhelm-data-dir", str(data), "--medhelm-json", str(out))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["leaderboard:", "*win rate*", "openai/good *1.00*", "openai/bad *0.00*"])
    models = {m["model"]: m for m in json.loads(out.read_text())["models"]}
    assert models["openai/good"]["win_rate"] == 1.0 and models["openai/bad"]["win_rate"] == 0.0
    assert models["openai/good"]["macro_avg"] == 1.0 and models["openai/bad"]["macro_avg"] == 0.5


def test_missing_data_skips_with_a_reason_naming_the_file(pytester, toy, server):
    toy(3)
    empty = pytester.mkdir("empty")
    result = run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                 "--medhelm-data-dir", str(empty), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*toy: data file 'toy.json' not found*expected at *empty/toy/toy.json*"])
    assert server.count == 0


def test_malformed_data_is_one_error_naming_the_file(pytester, toy, server):
    data = toy(3)
    (data / "toy" / "toy.json").write_text('[{"id": "q0", "q": "x", "correct": 0}, {"id"')
    result = run(pytester, *model_args(server, data))
    assert result.ret == 1
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*toy.json*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_a_systematic_model_error_is_one_clear_message_and_exit_1(pytester, toy):
    from pytest_medhelm.testing.server import running_server

    data = toy(6)
    with running_server(answer="A", api_key="sk-right") as srv:
        result = run(pytester, *model_args(srv, data), "--medhelm-retries", "2", "--medhelm-concurrency", "2")
        assert srv.count == 2  # a 401 is not retried; once seen, the queued requests are not sent at all
    assert result.ret == 1
    # the run stops after the first item: the other five would only repeat the same message
    result.stdout.fnmatch_lines(["*every request to openai/toy-model fails: Incorrect API key*",
                                 "*every model under test fails every request*", "*= 1 error in*"])


def test_server_errors_are_retried_then_items_score(pytester, toy):
    from pytest_medhelm.testing.server import running_server

    data = toy(6)
    faults = [("status", 500), ("status", 503), ("status", 429, {"Retry-After": "0"})]
    with running_server(answer="A", faults=faults) as srv:
        result = run(pytester, *model_args(srv, data))
        assert srv.count == 9
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*3 passed, 3 missed*"])


def test_markdown_summary(pytester, toy, server):
    data = toy(4)
    md = pytester.path / "summary.md"
    result = run(pytester, *model_args(server, data, "--medhelm-markdown", str(md), "--medhelm-threshold", "toy>=0.9"))
    assert result.ret == 1
    text = md.read_text()
    assert "## MedHELM results" in text and "1 of 1 gates fail" in text and "| toy " in text


def test_cache_directory_is_private_and_keyed_by_model(pytester, toy, server):
    data = toy(2)
    cache = pytester.path / "c"
    assert run(pytester, *model_args(server, data, "--medhelm-cache-dir", str(cache))).ret == 0
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert run(pytester, "--medhelm-model", "openai/other", "--medhelm-api-base", server.url, "--medhelm-data-dir",
               str(data), "--medhelm-cache-dir", str(cache)).ret == 0
    assert server.count == 4  # another model never gets the first one's answers
    assert run(pytester, *model_args(server, data, "--medhelm-cache-dir", str(cache), "--medhelm-cache",
                                     "refresh")).ret == 0
    assert server.count == 6


def test_selecting_benchmarks_deselects_the_others(pytester, toy, server):
    data = toy(2)
    result = run(pytester, *model_args(server, data, "--medhelm-benchmark", "pubmedqa"))
    result.stdout.fnmatch_lines(["*1 deselected*"])
    assert server.count == 0


def test_collect_only_sends_nothing(pytester, toy, server):
    data = toy(3)
    result = run(pytester, *model_args(server, data), "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_toy*q000*"])
    assert server.count == 0


@pytest.mark.e2e
def test_a_session_without_medhelm_items_imports_nothing_heavy(pytester):
    pytester.makepyfile(test_plain="""
        import sys
        def test_plain():
            pass
        def test_zz_modules():
            heavy = [m for m in ("litellm", "pydantic", "numpy", "diskcache", "aiohttp", "tabulate")
                     if m in sys.modules]
            assert heavy == [], heavy
            # nor the run: it starts with the first medhelm test collected
            assert "pytest_medhelm.run" not in sys.modules
    """)
    # only our plugin: other installed plugins may import numpy or pydantic themselves
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        result = run(pytester, "-p", "pytest_medhelm.plugin", subprocess=True)
    finally:
        del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    result.assert_outcomes(passed=2)


def test_without_any_option_the_session_starts_at_the_first_medhelm_test(pytester, toy, server):
    toy(3)
    pytester.makepyfile(test_more="""
        import pytest

        def test_plain_first(request):
            assert request.config.pluginmanager.get_plugin("medhelm-run") is not None  # collected: started

        @pytest.mark.medhelm(benchmark="toy")
        def test_toy_again(medhelm_instance):
            pass

        @pytest.mark.parametrize("x", [1, 2])
        @pytest.mark.medhelm(benchmark="toy")
        def test_toy_params(medhelm_case, x):
            pass
    """)
    result = run(pytester, "-v", "-rs")
    result.assert_outcomes(passed=1, skipped=4)  # each medhelm test parametrized once (x2 for x), not twice
    result.stdout.fnmatch_lines(["*test_toy_params?no-model-1?*SKIPPED*", "*no model under test*"])
    assert server.count == 0
    pytester.makepyfile(test_more="""
        def test_unmarked(medhelm_instance):
            pass
    """)
    result = run(pytester)
    assert result.ret == 2  # a collection error, as when the session started in pytest_configure
    result.stdout.fnmatch_lines(["*test_unmarked: a test using medhelm fixtures needs @pytest.mark.medhelm*"])


def test_prices_file_gives_exact_costs(pytester, toy, server):
    data = toy(4)
    prices = pytester.path / "prices.toml"
    prices.write_text('["openai/toy-model"]\ninput_per_million = 2.50\noutput_per_million = 10.00\n')
    out = pytester.path / "r.json"
    result = run(pytester, *model_args(server, data, "--medhelm-prices", str(prices), "--medhelm-json", str(out)))
    assert result.ret == 0
    report = json.loads(out.read_text())
    for inst in report["instances"]:
        assert inst["cost_usd"] == inst["tokens_in"] * 2.5e-6 + inst["tokens_out"] * 1e-5
    [model] = report["models"]
    assert model["cost_usd"] == model["tokens_in"] * 2.5e-6 + model["tokens_out"] * 1e-5


def test_bad_prices_file_is_a_usage_error(pytester, server):
    pytester.makepyfile("def test_nothing(): pass")
    prices = pytester.path / "prices.toml"
    prices.write_text('["openai/x"]\ninput_per_million = "cheap"\n')
    result = run(pytester, "--medhelm-model", "openai/x", "--medhelm-prices", str(prices))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*prices.toml*input_per_million*"])


def test_dry_run_prints_an_estimate_and_sends_nothing(pytester, toy, server):
    data = toy(6)
    prices = pytester.path / "prices.toml"
    prices.write_text('["openai/toy-model"]\ninput_per_million = 2.50\noutput_per_million = 10.00\n')
    result = run(pytester, *model_args(server, data, "--medhelm-prices", str(prices), "--medhelm-dry-run"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*toy*openai/toy-model*$*", "*dry run: nothing was sent*"])
    assert server.count == 0


def test_html_report_is_written(pytester, toy, server):
    data = toy(4)
    html = pytester.path / "r.html"
    assert run(pytester, *model_args(server, data, "--medhelm-html", str(html))).ret == 0
    text = html.read_text()
    assert "<svg" in text and "toy" in text
    assert "<script src" not in text and "<link" not in text  # self-contained (the browser test checks it live)
