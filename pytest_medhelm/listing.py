"""``pytest --medhelm-list``: one row per benchmark, then exit (like ``--markers``)."""

from __future__ import annotations

import pytest


def benchmark_rows(session) -> list[list[str]]:
    from pytest_medhelm.catalogue.taxonomy import CATEGORY_BY_SLUG
    from pytest_medhelm.data.errors import DataError, DataMissing
    from pytest_medhelm.data.sources import resolve_files

    rc = session.run_config
    rows = []
    for bench in session.registry:
        try:
            files = resolve_files(bench, rc.data_dir, download=False)
            count = str(len(bench.build_instances(files)))
            available = "yes"
        except DataMissing:
            available, count = "no", "-"
        except DataError as exc:
            available, count = f"error: {exc}", "-"
        category = CATEGORY_BY_SLUG.get(bench.category)
        rows.append([bench.slug, bench.name, category.name if category else bench.category, bench.subcategory,
                     bench.access, bench.kind, bench.metric.name, available, count])
    return rows


def show_list(config: pytest.Config) -> int:
    from tabulate import tabulate

    session = config.pluginmanager.get_plugin("medhelm-session")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    header = ["slug", "name", "category", "subcategory", "access", "kind", "metric", "data", "instances"]
    text = tabulate(benchmark_rows(session), headers=header, tablefmt="simple", disable_numparse=True)
    for line in text.splitlines():
        reporter.write_line(line)
    return 0
