"""The test server's configuration, fault queue, counters and request log, shared between the event-loop thread
(which serves) and the test's thread (which reads and reconfigures)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from pytest_medhelm.testing.server.behaviour import (
    DEFAULT_ANSWER,
    DEFAULT_MODELS,
    Answering,
    AnswerSpec,
    Fault,
    Script,
    validate,
)
from pytest_medhelm.testing.server.reasoning import Thinking


class ServerState:
    """Configuration, fault queue, counters and request log behind one lock.

    The event loop thread writes and the test thread reads (or reconfigures) concurrently; every access goes
    through ``_lock`` and readers get copies.
    """

    def __init__(self, **config: Any) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._answer = DEFAULT_ANSWER
        self._rules: tuple[tuple[str, str], ...] = ()
        self._script: Script | None = None
        self._latency = 0.0
        self._faults: deque[Fault] = deque()
        self._fail_matching: tuple[tuple[str, Fault], ...] = ()
        self._api_key: str | None = None
        self._models: tuple[str, ...] = DEFAULT_MODELS
        self._stop_after: int | None = None
        self._log_requests = True
        self._reply_shape = "standard"
        self._reasoning_tokens = 0
        self._reasoning_shape = "hidden"
        self._thinking_text = ""
        self.stopping = False
        self._reset_counters()
        self.configure(**config)

    def _reset_counters(self) -> None:
        self._count = 0
        self._answered = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._by_status: dict[str, int] = {}
        self._log: list[dict] = []

    # -- configuration -----------------------------------------------------------------------------------------

    def configure(self, **config: Any) -> None:
        values = validate(config)
        with self._lock:
            for key, value in values.items():
                if key == "faults":
                    self._faults = deque(value)
                elif key == "add_faults":
                    self._faults.extend(value)
                else:
                    setattr(self, f"_{key}", value)

    def set_answer(self, answer: AnswerSpec) -> None:
        # One argument covering the three ways to script answers keeps tests short; each form replaces the
        # previous policy entirely so that "what answers now" never depends on earlier calls.
        if isinstance(answer, str):
            self.configure(answer=answer, rules=(), script=None)
        elif isinstance(answer, Mapping):
            self.configure(rules=answer, script=None)
        elif callable(answer):
            self.configure(script=answer)
        else:
            raise ValueError(f"set_answer takes a string, a mapping or a callable, got {answer!r}")

    def describe(self) -> dict:
        with self._lock:
            script = self._script
            return {
                "answer": self._answer,
                "rules": [list(r) for r in self._rules],
                "script": None if script is None else getattr(script, "__qualname__", repr(script)),
                "latency": self._latency,
                "faults": [f.to_json() for f in self._faults],
                "fail_matching": {k: f.to_json() for k, f in self._fail_matching},
                "api_key_set": self._api_key is not None,
                "models": list(self._models),
                "stop_after": self._stop_after,
                "log_requests": self._log_requests,
                "reply_shape": self._reply_shape,
                "reasoning_tokens": self._reasoning_tokens,
                "reasoning_shape": self._reasoning_shape,
                "thinking_text": self._thinking_text,
            }

    @property
    def models(self) -> tuple[str, ...]:
        with self._lock:
            return self._models

    @property
    def api_key(self) -> str | None:
        with self._lock:
            return self._api_key

    # -- per-request bookkeeping (event loop thread) -----------------------------------------------------------

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def arrive(self, record: dict) -> tuple[int, Answering]:
        """Count and log a chat request; returns its 1-based arrival number and the configuration to apply."""
        with self._lock:
            self._count += 1
            record["n"] = self._count
            if self._log_requests:
                self._log.append(record)
            self._arrived.notify_all()
            return self._count, self._answering()

    def answering(self) -> Answering:
        """The answer policy now, without counting a chat request (the batch endpoints answer their lines so)."""
        with self._lock:
            return self._answering()

    def _answering(self) -> Answering:  # (under the lock)
        return Answering(self._answer, self._rules, self._script, self._latency, self._api_key, self._stop_after,
                         self._reply_shape, Thinking(self._reasoning_tokens, self._reasoning_shape,
                                                     self._thinking_text))

    def take_fault(self, record: dict, text: str) -> Fault | None:
        """The fault for this request, if any, noted in its record at once (a held request shows it)."""
        with self._lock:
            fault = None
            if self._faults:
                fault = self._faults.popleft()
            else:
                for substring, candidate in self._fail_matching:
                    if substring in text:
                        fault = candidate
                        break
            if fault is not None and fault.kind != "ok":
                record["fault"] = fault.kind
            return fault

    def finish(self, record: dict, status: int | None, fault: str | None = None, answered: bool = False) -> None:
        with self._lock:
            record["status"] = status
            if fault is not None:
                record["fault"] = fault
            key = "disconnect" if status is None else str(status)
            self._by_status[key] = self._by_status.get(key, 0) + 1
            if answered:
                self._answered += 1

    # -- reading (any thread) ----------------------------------------------------------------------------------

    def requests(self) -> list[dict]:
        with self._lock:
            # Shallow copies: the server only ever updates top-level keys of a record after logging it.
            return [dict(r) for r in self._log]

    def stats(self) -> dict:
        with self._lock:
            return {
                "count": self._count,
                "answered": self._answered,
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "by_status": dict(self._by_status),
                "faults_pending": len(self._faults),
                "stopping": self.stopping,
            }

    def count(self) -> int:
        with self._lock:
            return self._count

    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def reset(self) -> None:
        """Zero the counters and the request log; configuration and pending faults stay."""
        with self._lock:
            in_flight = self._in_flight
            self._reset_counters()
            # Requests still being served will call leave(); keep the gauge consistent with them.
            self._in_flight = in_flight

    def wait_for_requests(self, n: int, timeout: float) -> None:
        with self._lock:
            if not self._arrived.wait_for(lambda: self._count >= n, timeout):
                raise TimeoutError(f"test server saw {self._count} chat requests, expected {n} within {timeout}s")
