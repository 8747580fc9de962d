"""The llama.cpp server's process: launched in its own process group, stopped with its whole group, and never
left running when this process ends.

* :func:`stop_group` (what :meth:`LlamaServer.stop <.server.LlamaServer.stop>` does): SIGTERM to the group, up to
  5 s, then SIGKILL, then reap;
* an ``atexit`` handler stops every server still running at a normal interpreter exit (also after
  KeyboardInterrupt);
* on SIGTERM of this process, a handler (installed only when SIGTERM had its default action and we are on the main
  thread) stops the servers, then lets this process die of SIGTERM as it would have;
* the server itself asks for a signal when its parent dies, even by SIGKILL (:mod:`.bootstrap`).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

STOP_GRACE_SECONDS = 5.0


class Stoppable(Protocol):
    def stop(self) -> None: ...


_LIVE: set[Stoppable] = set()
_LIVE_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False
_SIGTERM_INSTALLED = False


def register(server: Stoppable) -> None:
    """Stop ``server`` when this process exits or is terminated, unless it is stopped (:func:`forget`) first."""
    _install_exit_handlers()
    with _LIVE_LOCK:
        _LIVE.add(server)


def forget(server: Stoppable) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(server)


def stop_all_servers() -> None:
    """Stop every server this process started and that still runs."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        try:
            server.stop()
        except Exception:  # noqa: BLE001  # best effort at exit: the next server must still be stopped
            pass


def _on_sigterm(signum: int, frame: Any) -> None:
    stop_all_servers()
    # then die of SIGTERM as the default action would have
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_exit_handlers() -> None:
    global _ATEXIT_REGISTERED, _SIGTERM_INSTALLED
    if not _ATEXIT_REGISTERED:
        atexit.register(stop_all_servers)
        _ATEXIT_REGISTERED = True
    if not _SIGTERM_INSTALLED and threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)
                _SIGTERM_INSTALLED = True
        except (ValueError, OSError):  # pragma: no cover - not allowed here
            pass


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def launch(command: Sequence[str], log_path: Path, env: Mapping[str, str], header: str) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group, its output appended to ``log_path`` after the line ``header``."""
    # the log may quote prompts: private (0600) like the cache directory it is kept in
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
    try:
        log.write(f"{header}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop_group() kills the whole group
            close_fds=True,
            env=dict(env),
        )
    finally:
        log.close()  # the child holds its own descriptor


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``'s process group: SIGTERM, up to 5 s, then SIGKILL; then reap ``proc``."""
    if proc.returncode is not None:  # reaped: its pid may name another process now, never signal it
        return
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    if not _exited(proc.pid, 0):
        _signal_group(pgid, signal.SIGTERM)
        if not _exited(proc.pid, STOP_GRACE_SECONDS):
            _signal_group(pgid, signal.SIGKILL)
    # the leader is dead but unreaped (its pid still names its group): kill whatever else it left there, then reap
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of the server's log (for an error message)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            data = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(data.splitlines()[-lines:])


def _exited(pid: int, timeout: float) -> bool:
    """Whether child ``pid`` has exited within ``timeout`` s, without reaping it (so its pgid stays reserved)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
