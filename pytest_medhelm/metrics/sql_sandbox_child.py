"""The child process of :mod:`pytest_medhelm.metrics.sql_sandbox`: runs one SQL query at a time, where nothing the
query does can reach the process that scores the run.

    python -I -S path/to/sql_sandbox_child.py MEMORY_BYTES HEAP_BYTES PARENT_PID

Standard library only (it runs isolated, ``-I -S``: no site-packages, no environment, no current directory on
the path, so a ~20 ms start). Its limits are set before the first query and cannot be undone by one:

* an address-space limit (``RLIMIT_AS``) and SQLite's own hard heap limit (process-wide, set here, before any
  authorizer, so that no later statement could change it: PRAGMA is refused);
* an allow-list authorizer: SELECT, reading the database's own tables, recursive CTEs and the pure functions of
  :data:`PURE_FUNCTIONS`; everything else (PRAGMA, ATTACH, writes, ``load_extension``, ``fts3_tokenizer``,
  ``zeroblob``, ``randomblob``, …) is refused;
* a read-only connection, a maximum length of any value (``SQLITE_LIMIT_LENGTH``), a progress handler that
  interrupts a query at its time limit, and a cap on the rows and on the bytes of a result.

Frames on stdin/stdout: a 4-byte big-endian length, then ``marshal`` data (plain tuples, strings, numbers: loading
it executes nothing). A request is ``(db_path, sql, time_limit, max_rows, max_bytes, one_row)``; a reply is
``("rows", [tuple, ...], ending)`` or ``("error", message, ending)``, ``ending`` true when the child exits after
it (a failed allocation may have left it in a half-done state). The end of stdin (the parent is gone) ends the
process, and on Linux the kernel also signals it when its parent dies.
"""

from __future__ import annotations

import marshal
import os
import signal
import sqlite3
import struct
import sys
import time

try:
    import resource
except ImportError:  # pragma: no cover - not on POSIX
    resource = None  # type: ignore[assignment]  # no module here: None, which the limits test before use

#: functions a query may call: deterministic, side-effect free, and unable to allocate beyond the value length
#: limit (not zeroblob/randomblob, which exist to make large values, nor fts3_tokenizer or load_extension)
PURE_FUNCTIONS = frozenset("""
abs avg count group_concat max min sum total string_agg
char coalesce format glob hex ifnull iif instr length like likelihood likely lower ltrim nullif
octet_length printf quote replace round rtrim sign substr substring trim typeof unhex unicode unlikely upper
date time datetime julianday strftime unixepoch timediff current_date current_time current_timestamp
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi pow power
radians sin sinh sqrt tan tanh trunc
""".split())

#: the authorizer's actions that a read-only query needs (each further checked below)
_SELECT, _READ, _FUNCTION, _RECURSIVE = (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                                         getattr(sqlite3, "SQLITE_RECURSIVE", 33))
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema"})
#: value length (bytes) and SQL text length that a query may reach
MAX_VALUE_BYTES = 1_000_000
_PROGRESS_STEPS = 1_000


class Refused(Exception):
    """A query stopped by a limit, with the reason shown to the user."""


def _authorizer(tables: frozenset[str], refused: list[str]):
    def authorize(action: int, arg1, arg2, database, _source) -> int:
        if action == _SELECT or action == _RECURSIVE:
            return sqlite3.SQLITE_OK
        # a column of the database's own tables ("main"), or of a CTE or subquery (no database): not of a virtual
        # table such as pragma_*() or json_each() (those are "main" too, but not tables of the file)
        if action == _READ and (database is None or (database == "main" and str(arg1).lower() in tables)):
            return sqlite3.SQLITE_OK
        if action == _FUNCTION and arg2 is not None and arg2.lower() in PURE_FUNCTIONS:
            return sqlite3.SQLITE_OK
        refused.append(_describe(action, arg1, arg2))
        return sqlite3.SQLITE_DENY

    return authorize


_ACTIONS = """CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW
CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE DROP_TEMP_TRIGGER
DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT TRANSACTION UPDATE ATTACH DETACH ALTER_TABLE REINDEX
ANALYZE CREATE_VTABLE DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE""".split()
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ")
                 for n in _ACTIONS if hasattr(sqlite3, f"SQLITE_{n}")}


def _describe(action: int, arg1, arg2) -> str:
    if action == _FUNCTION:
        return f"the function {arg2}()"
    if action == _READ:
        return f"reading {arg1}"
    if action == sqlite3.SQLITE_UPDATE and str(arg1).startswith("sqlite_"):
        return "a table-valued function"  # (pragma_*(), json_each(): SQLite writes their schema first)
    name = _ACTION_NAMES.get(action, f"action {action}")
    return f"{name} {arg1}" if arg1 else name


_TABLES: dict[str, frozenset[str]] = {}


def _connect(db_path: str) -> sqlite3.Connection:
    if not os.path.isfile(db_path):
        raise Refused(f"EHRSQL database not found: {db_path}")
    uri = "file:" + os.path.abspath(db_path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
    tables = _TABLES.get(db_path)
    if tables is None:
        names = connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        tables = _TABLES[db_path] = frozenset(str(n).lower() for (n,) in names) | _SCHEMA_TABLES
    # temporary b-trees (DISTINCT, ORDER BY, a recursive CTE's queue) in memory, within the heap limit: never in
    # temp files, which no memory limit bounds (set by us, before the authorizer: the query can run no PRAGMA)
    connection.execute("PRAGMA temp_store=MEMORY")
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def _size(row: tuple) -> int:
    return sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row) + 16


def run(db_path: str, sql: str, time_limit: float, max_rows: int, max_bytes: int, one_row: bool) -> list[tuple]:
    connection = _connect(db_path)
    refused: list[str] = []
    connection.set_authorizer(_authorizer(_TABLES[db_path], refused))
    deadline = time.monotonic() + time_limit
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
    try:
        cursor = connection.execute(sql)
        if one_row:
            row = cursor.fetchone()
            return [] if row is None else [row]
        rows: list[tuple] = []
        size = 0
        while batch := cursor.fetchmany(1_000):
            rows.extend(batch)
            size += sum(_size(r) for r in batch)
            if len(rows) > max_rows:
                raise Refused(f"more than {max_rows} rows")
            if size > max_bytes:
                raise Refused(f"a result larger than {max_bytes // 1_000_000} MB")
        return rows
    except (sqlite3.Error, sqlite3.Warning) as exc:
        if refused:  # (the last refusal is the statement's own: a virtual table's schema reads come first)
            raise Refused(f"not allowed in the EHRSQL sandbox: {refused[-1]}") from None
        if time.monotonic() > deadline and "interrupt" in str(exc).lower():
            raise Refused(f"time limit of {time_limit:g} s exceeded") from None
        raise Refused(str(exc) or type(exc).__name__) from None
    finally:
        connection.close()


def _limit_memory(memory_bytes: int, heap_bytes: int) -> None:
    if resource is not None:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            # no file may grow at all: a temp file SQLite would still open fails with EFBIG (an SQL error) instead
            # of filling the disk (SIGXFSZ ignored, so that the write fails rather than the process)
            if hasattr(signal, "SIGXFSZ"):
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        except (ValueError, OSError):  # pragma: no cover - a platform that refuses it (macOS): SQLite's limit holds
            pass
    # SQLite's heap limit is per process: set here, by us, before any query (which can never run PRAGMA)
    sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit={int(heap_bytes)}").close()


def _stop_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, 15, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGTERM
        except (OSError, AttributeError):  # pragma: no cover
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


def _read_frame(stream) -> bytes | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    (length,) = struct.unpack(">I", header)
    data = stream.read(length)
    return data if len(data) == length else None


def main() -> int:
    memory_bytes, heap_bytes, parent_pid = (int(a) for a in sys.argv[1:4])
    _stop_with_parent(parent_pid)
    _limit_memory(memory_bytes, heap_bytes)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (frame := _read_frame(stdin)) is not None:
        recycle = False
        reply: tuple[str, object]  # ("rows", the rows) or ("error", the reason)
        try:
            reply = ("rows", run(*marshal.loads(frame)))
        except Refused as exc:
            reply = ("error", str(exc))
        except MemoryError:
            megabytes = memory_bytes // 1_000_000
            reply = ("error", f"the memory limit of {megabytes} MB was exceeded (address space; SQLite's heap, "
                              f"temporary storage included, at most {heap_bytes // 1_000_000} MB)")
            recycle = True
        except Exception as exc:  # noqa: BLE001 - SQL text sqlite3 cannot take (a NUL, a lone surrogate): its item's
            reply = ("error", f"{type(exc).__name__}: {exc}")  # error, not the end of the sandbox
        try:
            data = marshal.dumps((*reply, recycle))
        except (ValueError, MemoryError):
            data, recycle = marshal.dumps(("error", "a result that cannot be returned", True)), True
        stdout.write(struct.pack(">I", len(data)) + data)
        stdout.flush()
        if recycle:  # whatever half-done state a failed allocation left: the next query gets a fresh process
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
