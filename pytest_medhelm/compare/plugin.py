"""The pytest side of saved runs and comparisons: :class:`ComparePlugin`, registered by :func:`register`.

``register(config)`` is called by the run when it starts, in the process that reports (never in an xdist worker:
:meth:`pytest_medhelm.run.roles.Role.register_reporting`). It registers the plugin (as "medhelm-compare") only
when one of ``--medhelm-save``, ``--medhelm-autosave``, ``--medhelm-compare``, ``--medhelm-compare-fail`` or
``--medhelm-power`` (or their ini keys) is set, and is idempotent: a second call returns the registered object.
The options are read through the run (``config.stash[RUN_SERVICES]``). Shards (``--medhelm-shard``) are the run's
collection's job.

Hooks:

* ``pytest_sessionstart``: loads the baseline of ``--medhelm-compare`` (or "latest" when
  only ``--medhelm-compare-fail`` is given), so that a missing or malformed baseline is a usage error (exit 4)
  before any model is called.
* ``pytest_medhelm_results`` (trylast): the comparison under ``results["comparison"]`` and the compare-fail gates
  appended to ``results["gates"]``; with ``--medhelm-power``, a ``power`` record on each gate
  (:mod:`pytest_medhelm.compare.power`).
* ``pytest_medhelm_summary_rows``: the comparison tables, and the gates' power lines, in the terminal summary and in
  the Markdown summary.
* ``pytest_sessionfinish`` (trylast, after the run wrote its files): ``--medhelm-save NAME`` /
  ``--medhelm-autosave`` store the final results under ``.medhelm/runs/``; an interrupted run is not saved (a
  partial run must not become the next "latest" baseline).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pytest_medhelm.item_api import RUN_SERVICES

PLUGIN_NAME = "medhelm-compare"
_OPTIONS = ("save", "autosave", "compare", "compare-fail", "power")


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


def register(config: pytest.Config) -> ComparePlugin | None:
    """Register :class:`ComparePlugin` once when its options are used; return it (or None when they are not)."""
    existing = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if existing is not None:
        return existing
    if not wanted(config):
        return None
    plugin = ComparePlugin(config)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


class ComparePlugin:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.baseline: dict[str, Any] | None = None
        #: the run's final results (the data the run hands to pytest_medhelm_results), to save
        self.results: dict[str, Any] | None = None
        self.saved_path: Path | None = None
        self.save_note: str | None = None
        #: --medhelm-power: the summary's lines, one per gate
        self.power_lines: list[str] = []

    @property
    def run_config(self):
        return self.config.stash[RUN_SERVICES].run_config

    @property
    def rootdir(self) -> Path:
        return Path(str(self.config.rootpath))

    # ------------------------------------------------------------------------------------------ baseline
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
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

    # ------------------------------------------------------------------------------------------ comparison
    @pytest.hookimpl(trylast=True)
    def pytest_medhelm_results(self, results: dict, config: pytest.Config) -> None:
        self.results = results
        if self.baseline is not None:
            from pytest_medhelm.compare.compare import build_comparison

            comparison, gates = build_comparison(self.baseline, results, compare_fail=self.run_config.compare_fail)
            results["comparison"] = comparison
            results["gates"].extend(gates)
        if self.run_config.power:
            from pytest_medhelm.compare.power import annotate_gates

            self.power_lines = annotate_gates(results, self.baseline) or [
                "medhelm power: no gate to plan (--medhelm-threshold, --medhelm-compare-fail)"]

    def pytest_medhelm_summary_rows(self, results: dict, config: pytest.Config,
                                    fmt: str) -> list[tuple[str, str]] | None:
        sections: list[tuple[str, str]] = []
        if "comparison" in results:
            from pytest_medhelm.compare.compare import markdown_section, terminal_sections

            sections += [("comparison", markdown_section(results))] if fmt == "markdown" else terminal_sections(results)
        if self.power_lines:
            from pytest_medhelm.compare.power import note

            if fmt == "markdown":
                body = "\n".join(["#### Power of the gates", "", *(f"- {line}" for line in self.power_lines), "",
                                   f"<sub>{note()}</sub>", ""])
                sections.append(("power", body))
            else:
                sections.append(("power of the gates", "\n".join([*self.power_lines, note()])))
        return sections or None

    # ------------------------------------------------------------------------------------------ saving
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        rc = self.run_config
        if not (rc.save or rc.autosave):
            return
        results = self.results
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
