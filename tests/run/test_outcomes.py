"""Nothing measured never passes, and what was measured is visible in the reporters users already have
(JUnit XML, pytest-html, pytest-sugar, -rA), and plays with rerunfailures, timeout and -x.

Inner runs are in-process (BERTScore's torch is imported before any inner session: tests/conftest.py), except where a
new interpreter is the point (pytest-sugar, forced on, stays on in its process)."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest
import pytester_runs
from pytester_runs import run as inner
from pytester_runs import suite_args, toy_args

from pytest_medhelm.testing.server import running_server


# ------------------------------------------------------------------------------------------ the jury
def writer_or_broken_judges(body):
    if body["model"].startswith("judge"):
        return "I would rate this response highly, it is quite good overall."  # no JSON at all
    return "HISTORY OF PRESENT ILLNESS: the patient reports a cough. ASSESSMENT AND PLAN: rest."


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_items_without_a_valid_judgement_are_errors_not_misses(pytester, shared_data, xdist):
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(writer_or_broken_judges)
        result = inner(pytester, *suite_args(
            server.url, shared_data, "mediqa", 3, "-p", "no:randomly", "--medhelm-cache-dir",
            str(pytester.path / "cache"), "--medhelm-json", str(out), *xdist,
            judges=("openai/judge-a", "openai/judge-b")))
    assert result.ret == 1, result.stdout.str()[-3000:]
    counts = result.parseoutcomes()
    assert counts.get("errors", counts.get("error")) == 3 and "missed" not in counts, counts
    text = result.stdout.str()
    assert "ScoringError: no valid judgement: openai/judge-a:" in text
    # one line per judge and reason for the whole run, not one per item
    lines = [line for line in result.stdout.lines if line.startswith("medhelm: judge ")]
    assert len(lines) == 2 and all("gave no valid judgement on 3 items" in line for line in lines), lines
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert bench["n"] == 0 and bench["mean"] is None and bench["n_errors"] == 3  # left out of the mean
    assert all(set(i["judge_failures"]) == {"openai/judge-a", "openai/judge-b"} for i in report["instances"])


@pytest.mark.e2e
def test_under_helm_compat_a_judge_failure_scores_helms_default(pytester, shared_data):
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(writer_or_broken_judges)
        result = inner(pytester, *suite_args(
            server.url, shared_data, "mediqa", 2, "-p", "no:randomly", "-p", "no:xdist", "--medhelm-compat", "helm",
            "--medhelm-json", str(out)))
    assert result.ret == 0, result.stdout.str()[-3000:]
    [bench] = json.loads(out.read_text())["benchmarks"]
    assert bench["raw_mean"] == 1.0 and bench["n"] == 2


# ------------------------------------------------------------------------------------------ gates
def test_gates_without_a_model_fail_with_one_line(pytester, toy):
    toy(3)
    result = pytester_runs.run(pytester, "--medhelm-threshold", "toy>=0.5")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*medhelm gate FAILED: toy>=0.5: no model under test (--medhelm-model)*"])
    result.stdout.fnmatch_lines(["*nothing was measured*"])


def test_gates_when_every_item_is_skipped_for_want_of_data_fail(pytester, toy, server):
    toy(3)
    empty = pytester.mkdir("empty")
    result = pytester_runs.run(pytester,
                               *toy_args(server, empty, "--medhelm-threshold", "overall>=0.1", "-p", "no:xdist"))
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*nothing was measured*",
                                 "*medhelm gate FAILED: overall>=0.1 for openai/toy-model: no score*"])
    assert server.count == 0


GATED_TOY_CONFTEST_EXTRA = textwrap.dedent('''
    from pytest_medhelm.catalogue.definition import Benchmark as _B
    import dataclasses as _dc

    OTHER = _dc.replace(TOY, slug="toy2", category="clinical_decision_support",
                        subcategory="Supporting Diagnostic Decisions")

    def pytest_medhelm_register_benchmarks(registry):
        registry.register(TOY)
        registry.register(OTHER)
''')

TWO_TESTS = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)

    @pytest.mark.medhelm(benchmark="toy2")
    def test_toy2(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
''')


@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_a_gate_on_a_deselected_benchmark_is_not_evaluated(pytester, toy, server, mode):
    from toy_benchmark import TOY_CONFTEST

    data = toy(4)
    (data / "toy2").mkdir()
    (data / "toy2" / "toy.json").write_text((data / "toy" / "toy.json").read_text())
    pytester.makeconftest(TOY_CONFTEST + GATED_TOY_CONFTEST_EXTRA)
    pytester.makepyfile(test_toy=TWO_TESTS)
    out = pytester.path / "r.json"
    args = toy_args(server, data, "-k", "test_toy2", "--medhelm-threshold", "toy>=0.9",
                    "--medhelm-threshold", "clinical_decision_support>=0.1", "--medhelm-json", str(out), *mode)
    result = inner(pytester, *args)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*medhelm gate NOT EVALUATED: toy>=0.9 for openai/toy-model: deselected*",
                                 "*medhelm gates: 1 passed, 1 not evaluated*"])
    gates = {g["spec"]: g for g in json.loads(out.read_text())["gates"]}
    assert gates["toy>=0.9"]["passed"] is None and gates["toy>=0.9"]["status"] == "not evaluated"
    assert gates["clinical_decision_support>=0.1"]["passed"] is True
    strict = inner(pytester, *args, "--medhelm-strict-gates")
    assert strict.ret == 1, strict.stdout.str()


# ------------------------------------------------------------------------------------------ subsets
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_a_subset_is_marked_partial_everywhere(pytester, toy, server, mode):
    data = toy(10)
    out, md = pytester.path / "r.json", pytester.path / "r.md"
    result = inner(pytester, *toy_args(server, data, "-k", "q001 or q002 or q003", "--medhelm-json", str(out),
                                          "--medhelm-markdown", str(md), "--medhelm-threshold", "toy>=0.1", *mode))
    assert result.ret == 0, result.stdout.str()
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_planned"], bench["partial"]) == (3, 10, True)
    result.stdout.fnmatch_lines(["*toy*n=3/10 partial*"])
    # a gate read from the subset passes, and says so
    [gate] = report["gates"]
    assert gate["passed"] is True and gate["partial"] is True
    result.stdout.fnmatch_lines(["*medhelm gate toy>=0.1 for openai/toy-model: read from a partial run*"])
    assert "n=3/10 partial" in md.read_text()
    full = inner(pytester, *toy_args(server, data, "--medhelm-json", str(out), *mode))
    assert full.ret == 0
    [bench] = json.loads(out.read_text())["benchmarks"]
    assert (bench["n"], bench["n_planned"], bench["partial"]) == (10, 10, False)
    assert json.loads(out.read_text())["run"]["interrupted"] is False


# ------------------------------------------------------------------------------------------ reporters
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_a_miss_is_visible_in_junit_xml_with_its_score(pytester, toy, server, mode):
    data = toy(4)  # q000, q002 answer A (right); q001, q003 expect B (missed)
    junit = pytester.path / "junit.xml"
    # (every plugin of users' we test with loaded, as in a user's environment, none asked for anything; under xdist
    # pytest-rerunfailures still registers its hooks and hands its workers a port, beside what ours hands them)
    result = pytester_runs.run(pytester, *toy_args(server, data, f"--junitxml={junit}", *mode, "-rA"),
                               plugins=pytester_runs.USERS_PLUGINS)
    assert result.ret == 0, result.stdout.str()
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    missed = cases["test_toy[toy-model-q001]"]
    skipped = missed.find("skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail"
    assert skipped.get("message").startswith("MISSED: expected 'B' (no), got 'A'")
    right = cases["test_toy[toy-model-q000]"]
    assert right.find("skipped") is None and right.find("failure") is None
    for case, score in ((right, "1.0"), (missed, "0.0")):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props.get("medhelm_score") == score, ET.tostring(case)
    # the terminal: its own outcome, and -rA lists the misses
    assert result.parseoutcomes() == {"passed": 2, "missed": 2}
    assert "MISSED test_toy.py::test_toy[toy-model-q001] - expected 'B' (no), got 'A'" in result.stdout.lines


def test_a_miss_is_visible_in_pytest_html(pytester, toy, server):
    import pytest_html  # noqa: F401  (a test dependency: the real plugin)
    data = toy(2)
    html = pytester.path / "report.html"
    result = pytester_runs.run(pytester,
                               *toy_args(server, data, f"--html={html}", "--self-contained-html", "-p", "no:xdist"),
                               plugins=("html", "metadata"))  # (pytest-html needs pytest-metadata)
    assert result.ret == 0, result.stdout.str()
    text = html.read_text()
    # pytest-html shows an xfail apart from a pass, with the reason
    assert "1 Expected failure" in text or "1 Expected failures" in text, text[:2000]
    assert "MISSED: expected" in text


@pytest.mark.e2e
def test_a_miss_is_counted_apart_by_pytest_sugar(pytester, toy, server):
    import pytest_sugar  # noqa: F401  (a test dependency: the real plugin)
    data = toy(4)
    # (in a child process: pytest-sugar, once forced on, stays on in the process that ran it)
    result = pytester_runs.run(pytester, *toy_args(server, data, "-p", "no:xdist", "--force-sugar"), subprocess=True,
                               plugins=("sugar",))
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    assert "2 passed" in text and "2 xfailed" in text, text[-2000:]


# ------------------------------------------------------------------------------------------ plugins
def test_rerunfailures_asks_an_errored_item_again_and_keeps_one_record(pytester, toy):
    import pytest_rerunfailures  # noqa: F401  (a test dependency: the real plugin)
    data = toy(5)
    out = pytester.path / "r.json"
    # the run's first request (question 0's) fails for good (no retries); asked again on the rerun, it is answered
    with running_server(answer="A", faults=[("status", 500)]) as server:
        result = pytester_runs.run(pytester,
                                   *toy_args(server, data, "--medhelm-retries", "0", "--reruns", "2", "--medhelm-json",
                                             str(out), "-p", "no:xdist"), plugins=("rerunfailures",))
        count = server.count
    assert result.ret == 0, result.stdout.str()
    assert count == 6  # re-asked on the rerun, not served the stored error
    assert result.parseoutcomes().get("rerun") == 1
    report = json.loads(out.read_text())
    assert len(report["instances"]) == 5  # one record per item: its last attempt
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_errors"]) == (5, 0)


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_pytest_timeout_does_not_count_the_wait_in_the_send_queue(pytester, toy, mode):
    import pytest_timeout  # noqa: F401  (a test dependency: the real plugin)

    data = toy(2)
    # concurrency 1, 1.5 s per answer: each item waits longer than --timeout 1 for its own answer (pytest-timeout
    # times an item from its own start), and its own time once the answer is there is a few milliseconds
    with running_server(answer="A", latency=1.5) as server:
        result = inner(pytester, *toy_args(server, data, "--medhelm-concurrency", "1", "--timeout", "1", *mode),
                       plugins=("timeout",))
    assert result.ret == 0, result.stdout.str()
    assert "Timeout" not in result.stdout.str()
    assert result.parseoutcomes() == {"passed": 1, "missed": 1}


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_exitfirst_keeps_the_answers_in_flight_and_sends_nothing_more(pytester, toy, mode):
    data = toy(12)
    pytester.makepyfile(test_toy=textwrap.dedent('''
        import pytest
        from pytest_medhelm.assertions import assert_metric

        @pytest.mark.medhelm(benchmark="toy")
        def test_toy(medhelm_instance, medhelm_model):
            answer = medhelm_model.answer(medhelm_instance)
            assert medhelm_instance.id != "q000", "the first item fails: -x stops the run"
    '''))
    cache = pytester.path / "cache"
    out = pytester.path / "r.json"
    # concurrency 2, 0.5 s per answer: when q000 fails (its answer came first), q001 is answered, q002 and q003
    # are in flight, and the other eight are only queued
    with running_server(answer="A", latency=0.5) as server:
        result = inner(pytester, *toy_args(server, data, "--medhelm-concurrency", "2", "-x", "--medhelm-cache-dir",
                                           str(cache), "--medhelm-json", str(out), *mode))
        sent, answered = server.count, server.stats()["by_status"].get("200", 0)
    assert result.ret in (1, 2), result.stdout.str()  # (xdist reports its own -x stop as an interruption)
    assert sent < 12, sent  # what was only queued was not sent
    from pytest_medhelm.cache.store import AnswerCache

    stored = AnswerCache(cache)
    try:
        assert len(stored) == sent == answered  # every request sent was answered, and its answer kept
    finally:
        stored.close()
    assert json.loads(out.read_text())["run"]["interrupted"] is False  # stopped by -x, not by Ctrl-C
