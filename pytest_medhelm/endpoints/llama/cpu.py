"""CPU defaults for a llama.cpp server: how many threads, and whether the CPU has AMX (whose llama.cpp code path
crashes on some CPUs, see :mod:`.bootstrap`)."""

from __future__ import annotations

import os


def cpu_has_amx() -> bool:
    """Whether the CPU reports Intel AMX (``amx_tile`` in /proc/cpuinfo); ``False`` where that cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def default_threads() -> int:
    """The CPUs this process may run on (its affinity), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
