"""What the tests of llama.cpp models look at from outside: the live llama.cpp server processes, read from /proc.

A test that says "no server outlives the run" counts them here, as a user would with ``ps``, rather than asking the
plugin's own bookkeeping.
"""

from __future__ import annotations

import os

from pytest_medhelm.endpoints.llama.server import BOOTSTRAP_MODULE


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return "/"


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    # "pid (comm) S ...": the state follows the last ')'
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def find_llama_processes(gguf: str | os.PathLike[str] | None = None) -> list[int]:
    """Pids of live llama.cpp server processes (``python -m pytest_medhelm.endpoints.llama.bootstrap``) serving
    ``gguf`` (any model when ``None``).

    The model path is compared as given on the server's command line (made absolute, symlinks not followed), the
    way :class:`~pytest_medhelm.endpoints.llama.server.LlamaServer` passes it. Zombies (exited, not yet reaped) are
    not counted. Returns ``[]`` where /proc does not exist.
    """
    wanted = None if gguf is None else os.path.abspath(os.fspath(gguf))
    pids: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    own = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        pid = int(entry)
        args = _cmdline(pid)
        if BOOTSTRAP_MODULE not in args:
            continue
        if wanted is not None:
            models = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("--model", "-m")]
            models += [arg.split("=", 1)[1] for arg in args if arg.startswith("--model=")]
            cwd = _cwd(pid)
            if not any(os.path.normpath(os.path.join(cwd, model)) == wanted for model in models):
                continue
        if _is_zombie(pid):
            continue
        pids.append(pid)
    return sorted(pids)
