"""Values the typed records refuse never abort a run: an item's record takes what it can and says what it refused
(its other items unaffected), and a plugin's results hook writing garbage is reported, not raised (the run's own
files are written and its own exit status and exception stay what they were)."""

from __future__ import annotations

import json
import textwrap

import pytest
import pytester_runs
from pytester_runs import toy_args
from toy_benchmark import TOY_CONFTEST, planted_records_test

from pytest_medhelm.report.records import SCHEMA_FILE, Results

jsonschema = pytest.importorskip("jsonschema")

XDIST = pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])


def valid_results(path) -> dict:
    """The results file: written, fitting the shipped schema, and read back through the models."""
    data = json.loads(path.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert [error.message for error in validator.iter_errors(data)] == []
    Results.model_validate(data)
    return data


# a benchmark whose author passed the data file's ids as they came: a float, NaN, a UUID, an int
HOSTILE_IDS = textwrap.dedent('''
    import uuid as _uuid

    def _hostile_id(i):
        return (2.0, float("nan"), _uuid.UUID(int=7), 12)[i % 4] if i < 4 else f"q{i:03d}"

    def build(files):
        rows = json.loads(files["toy.json"].read_text())
        return [Instance(id=_hostile_id(i), input=r["q"], choices=("yes", "no"), correct=r["correct"],
                         references=(("yes", "no")[r["correct"]],)) for i, r in enumerate(rows)]

    import dataclasses as _dc
    TOY = _dc.replace(TOY, build_instances=build)
''')

# a custom metric (written through the record API) giving values of the wrong types, one kind per question
HOSTILE_TEST = planted_records_test(
    '{"q004": {"detail": {"expected": "A"}}, "q005": {"raw_score": "n/a"}, "q006": {"metrics": ["not", "a", "dict"]},'
    ' "q007": {"tokens_in": 3.5}, "q008": {"metrics": {"jury_tokens_in": "many", "jury_cost_usd": "free"}},'
    ' "q009": {"score": "n/a"}}')


@XDIST
def test_an_item_with_values_its_record_refuses_is_recorded_and_the_run_completes(pytester, toy, server, mode):
    data = toy(11)
    pytester.makeconftest(TOY_CONFTEST + HOSTILE_IDS)
    pytester.makepyfile(test_toy=HOSTILE_TEST)
    out, md = pytester.path / "r.json", pytester.path / "r.md"
    result = pytester_runs.run(pytester,
                               *toy_args(server, data, "--medhelm-json", str(out), "--medhelm-markdown", str(md),
                                         *mode))
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    assert result.ret == 1, result.stdout.str()  # q009's score is refused: an error, nothing measured
    assert md.is_file()
    report = valid_results(out)
    records = {r["instance_id"]: r for r in report["instances"]}
    assert len(records) == 11
    # ids are written as text, as the benchmark gave them (2.0 stays "2.0", never the int 2)
    assert {"2.0", "nan", "00000000-0000-0000-0000-000000000007", "12"} <= set(records)
    assert records["2.0"]["score"] == 1.0  # q000 expects A: scored as any other item
    assert records["q004"]["detail"] == str({"expected": "A"})
    invalid = {key: records[key]["metrics"]["invalid_fields"] for key in ("q005", "q006", "q007", "q008", "q009")}
    assert "valid number" in invalid["q005"]["raw_score"] and "'n/a'" in invalid["q005"]["raw_score"]
    assert "valid dictionary" in invalid["q006"]["metrics"]
    assert "fractional part" in invalid["q007"]["tokens_in"] and "3.5" in invalid["q007"]["tokens_in"]
    assert "'many'" in invalid["q008"]["jury_tokens_in"] and "'free'" in invalid["q008"]["jury_cost_usd"]
    # a refused non-score value leaves the measurement alone; a refused score makes the item an error
    assert records["q005"]["score"] == 0.0 and records["q005"]["error"] is None
    assert records["q007"]["tokens_in"] is None and records["q007"]["score"] == 0.0
    assert records["q009"]["score"] is None and records["q009"]["error_kind"] == "InvalidRecordField"
    assert "score" in records["q009"]["error"] and "'n/a'" in records["q009"]["error"]
    [bench] = report["benchmarks"]
    assert (bench["n"], bench["n_errors"]) == (10, 1)


# a plugin's results hook planting values the results refuse: a gate valued "n/a", a run header not a bool
GARBAGE_HOOK = textwrap.dedent('''
    def pytest_medhelm_results(results, config):
        results["gates"].append({"spec": "plugin-gate", "model": "openai/toy-model", "value": "n/a",
                                 "passed": True})
        results["run"]["interrupted"] = "perhaps"
''')


@XDIST
def test_a_results_hook_writing_refused_values_is_reported_and_the_files_are_written(pytester, toy, server, mode):
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + GARBAGE_HOOK)
    out, md = pytester.path / "r.json", pytester.path / "r.md"
    result = pytester_runs.run(pytester,
                               *toy_args(server, data, "--medhelm-json", str(out), "--medhelm-markdown", str(md),
                                         *mode))
    assert result.ret == 0, result.stdout.str()  # the plugin's garbage does not change the run's verdict
    for where in ("gates.0.value*valid number", "run.interrupted*valid boolean"):
        result.stdout.fnmatch_lines([f"*medhelm: WARNING: a pytest_medhelm_results hook*{where}*"])
    assert "INTERNALERROR" not in result.stdout.str()
    report = valid_results(out)
    assert report["gates"] == [] and report["run"]["interrupted"] is False  # the results built before the hook
    assert [b["n"] for b in report["benchmarks"]] == [4]
    assert md.is_file() and "toy" in md.read_text()


STOPPING_TEST = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        if str(medhelm_instance.id) == "q002":
            raise {stop}("stopped by the test at q002")
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
''')


@pytest.mark.e2e  # (a pytest in a new interpreter: an in-process run would pass the Ctrl-C to the outer session)
@pytest.mark.parametrize(("stop", "status", "shown"), [
    ("KeyboardInterrupt", pytest.ExitCode.INTERRUPTED, "*KeyboardInterrupt*"),
    ("RuntimeError", pytest.ExitCode.TESTS_FAILED, "*RuntimeError: stopped by the test at q002*")],
    ids=["ctrl-c", "x"])
def test_the_runs_own_stop_stays_visible_under_a_garbage_hook(pytester, toy, server, stop, status, shown):
    data = toy(6)
    pytester.makeconftest(TOY_CONFTEST + GARBAGE_HOOK)
    pytester.makepyfile(test_toy=STOPPING_TEST.replace("{stop}", stop))
    out = pytester.path / "r.json"
    # (a child process: an in-process run re-raises the KeyboardInterrupt into this session)
    result = pytester_runs.run(pytester, *toy_args(server, data, "--medhelm-json", str(out), "-p", "no:xdist", "-x"),
                               subprocess=True)
    assert result.ret == status, result.stdout.str()
    result.stdout.fnmatch_lines([shown])
    result.stdout.fnmatch_lines(["*medhelm: WARNING: a pytest_medhelm_results hook*gates.0.value*"])
    assert "INTERNALERROR" not in result.stdout.str()
    report = valid_results(out)
    assert [r["instance_id"] for r in report["instances"]][:2] == ["q000", "q001"]
