"""The e2e tier holds every test that starts a new interpreter or an inner xdist run: such a test carries
``@pytest.mark.e2e`` by hand (or its parameter does), and this guard fails naming each one that does not, so that
``pytest -m "not e2e"`` stays the tier a developer runs in a minute (tests/tier_guard.py reads the tests' code)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tier_guard import OUT_VARIABLE, code_reasons, param_reasons, unmarked

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


@pytest.mark.e2e  # it starts a new interpreter (a collection of the whole suite), as the tests it guards do
def test_every_test_that_starts_an_interpreter_or_inner_xdist_is_marked_e2e(tmp_path):
    out = tmp_path / "unmarked.json"
    env = {**os.environ, OUT_VARIABLE: str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")]))}
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tier_guard", "-p", "no:cacheprovider",
         "-p", "no:randomly", str(TESTS)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    count = re.search(r"(\d+) tests? collected", collected.stdout)
    assert count is not None and int(count[1]) > 1000, collected.stdout[-3000:]  # (the whole suite was read)
    offenders = json.loads(out.read_text(encoding="utf-8"))
    assert offenders == [], ("not marked e2e, yet they start a new interpreter or an inner xdist run "
                             "(add @pytest.mark.e2e, or pytest.param(..., marks=pytest.mark.e2e)):\n"
                             + "\n".join(offenders))


# ---------------------------------------------------------------- what the guard reads, on planted tests
def run(*args, subprocess=False):
    return args, subprocess


def folded_list(pytester):
    return run(pytester, *["-n", "2", "-p", "no:cacheprovider"])  # (one tuple constant in the bytecode)


def nested(pytester):
    return [run(pytester, *mode) for mode in (["-p", "x"], ["-n", "2"])]


def in_a_new_interpreter(pytester):
    return pytester.runpytest_subprocess("-q")


def through_popen(pytester):
    return pytester.popen([sys.executable, "-m", "pytest"])


def subprocess_true(pytester):
    return run(pytester, "-q", subprocess=True)


def subprocess_true_with_star_args(pytester, mode):
    return run(pytester, *mode, subprocess=True)


def subprocess_from_a_variable(pytester, flag):
    return run(pytester, "-q", subprocess=flag)


def subprocess_false(pytester):
    return run(pytester, "-q", subprocess=False), run(pytester, "-p", "x", subprocess=False)


def in_process(pytester):
    return pytester.runpytest("-p", "no:xdist"), subprocess  # (the module subprocess named is no run)


@pytest.mark.parametrize("function, expected", [
    (folded_list, ['passes "-n" (an inner xdist run)']),
    (nested, ['passes "-n" (an inner xdist run)']),
    (in_a_new_interpreter, ["calls runpytest_subprocess"]),
    (through_popen, ["calls popen"]),
    (subprocess_true, ["runs with subprocess=True"]),
    (subprocess_true_with_star_args, ["runs with subprocess=True"]),
    (subprocess_from_a_variable, ["runs with subprocess=True"]),
    (subprocess_false, []),
    (in_process, []),
])
def test_the_guard_reads_what_a_test_starts(function, expected):
    assert code_reasons(function.__code__) == expected


#: a parameter of an inner xdist run, beside an argument the test passes on (kept out of the test's own code)
XDIST_PAIR: dict[str, Any] = {"xdist": (["-n", "2"], {})}


class Planted:
    """An item as the guard sees it: its function, its parameters, its markers."""

    def __init__(self, function, params=None, e2e=False):
        self.nodeid = f"tests/test_planted.py::{function.__name__}"
        self.function = function
        if params is not None:
            self.callspec = type("CallSpec", (), {"params": params})()
        self._e2e = e2e

    def get_closest_marker(self, name):
        return pytest.mark.e2e.mark if name == "e2e" and self._e2e else None


def test_a_parametrized_variant_is_read_from_its_parameters_and_its_code():
    serial = Planted(subprocess_true_with_star_args, params={"mode": ["-p", "no:xdist"]})
    xdist = Planted(subprocess_false, params=XDIST_PAIR)
    assert param_reasons(serial) == [] and param_reasons(xdist) == ['a parameter holds "-n" (an inner xdist run)']
    assert unmarked([serial, xdist, Planted(in_process), Planted(in_a_new_interpreter, e2e=True)]) == [
        "tests/test_planted.py::subprocess_true_with_star_args: runs with subprocess=True",
        'tests/test_planted.py::subprocess_false: a parameter holds "-n" (an inner xdist run)']


# ------------------------------------------------------------------ property tests keep to the fast tier's share
def _called(node: ast.expr, name: str) -> bool:
    """``node`` is a call of ``name`` (``fuzz(...)``, ``given(...)``, ``hypothesis.given(...)``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


def property_tests_without_fuzz(source: str) -> list[str]:
    """The functions of ``source`` decorated with ``@given`` but not with ``@fuzz(n)`` (or a module-level name bound
    to ``fuzz(n)``), by the line of their ``def``, and every ``settings(max_examples=...)`` in it: a property test
    counted so tries its whole count in the fast tier too (tests/fuzzing.py)."""
    tree = ast.parse(source)
    fuzz_names = {target.id for node in tree.body if isinstance(node, ast.Assign) and _called(node.value, "fuzz")
                  for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _called(d, "given") for d in node.decorator_list):
            if not any(_called(d, "fuzz") or (isinstance(d, ast.Name) and d.id in fuzz_names)
                       for d in node.decorator_list):
                found.append(f"{node.lineno}: {node.name} has @given without @fuzz(n)")
        elif isinstance(node, ast.Call) and _called(node, "settings") and any(k.arg == "max_examples"
                                                                              for k in node.keywords):
            found.append(f"{node.lineno}: settings(max_examples=...)")
    return found


def test_every_property_test_takes_its_count_from_fuzzing():
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(TESTS.rglob("*.py")) if path.name != "fuzzing.py"
                 for line in property_tests_without_fuzz(path.read_text(encoding="utf-8"))]
    assert offenders == [], "count a property test's inputs with fuzzing.fuzz(n):\n" + "\n".join(offenders)


@pytest.mark.parametrize(("source", "expected"), [
    ("@given(st.integers())\ndef test_a(x): pass", ["2: test_a has @given without @fuzz(n)"]),
    ("@settings(deadline=None)\n@given(st.integers())\ndef test_a(x): pass", ["3: test_a has @given without @fuzz(n)"]),
    ("@fuzz(300)\n@given(st.integers())\ndef test_a(x): pass", []),
    ("FUZZ = fuzz(300, database=None)\n@FUZZ\n@given(st.integers())\ndef test_a(x): pass", []),
    ("def test_a():\n    @fuzz(60)\n    @hypothesis.given(st.integers())\n    def inner(x): pass", []),
    ("def test_a():\n    @settings(max_examples=60)\n    @given(st.integers())\n    def inner(x): pass",
     ["2: settings(max_examples=...)", "4: inner has @given without @fuzz(n)"]),
    ("# settings(max_examples=5) in a comment\nTEXT = 'max_examples=5'", []),
])
def test_the_property_guard_reads_decorators_not_text(source, expected):
    assert sorted(property_tests_without_fuzz(source)) == sorted(expected)
