"""The pytest side of saved runs, comparisons and shards: :class:`ComparePlugin`, registered by :func:`register`.

``register(config)`` is called from the plugin's ``pytest_configure`` (after the session object
"medhelm-session" is registered). It registers the plugin (as "medhelm-compare") only when one of
``--medhelm-save``, ``--medhelm-autosave``, ``--medhelm-compare``, ``--medhelm-compare-fail`` or
``--medhelm-shard`` (or their ini keys) is set, and is idempotent: a second call returns the registered object.
The options are read lazily through ``config.pluginmanager.get_plugin("medhelm-session").run_config``.

Hooks:

* ``pytest_sessionstart`` (not in xdist workers): loads the baseline of ``--medhelm-compare`` (or "latest" when
  only ``--medhelm-compare-fail`` is given), so that a missing or malformed baseline is a usage error (exit 4)
  before any model is called.
* ``pytest_collection_modifyitems`` (in every process that collects, so in each xdist worker): keeps the
  ``--medhelm-shard I/N`` slice of the medhelm items. An item belongs to shard ``int(sha256(key), 16) % N + 1``,
  where ``key`` is its node id without the file path (``test_pubmedqa[gpt-4o-mini-21645374]``: test name, model
  label and instance id). The verdict depends on the item alone, so it is the same on every machine and in every
  xdist worker, whatever the collection order, the rootdir, or ``-k``/``-m`` selections; the N shards are disjoint
  and together hold every item (sizes are balanced in expectation, not exactly). Items that are not medhelm items
  run in every shard. The rest is deselected through ``pytest_deselected``.
* ``pytest_medhelm_results`` (trylast): the comparison under ``results["comparison"]`` and the compare-fail gates
  appended to ``results["gates"]``.
* ``pytest_medhelm_summary_rows``: the comparison tables in the terminal summary.
* ``pytest_sessionfinish`` (trylast, after the session wrote its files): ``--medhelm-save NAME`` /
  ``--medhelm-autosave`` store the final results under ``.medhelm/runs/``; an interrupted run is not saved (a
  partial run must not become the next "latest" baseline).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

import pytest

PLUGIN_NAME = "medhelm-compare"
_OPTIONS = ("save", "autosave", "compare", "compare-fail", "shard")


def wanted(config: pytest.Config) -> bool:
    """Is any of the saved-run, comparison or shard options set (command line or ini)? Cheap: no pydantic."""
    from pytest_medhelm.options import OPTIONS, raw_value

    for opt in OPTIONS:
        if opt.name not in _OPTIONS:
            continue
        try:
            value = raw_value(config, opt)
        except argparse.ArgumentTypeError:
            return True  # a bad ini value: the session's validation reports it
        if value not in (None, [], False, ""):
            return True
    return False


def register(config: pytest.Config) -> "ComparePlugin | None":
    """Register :class:`ComparePlugin` once when its options are used; return it (or None when they are not)."""
    existing = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if existing is not None:
        return existing
    if not wanted(config):
        return None
    plugin = ComparePlugin(config)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


def shard_key(item: pytest.Item) -> str:
    nodeid = item.nodeid
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def shard_of(key: str, count: int) -> int:
    """The 1-based shard of ``key`` among ``count``: ``int(sha256(key), 16) % count + 1``."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % count + 1


class ComparePlugin:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = getattr(config, "workerinput", None) is not None
        self.baseline: dict[str, Any] | None = None
        self.saved_path: Path | None = None
        self.save_note: str | None = None

    @property
    def run_config(self):
        session = self.config.pluginmanager.get_plugin("medhelm-session")
        return session.run_config

    @property
    def rootdir(self) -> Path:
        return Path(str(self.config.rootpath))

    # ------------------------------------------------------------------------------------------ baseline
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        rc = self.run_config
        target = rc.compare or ("latest" if rc.compare_fail else None)
        if target is None:
            return
        from pytest_medhelm.compare.storage import StorageError, load

        try:
            self.baseline = load(target, self.rootdir)
        except StorageError as exc:
            hint = ""
            if Path(target).is_dir():
                hint = (" (--medhelm-compare took the test path as its value: write --medhelm-compare=NAME, or put "
                        "--medhelm-compare after the test paths)")
            option = "--medhelm-compare" if rc.compare else "--medhelm-compare-fail (compares with the latest run)"
            raise pytest.UsageError(f"pytest-medhelm: {option}: {exc}{hint}") from None

    # ------------------------------------------------------------------------------------------ shards
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        shard = self.run_config.shard
        if not shard:
            return
        index, count = shard
        keep, drop = [], []
        for item in items:
            callspec = getattr(item, "callspec", None)
            is_medhelm = callspec is not None and "medhelm_case" in callspec.params
            if is_medhelm and shard_of(shard_key(item), count) != index:
                drop.append(item)
            else:
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_report_header(self, config: pytest.Config) -> str | None:
        shard = self.run_config.shard
        if shard:
            return f"medhelm shard: {shard[0]}/{shard[1]} (sha256 of each item's test id, modulo {shard[1]})"
        return None

    # ------------------------------------------------------------------------------------------ comparison
    @pytest.hookimpl(trylast=True)
    def pytest_medhelm_results(self, results: dict, config: pytest.Config) -> None:
        if self.baseline is None:
            return
        from pytest_medhelm.compare.compare import build_comparison

        comparison, gates = build_comparison(self.baseline, results, compare_fail=self.run_config.compare_fail)
        results["comparison"] = comparison
        results["gates"].extend(gates)

    def pytest_medhelm_summary_rows(self, results: dict, config: pytest.Config) -> list[tuple[str, str]] | None:
        if "comparison" not in results:
            return None
        from pytest_medhelm.compare.compare import terminal_sections

        return terminal_sections(results)

    # ------------------------------------------------------------------------------------------ saving
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            return
        rc = self.run_config
        if not (rc.save or rc.autosave):
            return
        medhelm = self.config.pluginmanager.get_plugin("medhelm-session")
        results = getattr(medhelm, "results", None)
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            self.save_note = f"run not saved: the session ended with {pytest.ExitCode(exitstatus).name}"
            return
        if results is None:
            self.save_note = "run not saved: no medhelm item was scored"
            return
        from pytest_medhelm.compare.storage import save

        self.saved_path = save(results, rc.save or "autosave", self.rootdir)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.saved_path is not None:
            try:
                shown = self.saved_path.relative_to(Path.cwd())
            except ValueError:
                shown = self.saved_path
            terminalreporter.write_line(f"medhelm: run saved as {shown}")
        elif self.save_note:
            terminalreporter.write_line(f"medhelm: {self.save_note}", yellow=True)
