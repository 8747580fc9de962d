"""Custom benchmarks as users write them: examples/custom_benchmark run against our test server, where the
registration hook may live, a benchmark's own data folder, and a clear error for an unknown category."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytester_runs import run
from toy_benchmark import TOY_CONFTEST, TOY_TEST

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_benchmark"
XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


@pytest.fixture
def yes_server():
    """A test server that always answers "yes" (the example's t1 and t3 are yes, t2 is no)."""
    from pytest_medhelm.testing.server import running_server

    with running_server(answer="yes") as srv:
        yield srv


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_the_example_collects_scores_and_reports(pytester, yes_server, mode):
    shutil.copytree(EXAMPLE, pytester.path / "custom_benchmark", ignore=shutil.ignore_patterns("__pycache__"))
    out, md = pytester.path / "r.json", pytester.path / "summary.md"
    # as examples/README.md runs it: no --medhelm-data-dir, the benchmark's own data_dir holds triage.csv
    result = run(pytester, "custom_benchmark", "--medhelm-model", "openai/triage-model", "--medhelm-api-base",
                 yes_server.url, "--medhelm-json", str(out), "--medhelm-markdown", str(md),
                 "--medhelm-threshold", "clinic_triage>=0.6", "-m", "administration_workflow and private", *mode)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*expected 'no', got 'yes'*", "*medhelm gates: all 1 passed*",
                                 "*2 passed, 1 missed*"])
    assert yes_server.count == 3
    [bench] = json.loads(out.read_text())["benchmarks"]
    assert (bench["slug"], bench["n"], bench["metric"], bench["category"]) == (
        "clinic_triage", 3, "yes_no_match", "Administration and Workflow")
    assert bench["mean"] == pytest.approx(2 / 3)
    assert "| clinic_triage " in md.read_text()
    prompt = yes_server.requests[0]["json"]["messages"][0]["content"]
    assert prompt.startswith("Answer yes or no.\n\nMessage: Synthetic note:") and prompt.endswith("\nAnswer:")


def test_data_dir_option_wins_over_the_benchmarks_own_folder(pytester, yes_server):
    shutil.copytree(EXAMPLE, pytester.path / "custom_benchmark", ignore=shutil.ignore_patterns("__pycache__"))
    mine = pytester.path / "mine" / "clinic_triage"
    mine.mkdir(parents=True)
    (mine / "triage.csv").write_text("id,note,question,answer\nx1,Synthetic note: a rash.,Same day?,no\n")
    out = pytester.path / "r.json"
    result = run(pytester, "custom_benchmark", "--medhelm-model", "openai/m", "--medhelm-api-base", yes_server.url,
                 "--medhelm-data-dir", str(pytester.path / "mine"), "--medhelm-json", str(out))
    result.stdout.fnmatch_lines(["*1 missed*"])
    assert [i["instance_id"] for i in json.loads(out.read_text())["instances"]] == ["x1"]


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_a_conftest_in_a_subfolder_is_refused_with_where_to_register(pytester, yes_server, mode):
    pytester.makeini("[pytest]\n")
    shutil.copytree(EXAMPLE, pytester.path / "tests" / "custom", ignore=shutil.ignore_patterns("__pycache__"))
    result = run(pytester, "--medhelm-model", "openai/m", "--medhelm-api-base", yes_server.url, *mode)
    # a collection error: nothing ran (pytest says "interrupted"; xdist reports its workers' collection errors as 1)
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if mode else pytest.ExitCode.INTERRUPTED)
    result.stdout.fnmatch_lines([
        "*pytest-medhelm: *tests/custom/conftest.py implements pytest_medhelm_register_benchmarks, but pytest "
        "loaded it while collecting*Register benchmarks in the conftest.py at the rootdir, in the conftest.py of a "
        "directory given on the command line (or in testpaths), or in a plugin*"])
    assert yes_server.count == 0
    # the same folder named on the command line: its conftest is loaded at start-up, and the benchmark runs
    named = run(pytester, "tests/custom", "--medhelm-model", "openai/m", "--medhelm-api-base", yes_server.url, *mode)
    assert named.ret == 0, named.stdout.str()
    named.stdout.fnmatch_lines(["*2 passed, 1 missed*"])


@pytest.mark.e2e
def test_a_rootdir_conftest_serves_tests_in_subfolders(pytester, toy, server):
    data = toy(4)
    sub = pytester.mkdir("deep")
    (sub / "test_toy_deep.py").write_text(TOY_TEST.replace("def test_toy", "def test_toy_deep"))
    result = run(pytester, "--medhelm-model", "openai/m", "--medhelm-api-base", server.url, "--medhelm-data-dir",
                 str(data), "-n", "2")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*4 passed, 4 missed*"])


def test_an_unknown_category_names_the_benchmark_and_the_categories(pytester, server):
    pytester.makeconftest(TOY_CONFTEST.replace('category="medical_research"', 'category="cardiology"'))
    pytester.makepyfile(test_toy=TOY_TEST)
    result = run(pytester, "--medhelm-model", "openai/m", "--medhelm-api-base", server.url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*benchmark 'toy': category 'cardiology' is not a MedHELM category; expected one of: "
        "clinical_decision_support (Clinical Decision Support), clinical_note_generation (Clinical Note Generation), "
        "patient_communication (Patient Communication and Education), medical_research (Medical Research "
        "Assistance), administration_workflow (Administration and Workflow)*"])
    assert server.count == 0


def test_the_authoring_guide_shows_the_example_as_it_is():
    """The authoring guide's example (docs/writing-benchmarks.md) is examples/custom_benchmark, code for code (the
    example is what runs)."""
    import ast

    guide = (Path(__file__).resolve().parents[2] / "docs" / "writing-benchmarks.md").read_text()
    section = guide.split("## Writing a benchmark of your own")[1].split("\n## ")[0]
    blocks = [block.strip("\n") for block in section.split("```python")[1:]]
    blocks = [block.split("```")[0].strip("\n") for block in blocks]
    conftest = (EXAMPLE / "conftest.py").read_text()
    docstring_end = ast.parse(conftest).body[0].end_lineno
    assert blocks == ["\n".join(conftest.splitlines()[docstring_end:]).strip("\n"),
                      (EXAMPLE / "test_clinic_triage.py").read_text().strip("\n")]
    for part in ("DataFile(", "build_instances", "prompt=", "def score(", "data_dir=",
                 "def pytest_medhelm_register_benchmarks(registry):"):
        assert part in blocks[0], part
