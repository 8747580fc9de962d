"""The jury in the reports: which instrument scored a run, the judges' agreement per benchmark (terminal, JSON,
Markdown, HTML), and a comparison between runs scored by different instruments refusing to gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import NO_BERTSCORE, SUITE, suite_args
from report_fixtures import jury_run_results

from pytest_medhelm.compare.compare import build_comparison


def test_a_comparison_across_instruments_says_so_first_and_evaluates_no_gate() -> None:
    from pytest_medhelm.compare.compare import markdown_section, terminal_sections

    baseline = jury_run_results("pytest-medhelm@0.1.0", ["j1", "j2"], [0.9] * 30)
    current = jury_run_results("helm@ef439fc", ["j1", "j2"], [0.1] * 30)
    comparison, gates = build_comparison(baseline, current, compare_fail=[("overall", 0.05)], resamples=200)
    assert comparison["instrument_mismatch"] == {"baseline": "pytest-medhelm@0.1.0", "current": "helm@ef439fc"}
    [gate] = gates
    assert gate["passed"] is False and gate["evaluated"] is False and gate["value"] is None
    assert "different judge prompts" in gate["reason"]
    results = {**current, "comparison": comparison, "gates": gates}
    first_title = terminal_sections(results)[0][0]
    assert first_title.startswith("NOT COMPARABLE: the open-ended benchmarks were scored with different judge prompts")
    assert markdown_section(results).startswith("### NOT COMPARABLE")
    # a baseline without the field (made before it existed) is "unknown": not comparable either
    comparison, _ = build_comparison(jury_run_results(None, ["j1"], [0.9] * 3), current, resamples=50)
    assert comparison["instrument_mismatch"] == {"baseline": "unknown", "current": "helm@ef439fc"}
    # the same instrument, or a run without a jury: compared and gated as before
    same, gates = build_comparison(jury_run_results("helm@ef439fc", ["j1"], [0.9] * 30), current,
                                   compare_fail=[("overall", 0.05)], resamples=200)
    assert same["instrument_mismatch"] is None and gates[0]["passed"] is False and "dropped by" in gates[0]["reason"]
    closed, _ = build_comparison(jury_run_results(None, [], [0.9] * 3), jury_run_results(None, [], [0.9] * 3),
                                 resamples=50)
    assert closed["instrument_mismatch"] is None
    # a run whose processes asked from different instruments is one measurement with neither: never comparable
    mixed = "mixed: helm@ef439fc + pytest-medhelm@0.1.0"
    both, _ = build_comparison(jury_run_results(mixed, ["j1"], [0.9] * 3), jury_run_results(mixed, ["j1"], [0.9] * 3),
                               resamples=50)
    assert both["instrument_mismatch"] == {"baseline": mixed, "current": mixed}


VERDICT_BY_JUDGE = {"judge-a": 4, "judge-b": 3}


def judges_disagree_a_little(body: dict) -> str:
    prompt = body["messages"][0]["content"]
    if body["model"] in VERDICT_BY_JUDGE:
        bump = len(prompt) % 2  # the answers differ in quality as the judges see it
        score = VERDICT_BY_JUDGE[body["model"]] + bump
        return json.dumps({c: {"score": score, "explanation": "ok"} for c in ("accuracy", "completeness", "clarity")})
    return "HISTORY OF PRESENT ILLNESS: cough. ASSESSMENT AND PLAN: rest." + " x" * (len(prompt) % 3)


@pytest.mark.e2e
def test_a_run_reports_its_instrument_and_agreement_everywhere_and_refuses_a_cross_instrument_gate(
        pytester: pytest.Pytester, shared_data: Path) -> None:
    if not (shared_data / "helm_jury").is_dir():
        pytest.skip("../shared/data/helm_jury is absent")
    from pytest_medhelm.testing.server import running_server

    out, md, html = pytester.path / "r.json", pytester.path / "r.md", pytester.path / "r.html"
    with running_server(answer="x") as server:
        server.set_answer(judges_disagree_a_little)
        common = [str(SUITE), "-p", "no:cacheprovider", "-p", "no:xdist", "--medhelm-model", "openai/writer",
                  "--medhelm-api-base", server.url, "--medhelm-jury", "openai/judge-a", "--medhelm-jury",
                  "openai/judge-b", "--medhelm-jury-api-base", server.url, "--medhelm-benchmark", "aci_bench",
                  "--medhelm-max-instances", "8", "--medhelm-data-dir", str(shared_data),
                  "--medhelm-cache-dir", str(pytester.path / "cache"), *NO_BERTSCORE]  # (not under test here)
        # in this process: nothing here needs a new interpreter (BERTScore, which loads torch, is off)
        result = pytester_runs.run(pytester, *common, "--medhelm-json", str(out), "--medhelm-markdown", str(md),
                                   "--medhelm-html", str(html))
        assert result.ret == 0, result.stdout.str()[-3000:]
        stdout = result.stdout.str()
        report = json.loads(out.read_text())
        assert report["run"]["jury_prompts"] == "helm@ef439fc"
        [row] = report["jury_agreement"]
        assert row["judges"] == ["openai/judge-a", "openai/judge-b"] and row["n_complete"] == 8
        assert row["icc3k"] is not None and row["alpha_interval"] is not None
        assert "jury agreement (judge prompts helm@ef439fc):" in stdout
        icc = f"{row['icc3k']:.3f}"
        assert any(line.startswith("aci_bench") and icc in line and "judge-a: 0, judge-b: 0" in line
                   for line in stdout.splitlines())
        assert "### Jury agreement" in md.read_text() and icc in md.read_text()
        page = html.read_text()
        assert 'id="jury-agreement"' in page and icc in page and "helm@ef439fc" in page

        # the same answers compared with a baseline scored by our own rubric: not comparable, no gate evaluated
        report["run"]["jury_prompts"] = "pytest-medhelm@0.1.0"
        baseline = pytester.path / "baseline.json"
        baseline.write_text(json.dumps(report))
        result = pytester_runs.run(pytester, *common, "--medhelm-compare", str(baseline), "--medhelm-compare-fail",
                                   "overall:0.1")
    assert result.ret == 1, result.stdout.str()[-3000:]
    lines = result.stdout.str().splitlines()
    [first] = [i for i, line in enumerate(lines) if "comparison with" in line]
    assert lines[first].startswith("NOT COMPARABLE: the open-ended benchmarks were scored with different judge "
                                   "prompts (baseline pytest-medhelm@0.1.0, this run helm@ef439fc)")
    assert any("compare-fail overall:0.1" in line and "not evaluated" in line for line in lines)


@pytest.mark.e2e
def test_without_helms_files_the_run_says_once_that_its_open_ended_scores_are_not_medhelms(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, shared_data: Path) -> None:
    from pytest_medhelm.testing.server import running_server

    monkeypatch.setenv("MEDHELM_DATA_HOME", str(pytester.path / "empty-cache"))
    data = pytester.path / "data"
    data.mkdir()
    (data / "aci_bench").symlink_to(shared_data / "aci_bench")  # the benchmark's data, not HELM's judge prompts
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(judges_disagree_a_little)
        result = pytester_runs.run(pytester,
                                   *suite_args(server.url, data, "aci_bench", 3, "-n", "2", "--medhelm-cache-dir",
                                               str(pytester.path / "cache"), "--medhelm-json", str(out)),
                                   subprocess=True)
        judged = [r["json"]["messages"][0]["content"] for r in server.requests if r["json"]["model"] == "judge-a"]
    assert result.ret == 0, result.stdout.str()[-3000:]
    warnings = [line for line in result.stdout.str().splitlines() if "not comparable with MedHELM's" in line]
    assert len(warnings) == 1 and "helm_jury" in warnings[0] and "own rubric" in warnings[0]
    report = json.loads(out.read_text())
    assert report["run"]["jury_prompts"].startswith("pytest-medhelm@")
    assert judged and all(p.startswith("You are an experienced physician") for p in judged)  # our rubric's text
    [row] = report["jury_agreement"]
    assert row["note"] == "agreement needs two judges"
    assert "agreement needs two judges" in result.stdout.str()


#: loaded into the inner run with -p: the second xdist worker cannot read HELM's judge prompts (as when its
#: environment differs), so it asks its judges from our own rubric; the controller and the first worker from HELM's
SECOND_WORKER_WITHOUT_HELMS_FILES = '''
import os

def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        from pytest_medhelm.jury import instrument

        instrument.load_jury_instrument = lambda *a, **k: (instrument.own_rubric_instrument(), "no files here")
'''


@pytest.mark.e2e
def test_processes_that_asked_from_different_instruments_make_a_mixed_run_said_out_loud(
        pytester: pytest.Pytester, shared_data: Path) -> None:
    if not (shared_data / "helm_jury").is_dir():
        pytest.skip("../shared/data/helm_jury is absent")
    from pytest_medhelm.testing.server import running_server

    pytester.makepyfile(half_without_helm=SECOND_WORKER_WITHOUT_HELMS_FILES)
    pytester.syspathinsert()
    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(judges_disagree_a_little)
        result = pytester_runs.run(pytester,
                                   *suite_args(server.url, shared_data, "aci_bench", 6, "-p", "half_without_helm", "-n",
                                               "2", "--medhelm-cache-dir", str(pytester.path / "cache"),
                                               "--medhelm-json", str(out)), subprocess=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads(out.read_text())
    used = {inst["jury_instrument"] for inst in report["instances"]}
    assert len(used) == 2, used  # (xdist gives each of two workers part of 6 items)
    assert report["run"]["jury_prompts"].startswith("mixed: helm@ef439fc + pytest-medhelm@"), report["run"]
    assert any("asked the judges from different instruments" in line for line in result.stdout.lines)
