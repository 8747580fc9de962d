"""The toy benchmark of the plugin's own tests and of tests/perf/bench.py: a conftest registering a two-choice
benchmark read from DIR/toy/toy.json, and a test module running it.

Text only (no import of the package), so that the benchmark script can use it whatever checkout it measures.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

TOY_CONFTEST = textwrap.dedent('''
    import json
    from pytest_medhelm.catalogue.definition import Benchmark
    from pytest_medhelm.values import Instance
    from pytest_medhelm.data.sources import DataFile
    from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
    from pytest_medhelm.prompting import MultipleChoicePrompt

    def build(files):
        rows = json.loads(files["toy.json"].read_text())
        return [Instance(id=r["id"], input=r["q"], choices=("yes", "no"), correct=r["correct"],
                         references=(("yes", "no")[r["correct"]],)) for r in rows]

    TOY = Benchmark(slug="toy", name="Toy", category="medical_research", subcategory="Conducting Literature Research",
                    access="public", kind="closed", files=(DataFile("toy.json", description="toy questions"),),
                    build_instances=build,
                    prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="Question"),
                    metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1)

    def pytest_medhelm_register_benchmarks(registry):
        registry.register(TOY)
''')

TOY_TEST = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
''')


def planted_records_test(planted: str) -> str:
    """The toy benchmark's test module whose items' own code (as a custom metric or fixture would) writes, once the
    item is scored, the fields of ``planted`` into its record: ``planted`` is the Python source of a dict, question id
    -> {record field: value} (source, so that a value can be one no literal writes: ``float("inf")``,
    ``10 ** 5000``)."""
    return textwrap.dedent('''
        import pytest
        from pytest_medhelm.assertions import assert_metric
        from pytest_medhelm.item_api import record_for

        PLANTED = {planted}

        @pytest.mark.medhelm(benchmark="toy")
        def test_toy(medhelm_instance, medhelm_model):
            try:
                assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
            finally:
                for field, value in PLANTED.get(str(medhelm_instance.id), {{}}).items():
                    setattr(record_for(), field, value)  # (typed, but Python does not stop an item's own code)
    ''').format(planted=planted)


def toy_rows(n: int, yes_every: int = 2) -> list[dict]:
    """n questions; every ``yes_every``-th has "yes" (A) as its answer, the others "no" (B)."""
    return [{"id": f"q{i:03d}", "q": f"question {i}?", "correct": 0 if i % yes_every == 0 else 1} for i in range(n)]


def toy_answers(answers: list[str]) -> list[dict]:
    """Toy questions whose right answers are ``answers`` ("A" = yes, "B" = no)."""
    return [{"id": f"q{i:03d}", "q": f"question {i}?", "correct": 0 if a == "A" else 1} for i, a in enumerate(answers)]


def write_toy_data(project: Path, rows: list[dict]) -> Path:
    """The toy benchmark's data file holding ``rows`` in ``project``/data; gives that data dir."""
    data = project / "data"
    (data / "toy").mkdir(parents=True, exist_ok=True)
    (data / "toy" / "toy.json").write_text(json.dumps(rows))
    return data


TIMED_TEST = textwrap.dedent('''
    import json, time
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        started = time.time()
        answer = medhelm_model.answer(medhelm_instance)
        with open("item_times.jsonl", "a") as fh:
            fh.write(json.dumps([medhelm_instance.id, started]) + "\\n")
        assert_metric(answer, medhelm_instance)
''')
