"""``--medhelm-max-tokens N``: every benchmark's answers capped at N tokens, said everywhere, cached apart.

Whole pytest runs (serial and ``-n 2``) of a toy benchmark whose own ``max_tokens`` is 40, against our test server:
what the server is sent, pytest's header, the terminal summary, the results JSON, the Markdown and HTML reports,
and the cache (a capped answer is never served to an uncapped run, and a cap above the benchmark's own limit sends
the very same request). Then the option's usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows, write_toy_data

from pytest_medhelm.report.generation_cap import cap_note, capped
from pytest_medhelm.testing.server import running_server

XDIST = [pytest.param(["-p", "no:xdist"], id="serial"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


@pytest.fixture
def toy40(pytester: pytest.Pytester) -> Path:
    """The toy benchmark, its own max_tokens 40 (a generation task's, as HELM sets them), with 6 questions."""
    conftest = TOY_CONFTEST.replace("max_tokens=1)", "max_tokens=40)")
    assert conftest != TOY_CONFTEST
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_toy=TOY_TEST)
    return write_toy_data(pytester.path, toy_rows(6))


def run(pytester: pytest.Pytester, url: str, data: Path, *extra: str) -> pytest.RunResult:
    return pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", url,
                             "--medhelm-data-dir", str(data), *extra)


def sent_max_tokens(server, since: int = 0) -> list[int]:
    return [r["json"]["max_tokens"] for r in server.requests[since:]]


@pytest.mark.parametrize("xdist", XDIST)
def test_the_cap_is_sent_said_recorded_and_cached_apart(pytester, toy40, xdist):
    out, md, html = pytester.path / "r.json", pytester.path / "r.md", pytester.path / "r.html"
    with running_server(answer="A") as srv:
        capped_run = run(pytester, srv.url, toy40, "--medhelm-max-tokens", "16", "--medhelm-json", str(out),
                         "--medhelm-markdown", str(md), "--medhelm-html", str(html), *xdist)
        first = sent_max_tokens(srv)
        again = run(pytester, srv.url, toy40, "--medhelm-max-tokens", "16", *xdist)  # the same cap: all cached
        after_again = srv.count
        # no cap: other requests, asked anew (in this process in both variants: a miss sends as the capped run
        # did, which is checked in the variant's mode; what it shows is the cache's keys, the same in any mode)
        uncapped = run(pytester, srv.url, toy40, "-p", "no:xdist")
        second = sent_max_tokens(srv, after_again)
    text = capped_run.stdout.str()
    assert capped_run.ret == 0, text[-3000:]
    assert first == [16] * 6  # the benchmark's 40, capped
    # before anything is sent (pytest's header), and in the summary
    assert ("medhelm: answers capped at 16 tokens (--medhelm-max-tokens 16): a departure from MedHELM's generation "
            "settings") in text
    note = ("Answers capped at 16 tokens (--medhelm-max-tokens), a departure from MedHELM's generation settings: 1 "
            "benchmark(s) allow more (toy 40); their scores are not comparable with MedHELM's.")
    assert f"medhelm: {note}" in text
    results = json.loads(out.read_text())
    assert results["run"]["generation_cap"] == {"max_tokens": 16, "benchmarks": {"toy": 40}}
    assert results["run"]["options"]["max_tokens"] == 16
    assert f"**{note}**" in md.read_text()
    page = html.read_text()
    assert 'id="generation-cap"' in page and "Answers capped at 16 tokens" in page
    assert again.ret == 0 and after_again == 6, again.stdout.str()[-2000:]
    assert uncapped.ret == 0 and second == [40] * 6, uncapped.stdout.str()[-2000:]
    assert "capped" not in uncapped.stdout.str()


def test_a_cap_above_the_benchmarks_limit_sends_the_same_request_and_says_so(pytester, toy40):
    out = pytester.path / "r.json"
    with running_server(answer="A") as srv:
        assert run(pytester, srv.url, toy40, "-p", "no:xdist").ret == 0
        result = run(pytester, srv.url, toy40, "-p", "no:xdist", "--medhelm-max-tokens", "100", "--medhelm-json",
                     str(out))
        sent = sent_max_tokens(srv)
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert sent == [40] * 6  # the second run found every answer: the cap changed no request
    record = json.loads(out.read_text())["run"]["generation_cap"]
    assert record == {"max_tokens": 100, "benchmarks": {}}
    assert "no benchmark of this run allows more, so none was shortened" in result.stdout.str()


def test_without_the_option_the_results_say_no_cap(pytester, toy40):
    out = pytester.path / "r.json"
    with running_server(answer="A") as srv:
        result = run(pytester, srv.url, toy40, "-p", "no:xdist", "--medhelm-json", str(out))
    assert result.ret == 0
    assert json.loads(out.read_text())["run"]["generation_cap"] is None


@pytest.mark.parametrize(("args", "ini", "expected"), [
    (["--medhelm-max-tokens", "0"], "", "--medhelm-max-tokens"),
    (["--medhelm-max-tokens", "many"], "", "--medhelm-max-tokens"),
    ([], "medhelm_max_tokens = -3", "ini key medhelm_max_tokens"),
])
def test_a_bad_cap_is_a_usage_error_naming_the_option(pytester, toy40, args, ini, expected):
    if ini:
        pytester.makeini("[pytest]\n" + ini + "\n")
    with running_server(answer="A") as srv:
        result = run(pytester, srv.url, toy40, *args)
        count = srv.count
    assert result.ret == 4 and count == 0
    assert expected in result.stderr.str(), result.stderr.str()


def test_capped_and_the_note():
    assert capped(1024, 64) == 64 and capped(10, 64) == 10 and capped(1024, None) == 1024
    assert cap_note(None) is None
    assert cap_note({"max_tokens": 8, "benchmarks": {"a": 512, "b": 1024}}) == (
        "Answers capped at 8 tokens (--medhelm-max-tokens), a departure from MedHELM's generation settings: 2 "
        "benchmark(s) allow more (a 512, b 1024); their scores are not comparable with MedHELM's.")
