"""A model's SQL run where it cannot reach the run: a small child process per pytest process, recycled.

A query runs in :mod:`pytest_medhelm.metrics.sql_sandbox_child` (its limits, authorizer and protocol are described
there), never in the process that scores items, caches answers and keeps the budget: SQLite settings are
per-process (``PRAGMA hard_heap_limit`` would cap every connection of pytest, ``temp_store_directory`` would move
them all), so only another process keeps a query's effects to itself. Here:

* one child serves the queries of this process, one at a time (its start costs ~20 ms; a fresh process per query
  would cost that ~3,600 times on EHRSQL's 1,792 items), and is replaced after :data:`RECYCLE_AFTER` queries, after
  any query that hit its memory limit, and whenever it stops answering;
* a wall-clock deadline (the query's time limit plus :data:`GRACE_S`) kills a child that overruns it, whatever it
  is doing: nothing a query does outlives the query's own deadline;
* the child is ended when this process ends (its stdin closes; on Linux the kernel signals it too);
* a time budget: the queries of this process together may take :data:`TIME_BUDGET_S` seconds (each up to its own
  limit); once it is spent, every later query is refused unrun with :class:`BudgetSpent`, which makes its item an
  error saying so (a whole EHRSQL run of slow queries would otherwise take hours: 1,792 items × 10 s each).
"""

from __future__ import annotations

import atexit
import marshal
import os
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

#: address space of the child (bytes): Python (~30 MB), the query's rows (``MAX_RESULT_BYTES``) and SQLite's heap
MEMORY_LIMIT = 768_000_000
#: SQLite's own heap in the child (sorting, temporary b-trees, values)
HEAP_LIMIT = 256_000_000
#: bytes of a result (the sum of its values' lengths) a query may return
MAX_RESULT_BYTES = 64_000_000
#: queries one child serves before it is replaced by a fresh one
RECYCLE_AFTER = 500
#: seconds beyond a query's time limit before the child is killed (its start, reading the result)
GRACE_S = 5.0
#: seconds the queries of one process may take together (the gold queries and the answers' alike)
TIME_BUDGET_S = 1800.0

_CHILD = Path(__file__).with_name("sql_sandbox_child.py")


class SandboxError(Exception):
    """The query did not produce a result; the message says why (SQL error, refused, limit, killed)."""


class BudgetSpent(SandboxError):
    """The process's time budget for queries is spent: the query was not run (no measurement, not a wrong answer)."""


class SqlSandbox:
    def __init__(self, memory_limit: int = MEMORY_LIMIT, heap_limit: int = HEAP_LIMIT,
                 recycle_after: int = RECYCLE_AFTER, time_budget: float = TIME_BUDGET_S) -> None:
        self.memory_limit = memory_limit
        self.time_budget = time_budget
        self.spent_s = 0.0  # seconds the queries took so far, the budget's account
        self.heap_limit = heap_limit
        self.recycle_after = recycle_after
        self._proc: subprocess.Popen | None = None
        self._served = 0
        self._lock = threading.Lock()
        self.started = 0  # children started so far (measured by the tests and the speed script)

    def run(self, db_path: str, sql: str, time_limit: float, max_rows: int, max_bytes: int = MAX_RESULT_BYTES,
            one_row: bool = False) -> list[tuple]:
        with self._lock:
            left = self.time_budget - self.spent_s
            if left <= 0:
                raise BudgetSpent(self._spent("the query was not run"))
            own_limit, time_limit = time_limit, min(time_limit, left)  # (the last query may use what is left)
            request = marshal.dumps((str(db_path), sql, float(time_limit), int(max_rows), int(max_bytes),
                                     bool(one_row)))
            started = time.monotonic()
            try:
                return self._serve(request, time_limit)
            except SandboxError:
                if time_limit < own_limit and self.spent_s + time.monotonic() - started >= self.time_budget:
                    # stopped by what was left of the budget, not by its own limit: no measurement either
                    raise BudgetSpent(self._spent(f"the query was stopped when it ran out, before its own limit of "
                                                  f"{own_limit:g} s")) from None
                raise
            finally:
                self.spent_s += time.monotonic() - started

    def _spent(self, what: str) -> str:
        return (f"the SQL sandbox's time budget is spent ({self.spent_s:,.0f} s of queries in this process, the most "
                f"is {self.time_budget:,.0f} s: pytest_medhelm.metrics.sql_sandbox.TIME_BUDGET_S): {what}")

    def _serve(self, request: bytes, time_limit: float) -> list[tuple]:
        """One query through the child (the caller holds the lock)."""
        proc = self._child()
        deadline = time.monotonic() + time_limit + GRACE_S
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(struct.pack(">I", len(request)) + request)
            proc.stdin.flush()
            header = _read_exact(proc.stdout.fileno(), 4, deadline)
            (length,) = struct.unpack(">I", header)
            reply = marshal.loads(_read_exact(proc.stdout.fileno(), length, deadline))
        except TimeoutError:
            self._end_child()
            raise SandboxError(f"time limit of {time_limit:g} s exceeded (the query's process was killed)") \
                from None
        except (OSError, EOFError, ValueError, struct.error):
            code = self._end_child()
            raise SandboxError(f"the query's process ended without a result ({_exit_reason(code)})") from None
        kind, value, ending = reply
        self._served += 1
        if ending or self._served >= self.recycle_after:
            self._end_child()
        if kind == "rows":
            return value
        raise SandboxError(value)

    def close(self) -> None:
        with self._lock:
            self._end_child()

    def _child(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._end_child()
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_CHILD), str(self.memory_limit), str(self.heap_limit),
                 str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
                cwd="/" if os.name == "posix" else None)
            self._served = 0
            self.started += 1
        return self._proc

    def _end_child(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            return proc.wait(0.5)  # it ends by itself at the end of its input
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        return f"killed by signal {-code}: probably its memory limit of {MEMORY_LIMIT // 1_000_000} MB"
    return f"exit status {code}"


_SANDBOX: SqlSandbox | None = None
_SANDBOX_LOCK = threading.Lock()


def sandbox() -> SqlSandbox:
    """This process's sandbox (started at first use, ended at exit)."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            _SANDBOX = SqlSandbox()
            atexit.register(_SANDBOX.close)
        return _SANDBOX
