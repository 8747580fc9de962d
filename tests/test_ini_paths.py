"""Paths in ini files resolve against the ini file's directory (as pytest's own path options do), whatever
directory pytest runs from, and a bad value names the ini key and the file it came from."""

from __future__ import annotations

import json

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows, write_toy_data

XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


@pytest.fixture
def project(pytester: pytest.Pytester):
    """The toy benchmark registered in the rootdir conftest, its test in a subfolder, data beside the ini file."""
    pytester.makeconftest(TOY_CONFTEST)
    sub = pytester.mkdir("sub")
    (sub / "test_toy.py").write_text(TOY_TEST)
    write_toy_data(pytester.path, toy_rows(4))
    (pytester.path / "prices.toml").write_text('["openai/toy-model"]\ninput_per_million = 1.0\n'
                                               'output_per_million = 2.0\n')
    return pytester.path


def run_from(pytester, monkeypatch, where, *args):
    monkeypatch.chdir(where)
    return pytester_runs.run(pytester, *args)


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_ini_paths_resolve_against_the_ini_files_directory(pytester, monkeypatch, project, server, mode):
    pytester.makeini("""
        [pytest]
        medhelm_data_dir = data
        medhelm_cache_dir = answers
        medhelm_prices = prices.toml
        medhelm_json = out/results.json
        medhelm_markdown = out/summary.md
        medhelm_html = out/report.html
    """)
    result = run_from(pytester, monkeypatch, project / "sub", "--medhelm-model", "openai/toy-model",
                      "--medhelm-api-base", server.url, *mode)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*2 passed*2 missed*"])
    for name in ("results.json", "summary.md", "report.html"):
        assert (project / "out" / name).is_file(), name
    assert (project / "answers").is_dir()
    assert sorted(p.name for p in (project / "sub").iterdir() if p.name != "__pycache__") == ["test_toy.py"]
    report = json.loads((project / "out" / "results.json").read_text())
    [model] = report["models"]
    assert model["cost_usd"] == model["tokens_in"] * 1e-6 + model["tokens_out"] * 2e-6  # the prices file was read
    assert report["run"]["options"]["data_dir"] == str(project / "data")


def test_command_line_paths_stay_relative_to_the_invocation_directory(pytester, monkeypatch, project, server):
    pytester.makeini("[pytest]\nmedhelm_data_dir = data\n")
    result = run_from(pytester, monkeypatch, project / "sub", "--medhelm-model", "openai/toy-model",
                      "--medhelm-api-base", server.url, "--medhelm-json", "here.json")
    assert result.ret == 0, result.stdout.str()
    assert (project / "sub" / "here.json").is_file()


@pytest.mark.parametrize("ini, message", [
    ("medhelm_data_dir = nowhere", "*ini key medhelm_data_dir (in *tox.ini) 'nowhere' (resolved to *nowhere): "
                                   "not a directory*"),
    ("medhelm_prices = nothing.toml", "*ini key medhelm_prices (in *tox.ini) 'nothing.toml' (resolved to "
                                      "*nothing.toml): no such file*"),
    ("medhelm_api_base = localhost:8000", "*ini key medhelm_api_base (in *tox.ini): *expected an http:// or "
                                         "https:// URL, got 'localhost:8000'*"),
    ("medhelm_benchmark = nosuch", "*ini key medhelm_benchmark (in *tox.ini) 'nosuch': unknown benchmark*"),
])
def test_a_bad_ini_value_names_the_key_and_the_file(pytester, monkeypatch, project, server, ini, message):
    pytester.makeini(f"[pytest]\n{ini}\n")
    result = run_from(pytester, monkeypatch, project / "sub", "--medhelm-model", "openai/toy-model")
    assert result.ret == 4
    result.stderr.fnmatch_lines([message])
    assert server.count == 0


def test_the_same_value_on_the_command_line_names_the_option(pytester, monkeypatch, project):
    result = run_from(pytester, monkeypatch, project / "sub", "--medhelm-model", "openai/toy-model",
                      "--medhelm-data-dir", "nowhere")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--medhelm-data-dir 'nowhere' (resolved to *sub/nowhere): not a directory*"])
