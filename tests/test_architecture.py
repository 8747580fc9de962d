"""The package's layering is a checked contract (import-linter, configured in pyproject.toml): a module imports
only from the layers below its own, and no package has import cycles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path, cwd: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.fail(f"import-linter is a test dependency (pip install -e '.[test]'): {LINT} is missing")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--config", str(cwd / "pyproject.toml"), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_layers_and_the_no_cycle_contracts_hold():
    result = lint(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_a_module_that_reaches_back_up_breaks_the_contract(tmp_path):
    """The check bites: the value types (the leaf) importing the run is reported, by name."""
    shutil.copytree(ROOT / "pytest_medhelm", tmp_path / "pytest_medhelm",
                    ignore=shutil.ignore_patterns("__pycache__", "suite"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    values = tmp_path / "pytest_medhelm" / "values.py"
    values.write_text(values.read_text() + "\nfrom pytest_medhelm.run import context  # noqa: E402\n")
    result = lint(tmp_path, tmp_path)
    assert result.returncode != 0
    assert "pytest_medhelm.values is not allowed to import pytest_medhelm.run" in result.stdout, result.stdout


def test_the_run_is_reached_one_way():
    """No module global for the running session and no plugin lookup of it: the run is found through
    config.stash (pytest_medhelm.item_api.RUN_SERVICES)."""
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "pytest_medhelm").rglob("*.py")
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if 'get_plugin("medhelm-session")' in line or "_ACTIVE" in line]
    assert offenders == []
    assert not (ROOT / "pytest_medhelm" / "session.py").exists()
