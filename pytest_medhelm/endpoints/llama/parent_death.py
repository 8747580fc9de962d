"""A child process that must not outlive its parent (the llama.cpp server) asks Linux for a signal when the
parent dies, first thing, from the child itself.

Never as a ``preexec_fn``: code run between fork and exec in a process with threads (pytest's, the sender's) can
deadlock on a lock another thread held at the fork. (The kernel ties the signal to the *thread* that started the
child: start it from the main thread, or from a thread that lives as long as the child should.)
"""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and exit at
    once if the parent (``parent_pid``) is already gone. False where that is not available (not Linux, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - no libc with prctl
        return False
    prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    # the parent may have died before prctl took effect: then nobody will signal us
    if os.getppid() != parent_pid:
        os._exit(1)
    return True
