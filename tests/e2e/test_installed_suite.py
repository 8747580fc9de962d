"""The suite ships with the package: built into a wheel, installed outside the checkout, run with
``pytest --pyargs pytest_medhelm.suite`` from a user's own directory against our test server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_medhelm.catalogue import builtin_benchmarks

ROOT = Path(__file__).resolve().parents[2]
#: what a source distribution holds: enough to build the wheel (the tests and examples are not shipped)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "pytest_medhelm", "benchmarks")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project built into a wheel (offline, no build isolation) and unpacked as an installed package."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(work / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (work / "dist").glob("pytest_medhelm-*.whl")
    site = work / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)  # what `pip install --no-deps` puts in site-packages
    return site


def user_env(site: Path) -> dict[str, str]:
    """The environment of a user who installed the wheel: its directory on the path, not our checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE"))}
    env["PYTHONPATH"] = str(site)
    return env


#: pytest as a user's environment runs it, except that an editable install of this project in the environment
#: running the tests (its import finder, from a .pth file) may not fill in a module the wheel lacks
PYTEST = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
          "if not getattr(f, '__module__', '').startswith('__editable__')]; "
          "import pytest; sys.exit(pytest.main(sys.argv[1:]))")


def run_user(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PYTEST, "-p", "no:cacheprovider", "-p", "no:randomly", *args],
                          cwd=cwd, env=user_env(site), capture_output=True, text=True, timeout=300)


@pytest.fixture
def user_project(tmp_path) -> Path:
    """A user's repository: no benchmarks/ folder, its own pyproject.toml, synthetic PubMedQA data."""
    project = tmp_path / "my-finetune"
    (project / "medhelm-data" / "pubmedqa").mkdir(parents=True)
    rows = {str(pmid): {"QUESTION": f"Does treatment {pmid} help?", "LABELS": ["BACKGROUND"],
                        "CONTEXTS": [f"Synthetic abstract {pmid}."], "final_decision": decision, "YEAR": "2020"}
            for pmid, decision in ((101, "yes"), (102, "no"), (103, "yes"))}
    (project / "medhelm-data" / "pubmedqa" / "ori_pqal.json").write_text(json.dumps(rows))
    # (synthetic data is not the pinned file: the user accepts this version, as the option says)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmedhelm_thresholds = ["pubmedqa>=0.6"]\n'
                                            'medhelm_data_unverified = ["pubmedqa"]\n')
    return project


def test_the_wheel_holds_every_module_of_the_package(installed):
    shipped = sorted(p.relative_to(installed).as_posix() for p in (installed / "pytest_medhelm").rglob("*.py")
                     if "suite" not in p.relative_to(installed / "pytest_medhelm").parts)
    ours = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pytest_medhelm").rglob("*.py"))
    assert shipped == ours


def test_the_wheel_ships_the_results_schema(installed):
    """The results JSON's schema is package data (pyproject.toml's [tool.setuptools.package-data])."""
    shipped = installed / "pytest_medhelm" / "report" / "results.schema.json"
    assert shipped.is_file(), "the wheel lacks pytest_medhelm/report/results.schema.json"
    assert shipped.read_bytes() == (ROOT / "pytest_medhelm" / "report" / "results.schema.json").read_bytes()


def test_the_wheel_holds_the_suite_once(installed):
    suite = installed / "pytest_medhelm" / "suite"
    modules = sorted(p.relative_to(suite).as_posix() for p in suite.rglob("test_*.py"))
    checkout = sorted(p.relative_to(ROOT / "benchmarks").as_posix() for p in (ROOT / "benchmarks").rglob("test_*.py"))
    assert modules == checkout and len(modules) == len(builtin_benchmarks())
    assert (suite / "conftest.py").is_file()
    assert not (installed / "benchmarks").exists()  # shipped under the package, not as a top-level "benchmarks"


def test_the_installed_suite_runs_from_a_users_directory(installed, user_project, server):
    where = subprocess.run([sys.executable, "-c", PYTEST.split("import pytest;")[0]
                            + "import pytest_medhelm.suite as s; print(s.__file__)"],
                           cwd=user_project, env=user_env(installed), capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(installed), where.stdout + where.stderr  # not our checkout

    collected = run_user(installed, user_project, "--pyargs", "pytest_medhelm.suite", "--collect-only", "-q")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    tests = {line.split("::")[1].split("[")[0] for line in collected.stdout.splitlines() if "::" in line}
    # every module of the suite, each test once (no model: a skip), but for a benchmark that measures the grader
    # (healthbench_meta): it is collected only when --medhelm-benchmark names it
    named_only = {b.slug for b in builtin_benchmarks() if getattr(b.metric, "measures_grader", False)}
    assert named_only == {"healthbench_meta"}
    assert tests == {f"test_{b.slug}" for b in builtin_benchmarks() if b.slug not in named_only}

    out, page = user_project / "results.json", user_project / "report.html"
    result = run_user(installed, user_project, "--pyargs", "pytest_medhelm.suite", "--medhelm-model", "openai/m",
                      "--medhelm-api-base", server.url, "--medhelm-data-dir", "medhelm-data",
                      "--medhelm-benchmark", "pubmedqa", "--medhelm-json", str(out), "--medhelm-html", str(page))
    assert result.returncode == 0, result.stdout + result.stderr  # the ini gate pubmedqa>=0.6 holds
    # the HTML report renders from the installed wheel's templates, style sheet and script
    text = page.read_text(encoding="utf-8")
    script = (ROOT / HTML / "static" / "report.js").read_text(encoding="utf-8")
    assert f"<script>{script}</script>" in text and 'id="heatmap-chart"' in text and "pubmedqa" in text
    assert f"{len(builtin_benchmarks()) - 1} deselected" in result.stdout
    assert "medhelm gates: all 1 passed" in result.stdout
    assert server.count == 3  # the server always answers A ("yes"): two of three right
    [bench] = json.loads(out.read_text())["benchmarks"]
    assert (bench["slug"], bench["n"], round(bench["mean"], 4)) == ("pubmedqa", 3, 0.6667)

    # one category of the installed suite, under xdist, asking the server again (no cache)
    dist = run_user(installed, user_project, "--pyargs", "pytest_medhelm.suite.medical_research", "-n", "2",
                    "--medhelm-model", "openai/m", "--medhelm-api-base", server.url, "--medhelm-data-dir",
                    "medhelm-data", "--medhelm-benchmark", "pubmedqa", "--medhelm-cache", "off")
    assert dist.returncode == 0, dist.stdout + dist.stderr
    assert "2 passed, 1 missed" in dist.stdout and server.count == 6


#: the HTML report's folder in the package
HTML = Path("pytest_medhelm") / "report" / "html"


def test_the_wheel_ships_the_html_reports_templates_style_sheet_and_script(installed):
    """The report's templates, style sheet and script are package files: the wheel has them (the run of
    test_the_installed_suite_runs_from_a_users_directory renders its report from them)."""

    def assets(root: Path) -> list[str]:
        return sorted(p.relative_to(root / HTML).as_posix() for p in (root / HTML).rglob("*")
                      if p.is_file() and p.suffix not in (".py", ".pyc"))

    assert assets(installed) == assets(ROOT) and {"static/report.js", "static/report.css"} <= set(assets(ROOT))
