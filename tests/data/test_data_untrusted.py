"""A data file is untrusted input (issue 20, point 9): a benchmark whose file breaks its loader in any way (JSON
nested too deeply, a loader that recurses without end, one that crashes) leaves the other benchmarks collected and
run. (The readers' own refusals: tests/data/test_readers.py.)"""

from __future__ import annotations

import json
import textwrap

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows

from pytest_medhelm.testing.server import running_server

DEEP = "[" * 200_000 + "]" * 200_000


DEEP_CONFTEST = TOY_CONFTEST + textwrap.dedent('''
    from pytest_medhelm.data.readers import read_json

    def build_deep(files):
        rows = read_json(files["deep.json"])
        return [Instance(id=str(i), input="q", choices=("yes", "no"), correct=0, references=("yes",))
                for i, _ in enumerate(rows)]

    def build_crash(files):
        raise RecursionError("a loader that recursed without end")

    DEEP = Benchmark(slug="deep", name="Deep", category="medical_research",
                     subcategory="Conducting Literature Research", access="public", kind="closed",
                     files=(DataFile("deep.json", description="deep"),), build_instances=build_deep,
                     prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="Question"),
                     metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1)
    CRASH = Benchmark(slug="crash", name="Crash", category="medical_research",
                      subcategory="Conducting Literature Research", access="public", kind="closed",
                      files=(DataFile("crash.json", description="crash"),), build_instances=build_crash,
                      prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="Question"),
                      metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1)

    def pytest_medhelm_register_benchmarks(registry):  # (replaces the toy conftest's hook: the toy, too)
        registry.register(TOY)
        registry.register(DEEP)
        registry.register(CRASH)
''')

BENCH_TESTS = TOY_TEST + textwrap.dedent('''
    @pytest.mark.medhelm(benchmark="deep")
    def test_deep(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)

    @pytest.mark.medhelm(benchmark="crash")
    def test_crash(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
''')


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_hostile_data_file_errors_its_benchmark_and_the_others_run(pytester, xdist) -> None:
    pytester.makeconftest(DEEP_CONFTEST)
    pytester.makepyfile(test_benches=BENCH_TESTS)
    data = pytester.path / "data"
    for slug, name, text in (("toy", "toy.json", json.dumps(toy_rows(6))), ("deep", "deep.json", DEEP),
                             ("crash", "crash.json", "[]")):
        (data / slug).mkdir(parents=True)
        (data / slug / name).write_text(text)
    with running_server(answer="A") as server:
        result = pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                                   "--medhelm-data-dir", str(data), "-rA", *xdist)
        assert server.count == 6, result.stdout.str()[-3000:]  # the toy benchmark's six questions
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert f"{data / 'deep' / 'deep.json'}: JSON nested too deeply to read" in output
    assert "RecursionError: a loader that recursed without end" in output
    assert str(data / "crash" / "crash.json") in output
    counts = result.parseoutcomes()
    assert counts.get("passed", 0) + counts.get("missed", 0) == 6, counts
