"""What a run asks of Python's garbage collector: the items of a large run live until its end, so walking them again
and again is pure cost. Each figure below was measured on the acceptance workload (PubMedQA x 2 models, 2,000
items) with ``gc.callbacks``.

* **While the items are collected** (a session with a medhelm option), no full collection: one walked everything
  imported so far (18-29 ms) on the way to the first request. The young generations are still collected. The
  saving is a large run's, which freezes everything right after (below); in a small run the collection held back
  comes once the items are collected, over the same heap.
* **A large run** (1,000 items or more) moves everything alive into the permanent generation once the items are
  collected, and again once they have run and once the results are built: the full collections of the run (and
  pytest's five at its end) skip them (for 10,000 items that was 2 s of a 20 s re-run). While its items run, full
  collections are ten times rarer: a full collection holds the interpreter while the answers arrive on the sending
  thread (two of 12-45 ms each in a 2,000-item run, none now). Frozen while the items run only in large runs:
  ``gc.get_referrers`` does not see frozen referrers, which a library checking for leaks (as Hypothesis's
  ``register_random`` does) could notice in a small run for no gain. Where Hypothesis's pytest plugin is loaded,
  Hypothesis is imported before the items are collected (:func:`import_hypothesis_first`).
* **At the session's cleanup**, once every plugin has finished (the terminal summary too), a small run whose process
  ends with the session (:func:`ends_with_process`) collects until a collection finds nothing and freezes what is
  alive: all of it lives until the exit, and pytest's five full collections at its end, then the interpreter's as
  it exits, walked it again (in a 10-item run's process they were a quarter of its CPU time, measured on this
  suite's toy runs). The process then exits through :func:`freeze_at_exit`, as a large run's does. Cyclic garbage
  frozen with a large run's items is not freed before the exit, nor finalized (about 2,800 objects in a 2,000-item
  run: what a full collection at the exit found, at 0.11 s); open files among it are flushed. A session that does
  not end with its process (pytester's nested ones, a program calling ``pytest.main``) freezes nothing at its end
  and gives back what a large run froze at its cleanup.

Where the collector has no thresholds of this kind (a threshold of 0 for the oldest generation, as CPython 3.14's
incremental collector reports), or was turned off or tuned by someone else meanwhile, its settings are left alone.
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
#: at most as many full collections before the freeze for the end as pytest makes at the session's end
UNTIL_NOTHING_FOUND = 5
#: a threshold no count of young collections reaches: no full collection until it is set back
NEVER = 2**31 - 1
#: Hypothesis's pytest plugin, by its entry point's name and by its module's (``-p``, ``pytest_plugins``)
HYPOTHESIS_PLUGIN = ("hypothesispytest", "_hypothesis_pytestplugin")
#: pytest's command-line entry point (``_pytest.config``), by the names pytest 8 and 9 give it
CLI_ENTRY_POINTS = ("console_main", "_console_main")

_exit_freeze_registered = False


class CollectorPolicy:
    """What one session asks of the collector: full collections held back, and what it froze."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.frozen = False
        self._thresholds: tuple[int, int, int] | None = None  # the collector's own, while full collections wait
        self._held: tuple[int, int, int] | None = None  # what they were set to meanwhile

    def before_collection(self) -> None:
        """As the items are about to be collected (a session with a medhelm option): Hypothesis imported where its
        pytest plugin is loaded (:func:`import_hypothesis_first`), then no full collection until they are."""
        import_hypothesis_first(self.config)
        self.hold_full_collections(None)

    def hold_full_collections(self, factor: int | None) -> None:
        """Full collections ``factor`` times rarer (None: none at all) until :meth:`release_full_collections`; the
        young generations go on as before. Nothing changes when the collector is off (a program that turned it
        off keeps it off) or already held."""
        import gc

        if self._thresholds is not None or not gc.isenabled():
            return
        young, middle, full = gc.get_threshold()
        if young == 0 or full == 0:  # (collection off by threshold; an incremental collector without this one)
            return
        self._thresholds = (young, middle, full)
        self._held = (young, middle, NEVER if factor is None else min(NEVER, full * factor))
        gc.set_threshold(*self._held)

    def release_full_collections(self) -> None:
        """The thresholds as they were, unless someone changed them meanwhile (a conftest, a test): theirs stay."""
        if self._thresholds is not None:
            import gc

            if gc.get_threshold() == self._held:
                gc.set_threshold(*self._thresholds)
            self._thresholds = self._held = None

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

    def freeze_for_the_end(self) -> None:
        """At the session's cleanup, once every plugin has finished and before pytest's five full collections, in a
        small run whose process ends with the session (:func:`ends_with_process`; a large run froze already): what
        is alive now lives until the exit. Full collections until one finds nothing (their garbage's finalizers run
        while pytest still watches for unraisable exceptions), then everything frozen: pytest's collections and the
        interpreter's at its exit walk only what is made after (a 10-item toy run: 1.11 s of CPU before, 0.82 s
        after; under ``-n 2``, its three processes 2.33 s before, 1.73 s after)."""
        import gc

        if self.frozen or not gc.isenabled() or not ends_with_process(self.config):
            return  # (a large run froze already; a program that turned the collector off keeps it off)
        for _ in range(UNTIL_NOTHING_FOUND):  # (a finalizer's garbage is found by the next one: pytest does five)
            if not gc.collect():
                break
        gc.freeze()
        self.frozen = True
        freeze_at_exit(self.config)

    def at_cleanup(self) -> None:
        """At the session's cleanup: the collector's settings as they were, and what the session froze given back,
        unless the process ends with the session: pytest's own process (:func:`freeze_at_exit`), not a session
        nested in another (:func:`ends_with_process`). There the exit handler collects only what was made since,
        instead of walking everything again (0.11 s of a 2,000-item run)."""
        self.release_full_collections()
        # (a session that froze and ends with its process registered freeze_at_exit when it froze)
        if self.frozen and not ends_with_process(self.config):
            import gc

            gc.unfreeze()
            self.frozen = False


def import_hypothesis_first(config: pytest.Config) -> None:
    """Hypothesis imported before the items are collected, where its pytest plugin is loaded: the plugin imports it
    at the session's end anyway (in the terminal summary, xdist's workers too), and Hypothesis's entry points then
    register their modules' random generators (trio's), each with a full collection and a ``gc.get_referrers``
    check, which does not see frozen referrers: after a large run's freeze, it warned (``HypothesisWarning``)
    wherever Hypothesis and trio were installed (trio imported at load by anyio's plugin). Imported now, before any
    freeze and while the heap is small, it costs the process nothing more (its full collection walks the imports,
    not 2,000 items: 25 ms, not 70 ms). Not without a summary (``--no-summary``), where the plugin does not import
    it."""
    loaded = any(config.pluginmanager.has_plugin(name) for name in HYPOTHESIS_PLUGIN)
    if "hypothesis" in sys.modules or not loaded or getattr(config.option, "no_summary", False):
        return
    try:
        import hypothesis  # noqa: F401 - imported for its side effects (above)
    except Exception:  # noqa: BLE001 - a broken Hypothesis fails where it is used, not here
        pass


def freeze_at_exit(config: pytest.Config) -> None:
    """Have this process, when it exits, collect the garbage it made since its last freeze, flush its open files,
    then freeze what is still alive; only when the process ends with the session (:func:`ends_with_process`), never
    in a program that calls ``pytest.main`` and goes on.

    The interpreter's finalization walks every object still alive in several full collections while it tears the
    modules down: in a 2,000-item run that was 0.25-0.45 s between the last exit handler and the process's end
    (0.03 s with everything frozen). The session keeps what it froze frozen to the end
    (:meth:`CollectorPolicy.at_cleanup`), so the one collection here walks only what was made after (a full one
    walked all 158,000 objects of a 2,000-item run: 0.11 s): the finalizers of that garbage still run. The files
    still open, frozen or not, are flushed, as their finalizers would have done (one kept alive by a reference cycle
    is otherwise never finalized once frozen); the finalizers of other objects still alive at exit, or frozen while
    alive, are not run, which Python does not promise either. Exit handlers registered earlier (logging's flush)
    still run after it."""
    global _exit_freeze_registered
    if _exit_freeze_registered or not ends_with_process(config):
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


def ends_with_process(config: pytest.Config) -> bool:
    """Whether this process ends when the session now running does: it is pytest's own command (``pytest``,
    ``python -m pytest``, ``coverage run -m pytest``: pytest's command-line entry point is on the stack) or an xdist
    worker, and the session is not one nested in another (pytester's in-process runs: pytest's session wrapper,
    ``_pytest.main.wrap_session``, is on the stack twice). Not a program that calls ``pytest.main``, which may go
    on; not when pytest's functions are not found (a pytest that renamed them)."""
    from pytest_medhelm.options import is_xdist_worker

    frame: FrameType | None = sys._getframe(1)
    sessions, console = 0, False
    while frame is not None:
        name, module = frame.f_code.co_name, frame.f_globals.get("__name__")
        sessions += name == "wrap_session" and module == "_pytest.main"
        console = console or (name in CLI_ENTRY_POINTS and module == "_pytest.config")
        frame = frame.f_back
    return sessions == 1 and (console or is_xdist_worker(config))
