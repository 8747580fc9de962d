"""A Ctrl-C's traceback made printable by pytest, so that an interrupted session still ends as one (exit status 2).

A signal lands between two bytecode instructions, and since CPython 3.11 some instructions have no line number
(those the compiler adds: an exception handler's entry and clean-up, a comprehension's set-up): a KeyboardInterrupt
raised there has a traceback entry whose ``tb_lineno`` is None. pytest's traceback entry subtracts 1 from it, so
rendering the interruption (the terminal reporter's ``pytest_keyboard_interrupt``) raised a TypeError: the session
that Ctrl-C stopped ended as a crash, exit status 1 and Python's traceback of that TypeError instead of pytest's
summary. (It happened on CI, the signal landing in pydantic building a model class.)

The plugin's hook (:mod:`pytest_medhelm.plugin`) calls :func:`give_every_entry_a_line` before the reporter reads
the traceback: each entry without a line number is replaced by one on the nearest line before its instruction (its
function's first line if there is none), with no instruction offset (so no column either). The chain is rebuilt
(the entries are new objects); every frame is kept, in order.
"""

from __future__ import annotations

from types import CodeType, TracebackType

import pytest


def give_every_entry_a_line(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Mend, in place, the traceback of ``excinfo`` and those of the exceptions chained to its exception.

    pytest reads the mended chain through ``excinfo.traceback``; ``excinfo.tb`` (the raw chain it was made with)
    is left as it was."""
    seen: set[int] = set()
    exc: BaseException | None = excinfo.value
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = _with_lines(excinfo.tb if exc is excinfo.value else exc.__traceback__)
        # (a suppressed context is mended too: harmless, and pytest decides whether to show it)
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    if excinfo.value.__traceback__ is not excinfo.tb:
        excinfo.traceback = pytest.ExceptionInfo.from_exception(excinfo.value).traceback


def _with_lines(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` itself when each of its entries has a line number; else the same frames, in order, each entry
    without a line number replaced."""
    entries: list[TracebackType] = []
    entry = tb
    while entry is not None:
        entries.append(entry)
        entry = entry.tb_next
    if all(each.tb_lineno is not None for each in entries):
        return tb
    mended: TracebackType | None = None
    for each in reversed(entries):
        if each.tb_lineno is None:
            line = _line_before(each.tb_frame.f_code, each.tb_lasti)
            mended = TracebackType(mended, each.tb_frame, -1, line)
        else:
            mended = TracebackType(mended, each.tb_frame, each.tb_lasti, each.tb_lineno)
    return mended


def _line_before(code: CodeType, offset: int) -> int:
    """The line of the nearest instruction at or before ``offset`` that has one; the function's first line if
    none has."""
    line = code.co_firstlineno
    for start, _end, number in code.co_lines():
        if start > offset:
            break
        if number is not None:
            line = number
    return line
