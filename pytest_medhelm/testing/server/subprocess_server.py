"""The test server as a child process (``start_subprocess_server``), readable and configurable from any process
over its control plane::

    with start_subprocess_server(answer="A", latency=0.1, faults=[("status", 500)]) as server:
        pytester.runpytest(f"--medhelm-api-base={server.url}", ...)
        assert server.stats()["count"] == 10
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from pytest_medhelm.testing.server.app import LoopbackURLs
from pytest_medhelm.testing.server.behaviour import Fault, parse_rules, validate


def config_to_json(config: Mapping[str, Any]) -> dict:
    out = dict(config)
    for key in ("faults", "add_faults"):
        if key in out:
            out[key] = [Fault.parse(f).to_json() for f in out[key] or ()]
    if out.get("fail_matching") is not None:
        out["fail_matching"] = {k: Fault.parse(f).to_json() for k, f in out["fail_matching"].items()}
    if out.get("rules") is not None:
        out["rules"] = [list(pair) for pair in parse_rules(out["rules"])]
    if "models" in out:
        out["models"] = list(out["models"])
    if callable(out.get("script")):
        raise TypeError(
            "a subprocess server cannot take a Python callable; pass an import path, script='package.module:function'"
        )
    return out


class SubprocessServer(LoopbackURLs):
    """Handle on a test server running in a child process (from ``start_subprocess_server``).

    Observation and control go over HTTP (``/_stats``, ``/_config``...), so the same numbers are visible to any
    process. The child also exits when this process dies, because it watches its stdin pipe.
    """

    def __init__(self, process: subprocess.Popen, workdir: str, port_file: Path, log_path: Path,
                 log_file: IO[bytes]) -> None:
        self.process = process
        self._workdir = workdir
        self._port_file = port_file
        self._log_path = log_path
        self._log_file = log_file
        self._port: int | None = None
        self._output: str | None = None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the test server exited with status {self.process.returncode} before listening:\n{self.output()}"
                )
            try:
                text = self._port_file.read_text().strip()
            except FileNotFoundError:
                text = ""
            if text:
                self._port = int(text)
                return
            time.sleep(0.01)
        raise RuntimeError(f"the test server did not start within {timeout}s:\n{self.output()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the test server is not ready")
        return self._port

    def output(self) -> str:
        """What the child wrote to stdout/stderr so far (script tracebacks, startup errors)."""
        if self._output is not None:
            return self._output
        try:
            return self._log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _call(self, method: str, path: str, payload: Any = None, timeout: float = 10.0) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise RuntimeError(f"test server {method} {path} failed with {exc.code}: {detail}") from None

    def stats(self) -> dict:
        """``GET /_stats``: count, answered, in_flight, max_in_flight, by_status, faults_pending, stopping, port."""
        return self._call("GET", "/_stats")

    @property
    def count(self) -> int:
        """Chat requests received (one HTTP round trip)."""
        return self.stats()["count"]

    @property
    def max_in_flight(self) -> int:
        return self.stats()["max_in_flight"]

    @property
    def requests(self) -> list[dict]:
        """The request log, as ``ChatServer.requests`` (one HTTP round trip)."""
        return self._call("GET", "/_requests")["requests"]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while (count := self.count) < n:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"test server saw {count} chat requests, expected {n} within {timeout}s")
            time.sleep(0.01)

    def configure(self, **config: Any) -> dict:
        """``POST /_config``; same options as ``ChatServer.configure`` except that ``script`` is an import path."""
        return self._call("POST", "/_config", config_to_json(config))

    def set_answer(self, answer: str | Mapping[str, str]) -> None:
        if isinstance(answer, str):
            self.configure(answer=answer, rules=[], script=None)
        elif isinstance(answer, Mapping):
            self.configure(rules=answer, script=None)
        else:
            raise ValueError("a subprocess server takes a string or a mapping; use configure(script='mod:func')")

    def add_faults(self, *faults: Any) -> None:
        self.configure(add_faults=faults)

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate the child (killing it if it lingers) and clean up; idempotent. Returns its exit status."""
        process = self.process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if self._output is None:
            self._output = self.output()
            self._log_file.close()
            shutil.rmtree(self._workdir, ignore_errors=True)
        return process.returncode

    def __enter__(self) -> SubprocessServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_subprocess_server(
    *, port: int = 0, startup_timeout: float = 15.0, env: Mapping[str, str] | None = None, **config: Any
) -> SubprocessServer:
    """Start ``python -m pytest_medhelm.testing.server`` and return once it listens.

    ``config`` takes the options of ``ChatServer`` (``script`` as a ``'package.module:function'`` import path).
    The child is always reaped by ``stop()`` / the ``with`` block, and exits on its own if this process dies.
    """
    checkable = {k: v for k, v in config.items() if k != "script"}
    validate(checkable)  # fail here, with a traceback in the test, rather than in the child
    config_json = json.dumps(config_to_json(config))

    workdir = tempfile.mkdtemp(prefix="medhelm-test-server-")
    port_file = Path(workdir, "port")
    log_path = Path(workdir, "server.log")
    child_env = dict(os.environ if env is None else env)
    # Make the package importable in the child even from an uninstalled checkout.
    package_root = str(Path(__file__).resolve().parents[3])
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child_env.get("PYTHONPATH")) if p)
    command = [
        sys.executable, "-m", "pytest_medhelm.testing.server",
        "--port", str(port), "--port-file", str(port_file), "--watch-stdin", "--config", config_json,
    ]
    log_file = open(log_path, "wb")  # a file, not a pipe: nobody reads a pipe, and a full one would block the child
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
                                   env=child_env)
    except BaseException:
        log_file.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    handle = SubprocessServer(process, workdir, port_file, log_path, log_file)
    try:
        handle._wait_ready(startup_timeout)
    except BaseException:
        handle.stop()
        raise
    return handle
