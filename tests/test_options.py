"""Each option is declared once (``pytest_medhelm.options.RunOptions``): its command-line option, its ini key, its
field of the run configuration and its checks are derived from that one line. These tests check the derivation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytester_runs import run

from pytest_medhelm.options import DERIVED, FIELDS, OPTIONS, RunOptions, declared, option

# a value that no option's parser accepts (a number, a choice, NAME>=VALUE, MODEL=URL, I/N, an environment
# variable's name, SLUG:NAME=VALUE, NAME:DROP)
UNPARSABLE = "!!"
# a value each check refuses, by check and source (the options without a parser, whose value is checked once read);
# pytest strips ini values, so a model string padded with spaces is refused on the command line only
REFUSED_BY_CHECK = {
    "command line": {"http_url": "localhost:8000", "model_string": " padded", "distinct_model_strings": " padded"},
    "ini file": {"http_url": "localhost:8000", "distinct_model_strings": "\n    openai/x\n    openai/x"},
}


def test_the_run_configuration_has_exactly_the_declared_fields_in_their_order():
    from pytest_medhelm.config import RunConfig

    assert list(RunConfig.model_fields) == list(RunOptions.__annotations__)
    assert FIELDS.keys() | DERIVED.keys() == RunConfig.model_fields.keys()
    for name, opt in FIELDS.items():
        field = RunConfig.model_fields[name]
        assert field.default == opt.field_default, name
        assert (opt.check is not None) == any(getattr(m, "func", None) is opt.check for m in field.metadata), name


def test_names_are_unique():
    for names in ([o.name for o in OPTIONS], [o.dest for o in OPTIONS], [o.ini_key for o in OPTIONS if o.ini_key]):
        assert len(names) == len(set(names))


def test_a_field_without_its_option_is_refused():
    class Declaration:
        models: tuple[str, ...] = option("model", "a model")
        judges: tuple[str, ...]

    with pytest.raises(TypeError, match=r"Declaration\.judges: a field without its option"):
        declared(Declaration)


def test_an_option_without_its_field_is_refused():
    class Declaration:
        models: tuple[str, ...] = option("model", "a model")
        judges = option("jury", "a judge")

    with pytest.raises(TypeError, match=r"Declaration\.judges: an option without its field's type annotation"):
        declared(Declaration)


def test_every_declared_option_and_ini_key_is_in_pytest_help(pytester):
    result = run(pytester, "--help")
    assert result.ret == 0
    text = result.stdout.str()
    for opt in OPTIONS:
        assert f"--medhelm-{opt.name}" in text, opt.name
        if opt.ini_key:
            assert f"  {opt.ini_key} (" in text, opt.ini_key  # "  medhelm_x (string):" in the ini section


def _unparsable_options() -> list:
    return [pytest.param(name, id=opt.name) for name, opt in FIELDS.items() if opt.parse is not None]


@pytest.mark.parametrize("field", _unparsable_options())
def test_an_unparsable_value_is_a_usage_error_naming_the_option(pytester, server, field):
    opt = FIELDS[field]
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester, "--medhelm-model", "openai/x", f"--medhelm-{opt.name}={UNPARSABLE}")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*--medhelm-{opt.name}*"])
    assert server.count == 0


@pytest.mark.parametrize("field", _unparsable_options())
def test_an_unparsable_ini_value_is_a_usage_error_naming_the_ini_key(pytester, server, field):
    opt = FIELDS[field]
    if not opt.ini_key:
        pytest.skip(f"--medhelm-{opt.name} has no ini key")
    pytester.makeini(f"[pytest]\n{opt.ini_key} = {UNPARSABLE}\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester, "--medhelm-model", "openai/x")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*pytest-medhelm: ini key {opt.ini_key}*"])
    assert server.count == 0


def _checked_options() -> list:
    return [pytest.param(name, id=opt.name) for name, opt in FIELDS.items() if opt.check is not None]


@pytest.mark.parametrize("field", _checked_options())
@pytest.mark.parametrize("source", ["command line", "ini file"])
def test_a_value_its_check_refuses_is_a_usage_error_naming_the_option(pytester, server, field, source):
    opt = FIELDS[field]
    assert opt.check is not None
    bad = REFUSED_BY_CHECK[source].get(opt.check.__name__)
    if bad is None:
        pytest.skip(f"no value of ini key {opt.ini_key} is refused by {opt.check.__name__} (pytest strips it)")
    pytester.makepyfile("def test_nothing(): pass")
    model = [] if field == "models" else ["--medhelm-model", "openai/x"]
    if source == "ini file":
        pytester.makeini(f"[pytest]\n{opt.ini_key} = {bad}\n")
        result = run(pytester, *model)
        named = f"*pytest-medhelm: ini key {opt.ini_key} (in *tox.ini): *"
    else:
        result = run(pytester, *model, f"--medhelm-{opt.name}={bad}")
        named = f"*pytest-medhelm: --medhelm-{opt.name}: *"
    assert result.ret == 4
    result.stderr.fnmatch_lines([named])
    assert server.count == 0


# ini keys and the values the run's results then hold (run.options): a number, a decimal, a choice, a flag, a
# string, a list, the ini lists of their own name, and the field derived from another option
def _ini_samples(url: str, root: Path) -> dict[str, tuple[str, object]]:
    return {
        "retries": ("1", 1),
        "timeout": ("30", 30.0),
        "concurrency": ("3", 3),
        "max_instances": ("2", 2),
        "max_tokens": ("8", 8),
        "budget": ("5", 5.0),
        "prices": ("prices.toml", str(root / "prices.toml")),  # relative to the ini file (tests/test_ini_paths.py)
        "cache": ("refresh", "refresh"),
        "compat": ("helm", "helm"),
        "healthbench_subset": ("hard", "hard"),
        "reasoning_effort": ("low", "low"),
        "strict_gates": ("true", True),
        "report_text": ("true", True),
        "local_only": ("true", True),
        "bertscore_model": ("off", "off"),
        "benchmarks": ("\n    toy", ["toy"]),
        "thresholds": ("\n    toy>=0.1\n    overall>=0.2", ["toy>=0.1", "overall>=0.2"]),
        "grader": ("openai/grader-x", "openai/grader-x"),
        "endpoints": (f"\n    openai/toy-model={url}\n    openai/grader-x={url}",
                      [["openai/toy-model", url], ["openai/grader-x", url]]),
    }


@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="p-no-xdist"),
                                  pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_every_ini_key_is_read_into_the_run_configuration(pytester, toy, server, mode):
    samples = _ini_samples(server.url, pytester.path)
    (pytester.path / "prices.toml").write_text('["openai/toy-model"]\ninput_per_million = 1.0\n'
                                               'output_per_million = 2.0\n')
    lines = [f"{FIELDS[name].ini_key} = {text}" for name, (text, _) in samples.items()]
    pytester.makeini("[pytest]\n" + "\n".join(lines) + "\n")
    out = pytester.path / "results.json"
    result = run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-data-dir", str(toy(4)),
                 "--medhelm-json", str(out), *mode)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*medhelm gates: all 2 passed*", "*1 passed, 1 missed*"])
    options = json.loads(out.read_text())["run"]["options"]
    assert {name: options[name] for name in samples} == {name: value for name, (_, value) in samples.items()}
    assert options["professional_grader"] == "openai/grader-x"  # derived: the one grader given grades both


def test_the_command_line_wins_over_the_ini_file_and_adds_to_its_lists(pytester, toy, server):
    pytester.makeini("[pytest]\nmedhelm_retries = 2\nmedhelm_thresholds = toy>=0.1\n"
                     "medhelm_endpoints = openai/toy-model=http://127.0.0.1:9/v1\n")
    out = pytester.path / "results.json"
    result = run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-data-dir", str(toy(2)),
                 "--medhelm-json", str(out), "--medhelm-retries", "0", "--medhelm-threshold", "overall>=0.2",
                 "--medhelm-endpoint", f"openai/toy-model={server.url}")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    options = json.loads(out.read_text())["run"]["options"]
    assert options["retries"] == 0
    assert options["thresholds"] == ["overall>=0.2", "toy>=0.1"]  # the command line's gates, then the ini file's
    assert options["endpoints"] == [["openai/toy-model", server.url]]  # model by model, the command line's
    assert options["professional_grader"] == "openai/gpt-5.4-2026-03-05"  # no grader given: each its reference's
