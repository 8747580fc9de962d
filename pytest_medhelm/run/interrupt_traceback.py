"""A Ctrl-C's traceback made printable by pytest, so that an interrupted run still ends as one (exit status 2).

A signal lands between two bytecode instructions, and on CPython 3.11 some instructions have no line number (those
the compiler adds: a class body's or a comprehension's set-up, an exception handler's clean-up): a
KeyboardInterrupt raised there has a traceback entry whose ``tb_lineno`` is None. pytest's terminal reporter,
rendering the interruption (``pytest_keyboard_interrupt``), subtracts 1 from it and fails with a TypeError, so the
run that was stopped by Ctrl-C ended as a crash (exit status 1, pytest's own traceback instead of the summary).
It happened on CI when the signal landed in pydantic building a record class. Each such entry is given its
function's first line here, before the reporter reads it; nothing else of the traceback changes.
"""

from __future__ import annotations

from types import TracebackType

import pytest


def give_every_entry_a_line(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Mend the tracebacks of ``excinfo`` (its exception's, and those of the exceptions chained to it) in place:
    an entry without a line number gets its function's first line."""
    seen: set[int] = set()
    exc: BaseException | None = excinfo.value
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        mended = _with_lines(exc.__traceback__)
        if mended is not None and mended is not exc.__traceback__:
            exc.__traceback__ = mended
            if exc is excinfo.value:  # (pytest's ExceptionInfo keeps the traceback it was made with)
                excinfo.traceback = pytest.ExceptionInfo.from_exc_info((excinfo.type, exc, mended)).traceback
        exc = exc.__cause__ or exc.__context__


def _with_lines(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` itself when each entry has a line number; else the same entries, each missing one given its
    function's first line (and no instruction offset: the offset points at no line, so at no column either)."""
    entries: list[TracebackType] = []
    entry = tb
    while entry is not None:
        entries.append(entry)
        entry = entry.tb_next
    if all(entry.tb_lineno is not None for entry in entries):
        return tb
    mended: TracebackType | None = None
    for entry in reversed(entries):
        if entry.tb_lineno is None:
            mended = TracebackType(mended, entry.tb_frame, -1, entry.tb_frame.f_code.co_firstlineno)
        else:
            mended = TracebackType(mended, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return mended
