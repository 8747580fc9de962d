"""docs/data.md is generated from the benchmark definitions and up to date; what it says about the public data
(instance counts, filters) matches the loaders; every prompt is a PromptTemplate (Loaded's own test:
tests/test_values.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalogue_helpers import BENCHMARKS, REAL_DATA, build

from pytest_medhelm.catalogue import docs
from pytest_medhelm.prompting import GenerationPrompt, MultipleChoicePrompt, PromptTemplate

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = sorted(slug for slug, bench in BENCHMARKS.items() if bench.access == "public")


def test_docs_data_md_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")
    assert committed == docs.render_markdown(), "regenerate: python -m pytest_medhelm.catalogue.docs > docs/data.md"


def test_every_benchmark_is_documented() -> None:
    text = docs.render_markdown()
    assert len(BENCHMARKS) >= 43  # HELM 0.5.16's 37 and medhelm 0.8.0's additions
    for slug, bench in BENCHMARKS.items():
        assert f"### `{slug}`: {bench.name}" in text
        for file in bench.files:
            assert f"`{file.folder_of(bench)}/{file.name}`" in text
        _help, example = docs._help_and_example(bench)
        assert example, f"{slug}: no synthetic example (Benchmark.example, or 'Synthetic example' in data_help)"
        # a count only for public data, and for each public benchmark but those whose copy is not pinned
        unpinned = any(f.url and not f.sha256 and not f.optional for f in bench.files) and bench.instance_count is None
        assert (bench.instance_count is not None) == (bench.access == "public" and not unpinned), slug


@pytest.mark.parametrize("slug", PUBLIC)
def test_documented_count_and_filters_match_the_real_data(slug: str) -> None:
    if not (REAL_DATA / slug).is_dir():
        pytest.skip(f"no real data for {slug}")
    bench = BENCHMARKS[slug]
    result = build(slug, REAL_DATA)
    assert len(result) == bench.instance_count
    removed = getattr(result, "removed", {})
    assert bool(removed) == bool(bench.filters), removed  # documented filters are exactly those that remove


def test_every_prompt_is_a_prompt_template() -> None:
    kinds = set()
    for bench in BENCHMARKS.values():
        assert isinstance(bench.prompt, PromptTemplate), bench.slug
        kinds.add(type(bench.prompt).__name__)
    assert {GenerationPrompt.__name__, MultipleChoicePrompt.__name__, "ClearPrompt", "ChatPrompt",
            "MmluAfrPrompt"} == kinds


def test_docs_benchmarks_md_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert committed == docs.render_benchmarks_markdown(), (
        "regenerate: python -m pytest_medhelm.catalogue.docs --write docs")


def test_a_new_benchmark_gets_its_row_under_its_subcategory(tmp_path: Path) -> None:
    """docs/benchmarks.md follows the definitions: a benchmark added (here PubMedQA again under another slug, in
    another subcategory) is counted and listed where its definition puts it, placed by this project."""
    import dataclasses

    added = dataclasses.replace(BENCHMARKS["pubmedqa"], slug="pubmedqa_again",
                                subcategory="Managing Research Enrollment")
    text = docs.render_benchmarks_markdown([*BENCHMARKS.values(), added])
    assert f"**{len(BENCHMARKS) + 1} benchmarks**" in text
    enrollment = text.split("### Managing Research Enrollment")[1].split("###")[0]
    assert ("| [`pubmedqa_again`](data.md#pubmedqa_again) PubMedQA | Answer yes, no or maybe to a research question "
            "about a PubMed abstract. | public | closed | `exact_match` | this project |") in enrollment
    docs.main(["--write", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmarks.md", "data.md"]
    assert (tmp_path / "benchmarks.md").read_text(encoding="utf-8") == docs.render_benchmarks_markdown()
