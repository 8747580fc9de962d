"""The package's layering is a checked contract (import-linter, configured in pyproject.toml): a module imports
only from the layers below its own, and no package has import cycles. So are its style and types (ruff and mypy,
configured there too), and every silenced finding says why."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tokenize
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


# ------------------------------------------------------------------------------------------------ style and types
# ruff and mypy with the configuration in pyproject.toml ([tool.ruff], [tool.mypy]), from this interpreter: a test
# dependency (the [test] extra); skipped only where the tool is not installed.


def run_tool(tool: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed here (a test dependency: pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing():
    result = run_tool("ruff", ["check", "--no-cache", "--output-format", "concise", "."], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e  # (a whole type check in a new interpreter: 1-2 minutes on a fresh clone, seconds once cached)
def test_mypy_finds_nothing():
    # (its cache, .mypy_cache/ beside pyproject.toml as for a developer's own run, makes the next run seconds)
    result = run_tool("mypy", [], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


def planted_project(tmp_path: Path, source: str) -> Path:
    """A copy of the configuration with one module of ``source`` in a package of the configured name."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "pytest_medhelm").mkdir()
    (tmp_path / "pytest_medhelm" / "__init__.py").write_text(source)
    return tmp_path


def test_ruff_reports_what_is_planted(tmp_path):
    """The check bites, with the project's rules: an unused import, an unexplained blind except, a stale noqa,
    imports out of order, too many blank lines."""
    source = ("import sys\nimport os\n\n\ndef read():\n    try:\n        return sys.argv\n    except Exception:\n"
              "        return 2\n\n\n\ncount = 1  # noqa: E501 - nothing long here\n")
    result = run_tool("ruff", ["check", "--no-cache", "--output-format", "concise", "."],
                      planted_project(tmp_path, source))
    assert result.returncode == 1, result.stdout + result.stderr
    # (ruff names a rule by its code, or, with preview rules on, by its name: either is the rule)
    for code, name in (("F401", "unused-import"), ("BLE001", "blind-except"), ("RUF100", "unused-noqa"),
                       ("I001", "unsorted-imports"), ("E303", "too-many-blank-lines")):
        assert f" {code} " in result.stdout or f" {name}: " in result.stdout, (code, result.stdout)


@pytest.mark.e2e  # (a new interpreter, with no cache: it checks what the planted module imports from scratch)
def test_mypy_reports_what_is_planted(tmp_path):
    """The check bites, with the project's settings: a wrong type, an unused ignore, an untyped function's body."""
    source = ('count: int = "three"\nsize: int = 1  # type: ignore[assignment]  # stale\n\n\n'
              'def untyped():\n    return 1 + "a"\n')
    result = run_tool("mypy", [], planted_project(tmp_path, source))
    assert result.returncode == 1, result.stdout + result.stderr
    for expected in ("__init__.py:1: error: Incompatible types in assignment",
                     '__init__.py:2: error: Unused "type: ignore"', "__init__.py:6: error: Unsupported operand types"):
        assert expected in result.stdout, result.stdout


# a pragma names its codes, then says why in words after them: `noqa: BLE001 - why`, `type: ignore[code]  # why`
NOQA = re.compile(r"#\s*noqa\b(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<rest>.*)", re.IGNORECASE)
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<codes>\[[a-z0-9_, -]+\])?(?P<rest>.*)")


def unexplained_pragmas(path: Path) -> list[tuple[int, str]]:
    """(line, comment) of each ``# noqa`` and ``# type: ignore`` of a Python file without codes or without a reason
    (comments only: a string that holds one is not a pragma)."""
    found = []
    with tokenize.open(path) as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type != tokenize.COMMENT:
                continue
            for pattern in (NOQA, TYPE_IGNORE):
                match = pattern.search(token.string)
                if match and (not match["codes"] or not re.search(r"[A-Za-z]", match["rest"])):
                    found.append((token.start[0], token.string))
    return found


def test_every_noqa_and_type_ignore_names_its_codes_and_says_why():
    files = sorted(path for folder in ("pytest_medhelm", "tests", "benchmarks", "examples", "tools")
                   for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts)
    assert len(files) > 100
    offenders = [f"{path.relative_to(ROOT)}:{line}: {comment}"
                 for path in files for line, comment in unexplained_pragmas(path)]
    assert offenders == [], "\n".join(offenders)


def test_an_unexplained_pragma_is_reported(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os  # noqa: F401\nimport re  # noqa\nx: int = 'a'  # type: ignore\n"
                       "y: int = 'b'  # type: ignore[assignment]  # the reason\n"
                       "z = '# noqa'  # a string is no pragma\n"
                       "import sys  # noqa: F401 - the reason\n")
    assert [line for line, _comment in unexplained_pragmas(planted)] == [1, 2, 3]


#: the issue's "Done when": no module of the plugin longer than this, outside the benchmark definitions (catalogue/)
MAX_MODULE_LINES = 500


def long_modules(package: Path) -> list[str]:
    """``path: lines`` of every module of ``package`` over MAX_MODULE_LINES lines, its catalogue/ left out."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] == "catalogue" or "__pycache__" in relative.parts:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(package.parent)}: {lines} lines")
    return found


def test_no_module_is_over_500_lines_outside_the_catalogue():
    assert len(list((ROOT / "pytest_medhelm").rglob("*.py"))) > 50
    offenders = long_modules(ROOT / "pytest_medhelm")
    assert offenders == [], "\n".join(offenders)


def test_a_long_module_is_named_with_its_count(tmp_path):
    package = tmp_path / "pytest_medhelm"
    (package / "catalogue").mkdir(parents=True)
    (package / "run").mkdir()
    (package / "run" / "long.py").write_text("x = 1\n" * 501)
    (package / "run" / "fits.py").write_text("x = 1\n" * 500)
    (package / "catalogue" / "definitions.py").write_text("x = 1\n" * 900)
    assert long_modules(package) == ["pytest_medhelm/run/long.py: 501 lines"]
