"""What the user sees while an item waits for its answer from the background sender.

A local model can take minutes to answer the first items; pytest's own output does not move meanwhile. While an
item waits, :func:`wait_for_answer` shows how far the sending is::

    benchmarks/clinical_note_generation/test_aci_bench.py  [medhelm: waiting 35 s; answers 3/65, jury 0/25]

* on a terminal, at the end of pytest's current line, rewritten in place every second and erased (with
  backspaces) before pytest writes again, so pytest's line and its ``[ 10%]`` column stay as they were;
  a status that would not fit on the line is written as a line of its own instead;
* elsewhere (CI logs), a plain line after :data:`PLAIN_FIRST` s of waiting and then every :data:`PLAIN_EVERY` s,
  written through pytest's terminal reporter (which then starts its next line with the file name again).

Output capture is suspended around each write (as pytest's live logging does), since the item is inside its
captured call phase while it waits.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

#: on a terminal, the status is rewritten this often (seconds) once it is shown
TTY_EVERY = 1.0
#: how long an item waits before anything is shown (a quick answer shows nothing)
TTY_FIRST = 2.0
#: off a terminal: the first line after this long, then one every PLAIN_EVERY seconds
PLAIN_FIRST = 5.0
PLAIN_EVERY = 30.0


class _Counts(Protocol):
    done: Any  # Counter by kind ("answers", "jury")
    queued: Any

    def wait(self, key: str, on_wait: Any = None) -> Any: ...


def status_text(sender: _Counts, waited: float) -> str:
    """``medhelm: waiting 35 s; answers 3/65, jury 0/25``."""
    parts = [f"{kind} {sender.done[kind]}/{sender.queued[kind]}" for kind in ("answers", "jury")
             if sender.queued[kind]]
    batches = getattr(sender, "status", "")  # --medhelm-batch: the batches in flight and their counts
    if batches:
        parts.append(batches)
    return f"medhelm: waiting {waited:.0f} s; " + ", ".join(parts) if parts else f"medhelm: waiting {waited:.0f} s"


class WaitingStatus:
    """Called by the sender's wait loop (``tick(waited)``) on the waiting thread; ``close()`` erases the status."""

    def __init__(self, config: Any, sender: _Counts) -> None:
        self.sender = sender
        self._reporter = config.pluginmanager.get_plugin("terminalreporter")
        self._tw = config.get_terminal_writer() if self._reporter is not None else None
        self._capman = config.pluginmanager.get_plugin("capturemanager")
        self._tty = bool(getattr(self._reporter, "isatty", False))
        self._shown = 0  # characters of the in-place status on the terminal now
        self._next = TTY_FIRST if self._tty else PLAIN_FIRST

    def _uncaptured(self) -> AbstractContextManager[object]:
        if self._capman is None:
            return nullcontext()
        uncaptured: AbstractContextManager[object] = self._capman.global_and_fixture_disabled()
        return uncaptured

    def tick(self, waited: float) -> None:
        if self._reporter is None or waited < self._next:
            return
        text = status_text(self.sender, waited)
        if not self._tty:
            self._next = waited + PLAIN_EVERY
            with self._uncaptured():
                self._reporter.write_line(text)
            return
        self._next = waited + TTY_EVERY
        status = f"  [{text}]"
        tw = self._tw
        room = (tw.fullwidth - tw.width_of_current_line - 1) if tw is not None else 0
        with self._uncaptured():
            if len(status) > room:  # it would wrap, and backspaces cannot climb back: a line of its own
                self._erase()
                self._next = waited + PLAIN_EVERY
                self._reporter.write_line(text)
                return
            self._reporter.flush()
            out = sys.stdout
            # pytest's writer never sees these characters: its idea of the line (for the [ 10%] column) stays right
            out.write("\b" * self._shown + status + " " * max(0, self._shown - len(status))
                      + "\b" * max(0, self._shown - len(status)))
            out.flush()
            self._shown = len(status)

    def _erase(self) -> None:
        if self._shown:
            out = sys.stdout
            out.write("\b" * self._shown + " " * self._shown + "\b" * self._shown)
            out.flush()
            self._shown = 0

    def close(self) -> None:
        if self._shown:
            with self._uncaptured():
                self._erase()


def wait_for_answer(config: Any, sender: _Counts, key: str) -> Any:
    """``sender.wait(key)``, showing the sending's progress while it takes a while (see the module)."""
    status = WaitingStatus(config, sender)
    try:
        return sender.wait(key, status.tick)
    finally:
        status.close()
