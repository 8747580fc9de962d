"""catalogue/definition.py: what a benchmark is, one declarative object per benchmark."""

from __future__ import annotations

from pathlib import Path


def test_a_category_may_be_named_by_its_display_name(tmp_path):
    from pytest_medhelm.catalogue.definition import Benchmark
    from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
    from pytest_medhelm.prompting import MultipleChoicePrompt

    bench = Benchmark(slug="b", name="B", category="Administration and Workflow", subcategory="x", access="public",
                      kind="closed", files=(), build_instances=list, prompt=MultipleChoicePrompt(),
                      metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1, data_dir="here")
    assert bench.category == "administration_workflow"  # the slug: also its pytest marker
    assert bench.data_dir == Path(__file__).resolve().parent / "here"  # relative to the file that created it
