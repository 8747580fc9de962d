"""Helpers shared by the catalogue tests (tests/test_catalogue_*.py): loading a benchmark from a data directory,
writing synthetic files in the upstream layout, and checking the real data against HELM's reference prompts.

Real data is read from ``../shared/data`` beside the repository when it exists (tests that need it skip otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np
import pytest

from conftest import SHARED_DATA
from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.values import Instance, Loaded
from pytest_medhelm.data.sources import resolve_files

REAL_DATA = SHARED_DATA
REFERENCE_PROMPTS = SHARED_DATA.parent / "reference" / "prompts"

BENCHMARKS = {b.slug: b for b in builtin_benchmarks()}


def build(slug: str, data_dir: Path) -> Any:
    """What the benchmark's loader returns on ``data_dir/<slug>/`` (never downloading)."""
    benchmark = BENCHMARKS[slug]
    return benchmark.build_instances(resolve_files(benchmark, data_dir, download=False))


def load(slug: str, data_dir: Path) -> list[Instance]:
    return list(build(slug, data_dir))


def loaded(slug: str, data_dir: Path) -> Loaded:
    """The loader's result, which must be a :class:`Loaded` (it counts what its filters removed)."""
    result = build(slug, data_dir)
    assert isinstance(result, Loaded)
    return result


def real(slug: str) -> Path:
    """The real data directory, or skip when it has no data for ``slug``."""
    if not (REAL_DATA / slug).is_dir():
        pytest.skip(f"no real data for {slug} under {REAL_DATA}")
    return REAL_DATA


def write(tmp_path: Path, slug: str, name: str, content: str | bytes) -> Path:
    """Write ``tmp_path/<slug>/<name>``; text goes out with ``newline=""``, so a fixture's ``\\r\\n`` stays."""
    path = tmp_path / slug / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
    return path


def csv_text(header: Sequence[Any], rows: Sequence[Sequence[Any]], newline: str = "\n", delimiter: str = ",") -> str:
    """A delimited file: a cell is quoted when it holds the delimiter, a quote or a line break (``None`` is empty),
    and a row of one empty cell is written ``""`` so that it is not a blank line (as ``csv.writer`` does)."""

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        if any(ch in text for ch in (delimiter, '"', "\r", "\n")):
            return '"' + text.replace('"', '""') + '"'
        return text

    def line(values: Sequence[Any]) -> str:
        cells = [cell(v) for v in values]
        return '""' if cells == [""] else delimiter.join(cells)

    return "".join(line(values) + newline for values in [header, *rows])


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def helm_first_index(n: int, cap: int | None = None) -> int:
    """Position of the first prompt HELM sends: the first of its seed-0 sample (when ``cap`` is None or below n),
    else 0 (an uncapped run sends the instances in order)."""
    if cap is not None and n <= cap:
        return 0
    return int(np.random.RandomState(0).permutation(n)[0])


def check_real_count_and_reference_prompt(slug: str, count: int, cap: int | None = None) -> list[Instance]:
    """On the real data: ``count`` instances with unique, id-friendly ids, and HELM's reference prompt (the first
    prompt of its run) rendered byte for byte by exactly one instance, at HELM's first sampled position."""
    reference = REFERENCE_PROMPTS / f"{slug}.txt"
    if not (REAL_DATA / slug).is_dir() or not reference.is_file():
        pytest.skip(f"no real data for {slug} under {REAL_DATA}")
    benchmark = BENCHMARKS[slug]
    instances = load(slug, REAL_DATA)
    assert len(instances) == count
    ids = [instance.id for instance in instances]
    assert len(set(ids)) == len(ids)
    assert all(i and " " not in i and len(i) <= 40 for i in ids)
    expected = reference.read_bytes()
    matching = [k for k, instance in enumerate(instances) if benchmark.render_prompt(instance).encode() == expected]
    assert len(matching) == 1
    assert matching[0] == helm_first_index(len(instances), cap)  # pins HELM's instance order
    return instances


def assert_missing_column(slug: str, data_dir: Path, path: Path, column: str, where: str = "header (line 1)") -> None:
    """Loading ``slug`` fails with a DataError naming ``path``, its header and the missing ``column``."""
    from pytest_medhelm.data.errors import DataError

    with pytest.raises(DataError) as info:
        load(slug, data_dir)
    assert (info.value.path, info.value.where) == (str(path), where)
    assert repr(column) in info.value.problem
