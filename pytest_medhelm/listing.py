"""``pytest --medhelm-list`` and ``pytest --medhelm-tree``: what the catalogue holds, then exit (like ``--markers``).

* ``--medhelm-list``: one row per benchmark (slug, name, category, subcategory, access, kind, metric, data
  available or not, instance count), in the taxonomy's order (category, then subcategory, then slug). The data are
  looked for as a run would, but nothing is downloaded: in ``--medhelm-data-dir`` when given, else in the user
  data cache. Each benchmark's instances are built to count them, so a malformed file shows here as an error.
* ``--medhelm-tree``: category → subcategory → benchmarks (slug, access, data present or not); with ``-v`` the
  tasks of each subcategory too. Only the presence of the files is checked (nothing is read).

Whatever a benchmark's files or loader do (a missing file, a malformed row, a loader bug), it becomes that
benchmark's row or line, never a crash: a plugin's custom benchmark cannot break the listing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue.definition import Benchmark

HEADER = ["slug", "name", "category", "subcategory", "access", "kind", "metric", "data", "instances"]

#: an error message longer than this is cut in the table and printed whole below it
_CELL_WIDTH = 60


@dataclass
class DataStatus:
    available: str  # "yes" | "no" | "error"
    count: str  # the number of instances, or "-"
    detail: str = ""  # why not (DataMissing's message), or the error


def ordered(benchmarks: Iterable[Benchmark]) -> list[Benchmark]:
    """Benchmarks in the taxonomy's order: category, subcategory, slug; unknown places last."""
    from pytest_medhelm.catalogue.taxonomy import taxonomy_order

    def key(bench: Benchmark) -> tuple:
        category, subcategory = str(getattr(bench, "category", "")), str(getattr(bench, "subcategory", ""))
        return (*taxonomy_order(category, subcategory), category, subcategory, str(bench.slug))

    return sorted(benchmarks, key=key)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}: {text}"


def data_status(bench: Benchmark, data_dir: Path | None, count: bool = True, verification: Any = None,
                compat: str = "default") -> DataStatus:
    """Are the benchmark's data here (never downloading)? With ``count``, build the instances and count them, with
    the loader a run under ``compat`` uses (``--medhelm-compat helm`` keeps HELM's instances where they differ).
    With ``verification`` (the run's), a file that differs from its pinned sha256 makes the row an error, as in a
    run."""
    from pytest_medhelm.data.errors import DataMissing
    from pytest_medhelm.data.sources import resolve_files

    try:
        files = resolve_files(bench, data_dir, download=False, verification=verification)
        if not count:
            return DataStatus("yes", "-")
        instances = bench.instance_builder(compat)(files)
        removed = sum(getattr(instances, "removed", {}).values())  # what the loader's filters dropped, counted
        return DataStatus("yes", str(len(instances)) + (f" ({removed} filtered)" if removed else ""))
    except DataMissing as exc:
        return DataStatus("no", "-", str(exc))
    except Exception as exc:  # noqa: BLE001 - a malformed file, a loader bug: this row says so, the list goes on
        return DataStatus("error", "-", _one_line(exc))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _cell(text: str, width: int = _CELL_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _describe(bench: Benchmark) -> tuple[str, str, str, str, str, str, str]:
    from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG

    category = CATEGORY_BY_SLUG.get(getattr(bench, "category", ""))
    metric = getattr(bench, "metric", None)
    metric_name = getattr(metric, "name", None) or type(metric).__name__
    return (str(bench.slug), str(getattr(bench, "name", "")),
            category.name if category else str(getattr(bench, "category", "")),
            str(getattr(bench, "subcategory", "")), str(getattr(bench, "access", "")),
            str(getattr(bench, "kind", "")), str(metric_name))


def benchmark_rows(run, statuses: dict[str, DataStatus] | None = None) -> list[list[str]]:
    """One row per registered benchmark, in taxonomy order (``statuses`` collects each benchmark's status)."""
    data_dir = run.run_config.data_dir
    rows = []
    for bench in ordered(run.registry):
        status = data_status(bench, data_dir, verification=run.data_verification, compat=run.run_config.compat)
        if statuses is not None:
            statuses[bench.slug] = status
        data = f"error: {_cell(status.detail)}" if status.available == "error" else status.available
        rows.append([*_describe(bench), data, status.count])
    return rows


def _where(data_dir: Path | None) -> str:
    from pytest_medhelm.data.sources import user_data_home

    if data_dir is not None:
        return f"medhelm data: {data_dir} (--medhelm-data-dir)"
    return (f"medhelm data: user data cache {user_data_home()} (nothing is downloaded here; "
            "pass --medhelm-data-dir DIR for local copies)")


def _terminal(config: pytest.Config) -> pytest.TerminalReporter:
    """pytest's terminal reporter (or a plugin's subclass of it), which the list and the tree are written to."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not isinstance(reporter, pytest.TerminalReporter):
        raise pytest.UsageError("--medhelm-list and --medhelm-tree write to pytest's terminal: drop -p no:terminal")
    return reporter


def show_list(config: pytest.Config, run: Any) -> int:
    """Print the list (``--medhelm-list``) and/or the tree (``--medhelm-tree``); the exit status is 0."""
    from tabulate import tabulate

    reporter = _terminal(config)
    verbose = config.get_verbosity() > 0
    if not config.getoption("medhelm_list"):
        return show_tree(config, run)

    statuses: dict[str, DataStatus] = {}
    rows = benchmark_rows(run, statuses)
    reporter.write_line(_where(run.run_config.data_dir))
    text = tabulate(rows, headers=HEADER, tablefmt="simple", disable_numparse=True)
    for line in text.splitlines():
        reporter.write_line(line)

    values = list(statuses.values())
    n_yes = sum(s.available == "yes" for s in values)
    n_no = sum(s.available == "no" for s in values)
    errors = {slug: s for slug, s in statuses.items() if s.available == "error"}
    reporter.write_line("")
    reporter.write_line(f"{len(values)} benchmarks: {n_yes} with data, {n_no} without, {len(errors)} with errors"
                        + ("" if verbose or not n_no else " (-v says which files are missing)"))
    for slug, status in errors.items():
        reporter.write_line(f"{slug}: {status.detail}", red=True)
    if verbose:
        for slug, status in statuses.items():
            if status.available == "no":
                reporter.write_line(f"{slug}: {status.detail}")
    if config.getoption("medhelm_tree"):
        reporter.write_line("")
        show_tree(config, run)
    return 0


def tree_lines(run, verbose: bool = False) -> list[str]:
    """Category → subcategory → benchmarks (and tasks with ``verbose``), as text lines."""
    from pytest_medhelm.catalogue.taxonomy import CATEGORIES, subcategories_of, subcategory_named

    data_dir = run.run_config.data_dir
    benchmarks = ordered(run.registry)
    width = max([len(str(b.slug)) for b in benchmarks] + [4])
    placed: dict[tuple[str, str], list[Any]] = {}
    outside: list[Any] = []
    for bench in benchmarks:
        sub = subcategory_named(str(getattr(bench, "subcategory", "")))
        if sub is None or sub.category != getattr(bench, "category", None):
            outside.append(bench)
        else:
            placed.setdefault((sub.category, sub.slug), []).append(bench)

    def bench_line(bench: Any, indent: str) -> str:
        status = data_status(bench, data_dir, count=False)
        data = "error" if status.available == "error" else status.available
        return f"{indent}{str(bench.slug):<{width}}  {str(getattr(bench, 'access', '')):<7}  data: {data}"

    lines: list[str] = []
    for number, cat in enumerate(CATEGORIES, start=1):
        subs = subcategories_of(cat.slug)
        n_bench = sum(len(placed.get((cat.slug, s.slug), [])) for s in subs)
        n_tasks = sum(len(s.tasks) for s in subs)
        n_subs = f"{len(subs)} subcategor" + ("y" if len(subs) == 1 else "ies")
        lines.append(f"{number}. {cat.name} [{cat.slug}]: {n_subs}, {_n(n_tasks, 'task')}, "
                     f"{_n(n_bench, 'benchmark')}")
        for sub in subs:
            members = placed.get((cat.slug, sub.slug), [])
            lines.append(f"  {sub.name}: {_n(len(sub.tasks), 'task')}, {_n(len(members), 'benchmark')}")
            lines += [bench_line(bench, "    ") for bench in members] or ["    (no benchmark)"]
            if verbose:
                lines.append("    tasks:")
                lines += [f"      - {task}" for task in sub.tasks]
    if outside:
        lines.append("Outside the taxonomy (category or subcategory unknown):")
        for bench in outside:
            lines.append(bench_line(bench, "  ") + f"  ({getattr(bench, 'category', '')} / "
                         f"{getattr(bench, 'subcategory', '')})")
    return lines


def show_tree(config: pytest.Config, run: Any) -> int:
    from pytest_medhelm.catalogue.taxonomy import PAPER_TASK_COUNT, SUBCATEGORIES, task_count

    reporter = _terminal(config)
    verbose = config.get_verbosity() > 0
    reporter.write_line(_where(run.run_config.data_dir))
    for line in tree_lines(run, verbose=verbose):
        reporter.write_line(line)
    reporter.write_line("")
    reporter.write_line(f"{len(SUBCATEGORIES)} subcategories, {task_count()} tasks (the paper states "
                        f"{PAPER_TASK_COUNT}; docs/taxonomy.md), {len(run.registry)} benchmarks"
                        + ("" if verbose else "; -v lists the tasks"))
    return 0
