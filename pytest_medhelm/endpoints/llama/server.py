"""One llama.cpp OpenAI-compatible server for one GGUF file, on a free loopback port.

:class:`LlamaServer` runs ``python -m llama_cpp.server`` (PyPI ``llama-cpp-python[server]``, through
:mod:`.bootstrap`) on the file, on a free port of 127.0.0.1, and waits until ``GET /v1/models`` answers. Clients
then talk to ``LlamaServer.base_url`` (``http://127.0.0.1:PORT/v1``) with the model name
``LlamaServer.model_name`` (the server's ``--model_alias``). It never outlives this process (:mod:`.process`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pytest_medhelm.endpoints.llama import process
from pytest_medhelm.endpoints.llama.bootstrap import EXTRA_BUFFERS, NO_EXTRA_BUFFERS
from pytest_medhelm.endpoints.llama.cpu import cpu_has_amx, default_threads
from pytest_medhelm.endpoints.llama.gguf import LlamaModelUnavailable, require_server, served_model_name

#: the module the server process runs (``python -m``); its name is on the server's command line
BOOTSTRAP_MODULE = "pytest_medhelm.endpoints.llama.bootstrap"


class _PortTaken(Exception):
    pass


def _http_get_json(url: str, timeout: float) -> Any:
    # loopback only: never through a proxy from the environment
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


class LlamaServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, on a free loopback port.

    >>> with LlamaServer(resolve_gguf("smollm2"), Path("llama.log")) as server:   # doctest: +SKIP
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

    def server_arguments(self, port: int) -> list[str]:
        """The arguments of ``python -m llama_cpp.server``."""
        return [
            "--model", str(self.gguf),
            "--model_alias", self.model_name,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
        ]  # fmt: skip

    def command(self, port: int) -> list[str]:
        """The command line the server is started with."""
        return [
            sys.executable, "-m", BOOTSTRAP_MODULE,
            EXTRA_BUFFERS if self.extra_buffers else NO_EXTRA_BUFFERS,
            str(os.getpid()),  # the parent whose death stops the server
            *self.server_arguments(port),
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

        Raises :class:`LlamaModelUnavailable` (naming the log file and quoting its last lines) when the server is
        not installed, the file is absent, the process dies, or it does not answer within ``startup_timeout``.
        """
        with self._lock:
            if self.running and self.base_url:
                return self.base_url
            if not self.gguf.is_file():
                raise LlamaModelUnavailable(f"local model file not found: {self.gguf}")
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
        port = process.free_port(self.host)
        shown = [sys.executable, "-m", "llama_cpp.server", *self.server_arguments(port)]
        header = f"$ {shlex.join(shown)}  # llama.cpp extra buffer types {'on' if self.extra_buffers else 'off'}"
        began = time.monotonic()
        self._proc = process.launch(self.command(port), self.log_path, self.environment(), header)
        process.register(self)
        self.pid = self._proc.pid
        self.port = port
        self._owner_pid = os.getpid()
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
                if "address already in use" in process.log_tail(self.log_path, 10).lower():
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

    def _failure(self, what: str) -> LlamaModelUnavailable:
        return LlamaModelUnavailable(
            f"llama.cpp server for {self.gguf} failed to start: {what}; log: {self.log_path}\n"
            f"--- last lines of {self.log_path} ---\n{process.log_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Terminate the server's process group: SIGTERM, up to 5 s, then SIGKILL. Idempotent."""
        proc = self._proc
        if proc is None or os.getpid() != self._owner_pid:  # a forked child never stops its parent's server
            return
        try:
            process.stop_group(proc)
        finally:
            self._proc = None
            process.forget(self)
            self.base_url = None

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.base_url if self.running else "stopped"
        return f"LlamaServer({str(self.gguf)!r}, {state})"
