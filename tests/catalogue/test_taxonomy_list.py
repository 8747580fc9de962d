"""``--medhelm-list`` and ``--medhelm-tree``: the taxonomy and the benchmarks as a run shows them (the taxonomy as
data: tests/catalogue/test_taxonomy.py)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import EXPECTED_TASKS

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.catalogue.taxonomy import (
    CATEGORIES,
    SUBCATEGORIES,
    taxonomy_order,
)

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"


# ---------------------------------------------------------------------------------------------------- the CLI
@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user data cache, and no download possible (a listing must never download)."""
    cache = tmp_path / "user-data-cache"
    cache.mkdir()
    monkeypatch.setenv("MEDHELM_DATA_HOME", str(cache))

    def no_download(*args, **kwargs):
        raise AssertionError("the listing tried to download")

    monkeypatch.setattr("pytest_medhelm.data.sources._download", no_download)
    return cache


def _rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by slug (cells split on runs of 2+ spaces)."""
    rows = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 8 and re.fullmatch(r"[a-z0-9_]+", cells[0]) and cells[0] != "slug":
            rows[cells[0]] = cells
    return rows


def test_list_shows_every_registered_benchmark(pytester: pytest.Pytester, empty_cache: Path) -> None:
    result = pytester_runs.run(pytester, "--medhelm-list")
    assert result.ret == 0
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    rows = _rows(out)
    slugs = [b.slug for b in builtin_benchmarks()]
    assert set(slugs) <= set(rows), set(slugs) - set(rows)
    assert out.index("slug") < out.index("category") < out.index("subcategory") < out.index("instances")
    # nothing downloaded, nothing in the empty cache: no data anywhere, no error
    for slug in slugs:
        assert rows[slug][-2:] == ["no", "-"], rows[slug]
    assert "user data cache" in out and str(empty_cache) in out
    # taxonomy order: categories, then subcategories, then slugs
    listed = [slug for slug in rows if slug in slugs]
    by_slug = {b.slug: b for b in builtin_benchmarks()}
    keys = [(*taxonomy_order(by_slug[s].category, by_slug[s].subcategory), s) for s in listed]
    assert keys == sorted(keys)


def test_list_reads_the_user_cache_without_data_dir(pytester: pytest.Pytester, empty_cache: Path) -> None:
    source = SHARED_DATA / "pubmedqa" / "ori_pqal.json"
    if not source.is_file():
        pytest.skip("../shared/data/pubmedqa is absent")
    (empty_cache / "pubmedqa").mkdir()
    shutil.copy(source, empty_cache / "pubmedqa" / "ori_pqal.json")
    result = pytester_runs.run(pytester, "--medhelm-list")
    assert result.ret == 0
    assert _rows(result.stdout.str())["pubmedqa"][-2:] == ["yes", "1000"]


def test_list_with_shared_data(pytester: pytest.Pytester, empty_cache: Path) -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    result = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(SHARED_DATA))
    assert result.ret == 0
    rows = _rows(result.stdout.str())
    assert rows["pubmedqa"][-2:] == ["yes", "1000"]
    assert rows["pubmedqa"][:7] == ["pubmedqa", "PubMedQA", "Medical Research Assistance",
                                    "Conducting Literature Research", "public", "closed", "exact_match"]
    # a private benchmark has no data there
    assert rows["cdi_qa"][-2:] == ["no", "-"]
    assert f"{SHARED_DATA} (--medhelm-data-dir)" in result.stdout.str()


def test_list_counts_the_instances_a_run_under_the_same_compat_has(pytester: pytest.Pytester,
                                                                   empty_cache: Path) -> None:
    """MTSamples Procedures: 131 instances by default, HELM's 128 under --medhelm-compat helm (docs/fidelity.md)."""
    if not (SHARED_DATA / "mtsamples_procedures").is_dir():
        pytest.skip("../shared/data/mtsamples_procedures is absent")
    default = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(SHARED_DATA))
    helm = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(SHARED_DATA), "--medhelm-compat",
                             "helm")
    assert default.ret == helm.ret == 0
    assert _rows(default.stdout.str())["mtsamples_procedures"][-1].startswith("131")
    assert _rows(helm.stdout.str())["mtsamples_procedures"][-1].startswith("128")


def test_list_with_empty_data_dir(pytester: pytest.Pytester, empty_cache: Path, tmp_path: Path) -> None:
    data = tmp_path / "empty-data"
    data.mkdir()
    result = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(data), "-v")
    assert result.ret == 0
    rows = _rows(result.stdout.str())
    assert rows["pubmedqa"][-2:] == ["no", "-"]
    assert all(row[-2:] == ["no", "-"] for row in rows.values())
    # -v says which file goes where
    result.stdout.fnmatch_lines([(f"pubmedqa: pubmedqa: data file 'ori_pqal.json' not found; expected at "
                                  f"{data}/pubmedqa/ori_pqal.json*")])


def test_tree(pytester: pytest.Pytester, empty_cache: Path) -> None:
    result = pytester_runs.run(pytester, "--medhelm-tree")
    assert result.ret == 0
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    for number, cat in enumerate(CATEGORIES, start=1):
        assert f"{number}. {cat.name} [{cat.slug}]" in out
    for sub in SUBCATEGORIES:
        assert re.search(rf"^  {re.escape(sub.name)}: \d+ tasks?, \d+ benchmarks?$", out, flags=re.M), sub.name
    # each benchmark under its own subcategory, with its access and data
    lines = out.splitlines()
    for bench in builtin_benchmarks():
        line = next(i for i, text in enumerate(lines) if re.match(rf"^    {bench.slug} +{bench.access} +data: no$",
                                                                    text))
        heading = next(text for text in reversed(lines[:line]) if re.match(r"^  \S", text))
        assert heading.startswith(f"  {bench.subcategory}: "), (bench.slug, heading)
    assert f"22 subcategories, {EXPECTED_TASKS} tasks (the paper states 121" in out
    assert "Generate consultation notes" not in out  # tasks only with -v


def test_tree_verbose_lists_tasks(pytester: pytest.Pytester, empty_cache: Path) -> None:
    result = pytester_runs.run(pytester, "--medhelm-tree", "-v")
    assert result.ret == 0
    out = result.stdout.str()
    for sub in SUBCATEGORIES:
        for task in sub.tasks:
            assert f"      - {task}\n" in out, task


def test_list_and_tree_together(pytester: pytest.Pytester, empty_cache: Path) -> None:
    result = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-tree")
    assert result.ret == 0
    out = result.stdout.str()
    assert "pubmedqa" in _rows(out) and "1. Clinical Decision Support [clinical_decision_support]" in out


BROKEN_CONFTEST = textwrap.dedent('''
    import json
    from pytest_medhelm.catalogue.definition import Benchmark
    from pytest_medhelm.values import Instance
    from pytest_medhelm.data.errors import DataError
    from pytest_medhelm.data.sources import DataFile
    from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
    from pytest_medhelm.prompting import MultipleChoicePrompt

    def boom(files):
        raise RuntimeError("the loader exploded")

    def bad_row(files):
        raise DataError(files["toy.json"], "row 3", "expected an object")

    def good(files):
        rows = json.loads(files["toy.json"].read_text())
        return [Instance(id=str(i), input="q", choices=("yes", "no"), correct=0) for i in range(len(rows))]

    def make(slug, build, subcategory="Conducting Literature Research"):
        return Benchmark(slug=slug, name=slug.title(), category="medical_research", subcategory=subcategory,
                         access="private", kind="closed", files=(DataFile("toy.json"),), build_instances=build,
                         prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="Question"),
                         metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1)

    def pytest_medhelm_register_benchmarks(registry):
        registry.register(make("zz_broken", boom))
        registry.register(make("zz_bad_row", bad_row))
        registry.register(make("aa_elsewhere", good, subcategory="Somewhere Else"))
''')


def test_broken_custom_benchmark_is_an_error_row(pytester: pytest.Pytester, empty_cache: Path,
                                                 tmp_path: Path) -> None:
    pytester.makeconftest(BROKEN_CONFTEST)
    data = tmp_path / "data"
    for slug in ("zz_broken", "zz_bad_row", "aa_elsewhere"):
        (data / slug).mkdir(parents=True)
        (data / slug / "toy.json").write_text(json.dumps([1, 2, 3]))
    result = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(data))
    assert result.ret == 0
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    rows = _rows(out)
    assert rows["zz_broken"][-2:] == ["error: RuntimeError: the loader exploded", "-"]
    detail = f"DataError: {data}/zz_bad_row/toy.json, row 3: expected an object"
    assert rows["zz_bad_row"][-2] == "error: " + (detail if len(detail) <= 60 else detail[:59] + "…")
    assert rows["aa_elsewhere"][-2:] == ["yes", "3"]
    # the whole message below the table, and the summary counts them
    result.stdout.fnmatch_lines(["*benchmarks: * with data, * without, 2 with errors*",
                                 f"zz_bad_row: DataError: {data}/zz_bad_row/toy.json, row 3: expected an object",
                                 "zz_broken: RuntimeError: the loader exploded"])
    # the built-ins are all still there, and the unknown subcategory sorts after the taxonomy's
    assert {b.slug for b in builtin_benchmarks()} <= set(rows)
    order = list(rows)
    assert order.index("zz_broken") < order.index("aa_elsewhere")  # same category, known subcategory first
    assert order.index("pubmedqa") < order.index("zz_broken")  # same subcategory: by slug

    tree = pytester_runs.run(pytester, "--medhelm-tree", "--medhelm-data-dir", str(data))
    assert tree.ret == 0
    tree.stdout.fnmatch_lines(["Outside the taxonomy (category or subcategory unknown):",
                               "  aa_elsewhere * private  data: yes  (medical_research / Somewhere Else)"])
    assert "INTERNALERROR" not in tree.stdout.str()
