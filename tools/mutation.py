"""Mutation testing of the pure modules, each against its own unit tests (mutmut 3).

    python tools/mutation.py compare/stats          # one module
    python tools/mutation.py --all                  # every module of MODULES, one after the other
    python tools/mutation.py budget --survivors     # also print the surviving mutants' diffs

mutmut wants its configuration in ``setup.cfg`` or ``pyproject.toml`` and writes a ``mutants/`` tree beside them.
Neither belongs in the repository's normal pytest runs, so this script copies the package, the tests and
``pyproject.toml`` into a temporary directory, writes a ``setup.cfg`` with a ``[mutmut]`` section naming one module
and its tests, runs ``mutmut run`` there, and prints the module's score: killed / (mutants - "no tests" left out
of nothing: a mutant that no test reaches counts as survived). Nothing is written into the work tree (``mutants/``
is git-ignored all the same, for a hand-run mutmut). Mutation runs are CPU-heavy: run one module at a time
(``--max-children`` defaults to 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the end-to-end tests of tests/compare/test_compare.py (pytester runs), left out of the unit selections
_COMPARE_UNIT = ("not toy_regression and not autosave and not missing_baseline and not shard and not pubmedqa_200 "
                 "and not storage and not cli")

#: module (relative to pytest_medhelm/, without .py) -> the pytest arguments that select its own unit tests
MODULES: dict[str, list[str]] = {
    "budget": ["tests/test_budget.py", "-k", "not a_run_stops and not refused_before_anything"],
    "compare/stats": ["tests/compare/test_stats.py", "tests/compare/test_compare.py", "-k", _COMPARE_UNIT],
    "metrics/icd10": ["tests/metrics/test_icd10.py"],
    "metrics/exact_match": ["tests/catalogue/test_catalogue_core.py", "tests/metrics/test_exact_match.py",
                            "-k", "exact_match"],
    "metrics/medcalc": ["tests/catalogue/test_catalogue_core.py", "tests/metrics/test_medcalc.py",
                        "-k", "medcalc"],
    "report/aggregate": ["tests/report/test_aggregate.py"],
}


def _copy_tree(root: Path, workdir: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(root / "pytest_medhelm", workdir / "pytest_medhelm", ignore=ignore)
    shutil.copytree(root / "tests", workdir / "tests", ignore=ignore)
    shutil.copy2(root / "pyproject.toml", workdir / "pyproject.toml")
    shared = root.parent / "shared"
    if shared.is_dir():
        # tests find the shared data as ../shared/data from the root; mutmut runs them from root/mutants
        for place in (workdir.parent / "shared", workdir / "shared"):
            if not place.exists():
                os.symlink(shared, place)


def _setup_cfg(module: str, selection: list[str]) -> str:
    lines = ["[mutmut]", "source_paths = pytest_medhelm", f"only_mutate = pytest_medhelm/{module}.py",
             "pytest_add_cli_args =", "    -p", "    no:randomly", "    -p", "    no:xdist", "    -q",
             "pytest_add_cli_args_test_selection ="]
    lines += [f"    {arg}" for arg in selection]
    return "\n".join(lines) + "\n"


def run(module: str, max_children: int, survivors: bool, root: Path = ROOT,
        selection: list[str] | None = None) -> dict[str, int]:
    if module not in MODULES:
        raise SystemExit(f"unknown module {module!r}; one of: {', '.join(MODULES)}")
    base = Path(tempfile.mkdtemp(prefix="medhelm-mutation-"))
    workdir = base / "root"
    workdir.mkdir()
    try:
        _copy_tree(root, workdir)
        (workdir / "setup.cfg").write_text(_setup_cfg(module, selection or MODULES[module]), encoding="utf-8")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # mutmut puts its mutants/ tree first on sys.path
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)], cwd=workdir,
                       env=env, check=False, stdout=subprocess.DEVNULL if not os.environ.get("MUTATION_VERBOSE")
                       else None)
        subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=workdir, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        counts = json.loads((workdir / "mutants" / "mutmut-cicd-stats.json").read_text(encoding="utf-8"))
        if survivors:
            listing = subprocess.run([sys.executable, "-m", "mutmut", "results"], cwd=workdir, env=env,
                                     capture_output=True, text=True, check=True).stdout
            for line in listing.splitlines():
                name = line.split(":")[0].strip()
                if name:
                    shown = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=workdir, env=env,
                                           capture_output=True, text=True).stdout
                    print(f"--- {line.strip()}\n{shown}")
        return counts
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of: {', '.join(MODULES)}")
    parser.add_argument("--all", action="store_true", help="every module, one after the other")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--survivors", action="store_true", help="print the surviving mutants")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to copy (default: this checkout)")
    parser.add_argument("--tests", nargs=argparse.REMAINDER,
                        help="pytest arguments selecting the tests, in place of the module's own (last option)")
    args = parser.parse_args(argv)
    modules = list(MODULES) if args.all else args.modules
    if not modules:
        parser.error("name a module or give --all")
    for module in modules:
        counts = run(module, args.max_children, args.survivors, args.root, args.tests)
        total = counts.get("total", 0)
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        score = 100.0 * killed / total if total else 0.0
        print(f"{module}: {score:.1f}% killed ({killed} of {total}; "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("total",)) + ")", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
