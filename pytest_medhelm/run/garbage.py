"""What a run asks of Python's garbage collector: the items of a large run live until its end, so walking them again
and again is pure cost. Each figure below was measured on the acceptance workload (PubMedQA x 2 models, 2,000
items) with ``gc.callbacks``.

* **While the items are collected** (a session with a medhelm option), no full collection: one walked everything
  imported so far (18-29 ms) on the way to the first request; the young generations are still collected.
* **A large run** (1,000 items or more) moves everything alive into the permanent generation once the items are
  collected, and again once they have run and once the results are built: the full collections of the run (and
  pytest's five at its end) skip them (for 10,000 items that was 2 s of a 20 s re-run). While its items run, full
  collections are ten times rarer: a full collection holds the interpreter while the answers arrive on the sending
  thread (two of 12-45 ms each in a 2,000-item run, none now). Only for large runs: ``gc.get_referrers`` does not see
  frozen referrers, which a library checking for leaks (as Hypothesis's ``register_random`` does) could notice in a
  small run for no gain.
* **At the end**, what was frozen is given back to the collector, unless the process ends with the session
  (:func:`freeze_at_exit`): pytest's own process, not a session nested in another (pytester's in-process runs).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

    import pytest

#: from this many collected items on, the collected objects are frozen out of the garbage collector's scans
FREEZE_MIN_ITEMS = 1000
#: how much rarer full collections are while a large run's items run
RARER_WHILE_ITEMS_RUN = 10
#: a threshold no count of young collections reaches: no full collection until it is set back
NEVER = 2**31 - 1

_exit_freeze_registered = False


class GarbageCollector:
    """The collector's settings for one session: held full collections, and what was frozen."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.frozen = False
        self._thresholds: tuple[int, int, int] | None = None  # the collector's own, while full collections wait

    def hold_full_collections(self, factor: int | None) -> None:
        """Full collections ``factor`` times rarer (None: none at all) until :meth:`release_full_collections`; the
        young generations go on as before. Nothing changes when the collector is off (a program that turned it
        off keeps it off) or already held."""
        import gc

        if self._thresholds is not None or not gc.isenabled():
            return
        young, middle, full = gc.get_threshold()
        if young == 0:  # (automatic collection off by threshold)
            return
        self._thresholds = (young, middle, full)
        gc.set_threshold(young, middle, NEVER if factor is None else min(NEVER, full * factor))

    def release_full_collections(self) -> None:
        if self._thresholds is not None:
            import gc

            gc.set_threshold(*self._thresholds)
            self._thresholds = None

    def freeze_if_large(self, items: int) -> None:
        """In a run of ``items`` items (or more): everything alive frozen until the session ends, and full
        collections rarer until :meth:`release_full_collections` (the items' loop ended)."""
        if items < FREEZE_MIN_ITEMS or self.frozen:
            return
        import gc

        gc.freeze()
        self.frozen = True
        self.hold_full_collections(RARER_WHILE_ITEMS_RUN)
        freeze_at_exit(self.config)

    def freeze_again(self) -> None:
        """Once the items have run, what they made (reports, records), and then the results built from it, also
        live until the end: frozen too, the last full collections (one while the results are built, pytest's five
        at its end) skip them: 0.15-0.2 s of a 2,000 item run."""
        if self.frozen:
            import gc

            gc.freeze()

    def at_cleanup(self) -> None:
        """At the session's cleanup: the collector's settings as they were, and what the session froze given back,
        unless the process ends with the session: pytest's own process (:func:`freeze_at_exit`), not a session
        nested in another. There the exit handler collects only what was made since, instead of walking
        everything again (0.11 s of a 2,000-item run)."""
        self.release_full_collections()
        if self.frozen and not (_exit_freeze_registered and not nested_session()):
            import gc

            gc.unfreeze()
            self.frozen = False


def freeze_at_exit(config: pytest.Config) -> None:
    """Have this process, when it exits, collect the garbage it made since its last freeze, flush its open files,
    then freeze what is still alive; only when the process is pytest's own (``__main__`` is pytest, or an xdist
    worker), never in a script that calls ``pytest.main`` and goes on.

    The interpreter's finalization walks every object still alive in several full collections while it tears the
    modules down: in a 2,000-item run that was 0.25-0.45 s between the last exit handler and the process's end
    (0.03 s with everything frozen). The session of such a process keeps what it froze frozen to the end
    (:meth:`GarbageCollector.at_cleanup`), so the one collection here walks only what was made after (a full one
    walked all 158,000 objects of a 2,000-item run: 0.11 s): the finalizers of that garbage still run. The files
    still open, frozen or not, are flushed, as their finalizers would have done (one kept alive by a reference cycle
    is otherwise never finalized once frozen); the finalizers of other objects still alive at exit, or frozen while
    alive, are not run, which Python does not promise either. Exit handlers registered earlier (logging's flush)
    still run after it."""
    global _exit_freeze_registered
    from pytest_medhelm.options import is_xdist_worker

    # pytest's own command (``pytest``, ``python -m pytest``, ``coverage run -m pytest``), or an xdist worker; not a
    # script that calls pytest.main and goes on
    main = sys.modules.get("__main__")
    own_process = is_xdist_worker(config) or (
        getattr(getattr(main, "__spec__", None), "name", "") == "pytest.__main__"
        or os.path.basename(getattr(sys, "argv", [""])[0]).lower().startswith(("pytest", "py.test")))
    if _exit_freeze_registered or not own_process:
        return
    import atexit

    atexit.register(_collect_flush_freeze)
    _exit_freeze_registered = True


def _collect_flush_freeze() -> None:
    import gc

    try:
        if gc.isenabled():  # (a program that turned the collector off keeps it off)
            gc.collect()  # (what is frozen is skipped)
        gc.unfreeze()  # (two list splices) so that the frozen files are found too
        _flush_open_files(gc.get_objects())
    except Exception:  # noqa: BLE001 - anything odd: the process ends as Python ends it, unfrozen
        return
    gc.freeze()


def _flush_open_files(objects: list[Any]) -> None:
    """Flush every file object open for writing on a regular file (a pipe or a socket is left to its own end: a
    reader that is gone or slow must not hold the exit). A file object here is an instance of a real subclass of
    io's C base, whose finalizer is the one that flushes (a class only registered with ``io.IOBase`` has none);
    objects are told apart by their type only, in C loops: ``isinstance`` would ask a proxy for its ``__class__``
    (a dead weak proxy raises) and ``io.IOBase``'s ABC check costs tens of microseconds per type (40 ms of a
    2,000-item run's exit, against 15 ms)."""
    import _io
    import functools
    import itertools
    import stat

    is_file_type = functools.partial(type.__subclasscheck__, _io._IOBase)  # (never asks a metaclass)
    file_types = {kind for kind in set(map(type, objects)) if is_file_type(kind)}
    for obj in list(itertools.compress(objects, map(file_types.__contains__, map(type, objects)))):
        try:
            if not obj.closed and obj.writable() and stat.S_ISREG(os.fstat(obj.fileno()).st_mode):
                obj.flush()
        except Exception:  # noqa: BLE001 - a file that cannot be flushed now would not have been at exit either
            pass


def nested_session() -> bool:
    """Whether the pytest session now ending runs inside another one of this process (as pytester's in-process
    runs do): pytest's session wrapper (``_pytest.main.wrap_session``) is on the stack more than once. When the
    wrapper is not found at all (a pytest that renamed it), the session is taken as nested: what it froze is then
    given back, as for a caller that goes on."""
    frame: FrameType | None = sys._getframe(1)
    sessions = 0
    while frame is not None:
        code = frame.f_code
        sessions += code.co_name == "wrap_session" and frame.f_globals.get("__name__") == "_pytest.main"
        frame = frame.f_back
    return sessions != 1
