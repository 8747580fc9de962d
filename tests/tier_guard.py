"""The guard of the e2e tier: which collected tests start a new interpreter or an inner xdist run without carrying
the ``e2e`` marker. Read from the tests' code (and their parameters): a pytest plugin (``-p tier_guard``) that
writes what it finds to the file named by ``MEDHELM_TIER_GUARD_OUT`` at the end of collection; tests/test_tiers.py
runs it over the whole suite."""

from __future__ import annotations

import dis
import functools
import json
import os
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

#: names whose call starts a new interpreter: pytester.runpytest_subprocess, pytester.popen, subprocess.Popen
NEW_INTERPRETER_NAMES = frozenset({"runpytest_subprocess", "popen", "Popen"})
#: the environment variable naming the file the plugin writes its findings to (JSON: a list of lines)
OUT_VARIABLE = "MEDHELM_TIER_GUARD_OUT"


class Collected(Protocol):
    """What the guard reads of a collected test (a pytest.Item; a planted stand-in in tests/test_tiers.py)."""

    @property
    def nodeid(self) -> str: ...

    def get_closest_marker(self, name: str) -> Any: ...


def _constants(value: Any) -> Iterator[Any]:
    """``value`` and, recursively, what its tuples, lists, sets and frozensets hold (CPython folds a list literal of
    constants, ``["-n", "2", "-p", "x"]``, into one tuple constant; a parameter may be a tuple of lists)."""
    yield value
    if isinstance(value, tuple | list | set | frozenset):
        for element in value:
            yield from _constants(element)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code of every function, lambda and comprehension defined in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def keyword_names(code: types.CodeType, instructions: list[dis.Instruction], index: int) -> tuple[str, ...]:
    """The keyword names of the call whose names ``instructions[index]`` loads, else ``()``: KW_NAMES (3.11, 3.12)
    holds the index of their tuple constant, a LOAD_CONST before CALL_KW (3.13), CALL_FUNCTION_KW or
    BUILD_CONST_KEY_MAP (a call with *args) the tuple."""
    instruction = instructions[index]
    if instruction.opname == "KW_NAMES":
        names = code.co_consts[instruction.arg or 0]
    elif (instruction.opname == "LOAD_CONST" and index + 1 < len(instructions)
          and instructions[index + 1].opname in ("CALL_KW", "CALL_FUNCTION_KW", "BUILD_CONST_KEY_MAP")):
        names = instruction.argval
    else:
        return ()
    return names if isinstance(names, tuple) else ()


def _passes_subprocess_true(code: types.CodeType) -> bool:
    """A call with ``subprocess=`` not known to be false (pytester_runs.run(..., subprocess=True)): the value
    pushed for that keyword is read when it is a constant; anything else (a variable) counts as true."""
    instructions = list(dis.get_instructions(code))
    for index in range(len(instructions)):
        names = keyword_names(code, instructions, index)
        if "subprocess" not in names:
            continue
        pushed = index - (len(names) - names.index("subprocess"))  # (one instruction per keyword value assumed)
        value = instructions[pushed] if pushed >= 0 else None
        if not _is_false(value):
            return True
    for index, instruction in enumerate(instructions[:-2]):  # a call with *args: {"subprocess": value} (BUILD_MAP)
        after = instructions[index + 2]
        if (instruction.opname == "LOAD_CONST" and instruction.argval == "subprocess"
                and (after.opname == "BUILD_MAP" or (after.opname == "LOAD_CONST" and isinstance(after.argval, str)))
                and not _is_false(instructions[index + 1])):
            return True
    return False


def _is_false(value: dis.Instruction | None) -> bool:
    return value is not None and value.opname == "LOAD_CONST" and value.argval in (False, None, 0)


@functools.cache  # (read once per function: a parametrized test's variants share its code, and decoding is slow)
def code_reasons(code: types.CodeType) -> list[str]:
    """Why the test whose function has ``code`` is end-to-end (empty when nothing in it says so)."""
    reasons = set()
    for inner in _codes(code):
        for name in NEW_INTERPRETER_NAMES.intersection(inner.co_names):
            reasons.add(f"calls {name}")
        if any(const == "-n" for top in inner.co_consts for const in _constants(top)):
            reasons.add('passes "-n" (an inner xdist run)')
        if _passes_subprocess_true(inner):
            reasons.add("runs with subprocess=True")
    return sorted(reasons)


def param_reasons(item: Collected) -> list[str]:
    """Why the parameters of ``item`` make it end-to-end: a ``"-n"`` among them, or a flag named ``xdist``."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return []
    reasons = []
    if any(const == "-n" for value in callspec.params.values() for const in _constants(value)):
        reasons.append('a parameter holds "-n" (an inner xdist run)')
    if callspec.params.get("xdist") is True:
        reasons.append("its parameter xdist is True")
    return reasons


def reasons(item: Collected) -> list[str]:
    function = getattr(item, "function", None)
    found = code_reasons(function.__code__) if function is not None else []
    return found + param_reasons(item)


def unmarked(items: Sequence[Collected]) -> list[str]:
    """``nodeid: reasons`` of every item that starts a new interpreter or an inner xdist run without the e2e
    marker."""
    return [f"{item.nodeid}: {', '.join(found)}" for item in items
            if item.get_closest_marker("e2e") is None and (found := reasons(item))]


@pytest.hookimpl(trylast=True)  # after tests/conftest.py has marked the folder's and the browser's tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    out = os.environ.get(OUT_VARIABLE)
    if out:
        Path(out).write_text(json.dumps(unmarked(items)), encoding="utf-8")
