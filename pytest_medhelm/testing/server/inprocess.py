"""The test server in a background thread of this process (``running_server``, ``ChatServer``)::

    with running_server(answer="B", latency=0.05) as server:
        client = OpenAI(base_url=server.url, api_key="x")      # server.url == "http://127.0.0.1:PORT/v1"
        ...
        assert server.count == 3 and server.requests[0]["json"]["model"] == "m"
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from pytest_medhelm.testing.server.app import LoopbackURLs, ServerCore
from pytest_medhelm.testing.server.behaviour import AnswerSpec
from pytest_medhelm.testing.server.state import ServerState


class ChatServer(LoopbackURLs):
    """The test server running in a background thread of this process.

    Prefer ``running_server(**config)``; ``ChatServer(**config).start()`` / ``.stop()`` is the long form. Every
    method is safe to call from any thread while requests are being served.
    """

    def __init__(self, **config: Any) -> None:
        self._state = ServerState(**config)
        self._core = ServerCore(self._state)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._startup_error: BaseException | None = None

    def start(self, timeout: float = 10.0) -> ChatServer:
        if self._thread is not None:
            raise RuntimeError("this test server was already started")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="medhelm-test-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the test server did not start within {timeout}s")
        if self._startup_error is not None:
            raise RuntimeError(f"the test server failed to start: {self._startup_error!r}") from self._startup_error
        return self

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                loop.run_until_complete(self._core.start(0))
            except BaseException as exc:  # noqa: BLE001 - reported to start(), in the test thread
                self._startup_error = exc
                return
            finally:
                ready.set()
            loop.run_until_complete(self._core.wait_stopped())
        finally:
            # handlers still waiting (a script's held request) end here, cancelled as asyncio.run ends its tasks,
            # rather than being destroyed pending with the loop (a warning per task at the interpreter's exit)
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listening socket and drop every connection, in-flight requests included (idempotent).

        Counters and the request log stay readable afterwards. Connections attempted after this returns are
        refused.
        """
        thread, loop = self._thread, self._loop
        if thread is None or loop is None or self._startup_error is not None:
            return
        if threading.current_thread() is thread:
            # Called from a script on the loop thread: cannot wait for ourselves.
            self._core.request_shutdown()
            return
        if not self._core.stopped.is_set():
            # call_soon_threadsafe rather than run_coroutine_threadsafe: if the loop is already winding down
            # (the server stopped itself), nothing is left half-scheduled.
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(self._core.request_shutdown)
        if not self._core.stopped.wait(timeout):
            raise RuntimeError(f"the test server did not stop within {timeout}s")
        thread.join(timeout)

    def __enter__(self) -> ChatServer:
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._core.port is None:
            raise RuntimeError("the test server is not started")
        return self._core.port

    @property
    def stopped(self) -> bool:
        """True once a stop (``stop()``, ``stop_after``, ``POST /_stop``) has fully completed."""
        return self._core.stopped.is_set()

    def wait_stopped(self, timeout: float = 10.0) -> None:
        """Block until the server has stopped by itself (``stop_after``, ``POST /_stop``); TimeoutError otherwise."""
        if not self._core.stopped.wait(timeout):
            raise TimeoutError(f"the test server did not stop within {timeout}s")

    # -- observation -------------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict]:
        """A snapshot of the received chat requests, in arrival order.

        Each record: ``n`` (1-based arrival number), ``method``, ``path``, ``json`` (the parsed body, or None and
        ``raw_body``), ``headers`` (credential headers removed), ``had_auth`` (whether one was present),
        ``auth_fingerprint`` (:func:`key_fingerprint` of the bearer token, None without one), ``received_at``,
        ``status`` (the HTTP status sent, None for a dropped connection or still in flight) and ``fault`` (the
        fault applied, or None).
        """
        return self._state.requests()

    @property
    def count(self) -> int:
        """Chat requests received (whatever happened to them)."""
        return self._state.count()

    @property
    def max_in_flight(self) -> int:
        """The most chat requests the server was handling at the same time."""
        return self._state.max_in_flight()

    def stats(self) -> dict:
        """The same dictionary as ``GET /_stats``: count, answered, in_flight, max_in_flight, by_status, ..."""
        return {**self._state.stats(), "port": self._core.port}

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> None:
        """Block until at least ``n`` chat requests have arrived; TimeoutError otherwise."""
        self._state.wait_for_requests(n, timeout)

    # -- control -----------------------------------------------------------------------------------------------

    def configure(self, **config: Any) -> dict:
        """Change any option at runtime (answer, rules, script, latency, faults (replaces the queue), add_faults,
        fail_matching, api_key, models, stop_after, log_requests, reply_shape, reasoning_tokens, reasoning_shape,
        thinking_text); returns the resulting configuration."""
        self._state.configure(**config)
        return self._state.describe()

    def set_answer(self, answer: AnswerSpec) -> None:
        """Replace the answering policy: a string (constant answer), a mapping (substring of the last user
        message -> answer; the constant answer stays the fallback) or a callable ``(request_json) -> str | dict | None``
        (a dict is the whole reply body, sent as it is)."""
        self._state.set_answer(answer)

    def add_faults(self, *faults: Any) -> None:
        """Append faults to the queue, e.g. ``add_faults(("status", 429, {"Retry-After": "1"}), ("disconnect",))``."""
        self._state.configure(add_faults=faults)

    def reset(self) -> None:
        """Zero the counters and the request log (configuration and pending faults stay)."""
        self._state.reset()


@contextlib.contextmanager
def running_server(**config: Any) -> Iterator[ChatServer]:
    """Run a ``ChatServer`` on a free loopback port for the duration of the ``with`` block."""
    server = ChatServer(**config).start()
    try:
        yield server
    finally:
        server.stop()
