"""How the answer cache stores its values: JSON text, never pickles.

diskcache's default :class:`diskcache.Disk` pickles every value that is not a plain string or number, and unpickles
whatever row it reads: whoever can put a row into ``cache.db`` runs code as the user reading it. :class:`JSONDisk`
writes every value as JSON text in the SQLite row itself and reads back only such rows: a row of any other kind (a
pickle, a file outside the database, a key that is not plain text) raises :class:`ForeignEntry` and is never
decoded. diskcache is imported by this module at its top: import it only when a cache is opened.

A cache written by an earlier version holds pickled rows. :func:`migrate_pickled_rows` converts them once, without
running any code: a pickle is read by an unpickler that resolves no global name at all, so it can build only
dicts, lists, strings, numbers, booleans and None (what our entries are made of); any other row is dropped.
"""

from __future__ import annotations

import io
import json
import pickle
import sqlite3
import time
from typing import Any

import diskcache
from diskcache.core import MODE_PICKLE, MODE_RAW, UNKNOWN


class ForeignEntry(Exception):
    """A row this cache did not write as JSON (a pickle, a file reference, a non-text key): never decoded."""


def to_json_text(value: Any) -> str:
    """``value`` as the JSON text stored (compact; NaN refused: it is not JSON and no entry of ours holds one)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def from_json_text(text: Any) -> Any:
    """The JSON value of a stored text. Raises :class:`ForeignEntry` for anything that is not valid JSON text
    (nesting deep enough to exhaust the parser included)."""
    if not isinstance(text, str):
        raise ForeignEntry(f"a value stored as {type(text).__name__}, not as JSON text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ForeignEntry(f"a value that is not JSON ({type(exc).__name__})") from None


class JSONDisk(diskcache.Disk):  # type: ignore[misc]  # (diskcache ships no types: its Disk is Any)
    """Values as JSON text inside the database row; keys as plain text. Reads refuse every other kind of row."""

    def put(self, key: Any) -> tuple[Any, bool]:
        if not isinstance(key, str):
            raise TypeError(f"answer cache keys are text, got {type(key).__name__}")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        if not raw or not isinstance(key, str):
            raise ForeignEntry("a key that is not plain text (diskcache would unpickle it)")
        return key

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[int, int, None, str]:
        if read:
            raise TypeError("the answer cache stores JSON values, not files")
        return 0, MODE_RAW, None, to_json_text(value)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        if mode != MODE_RAW or filename is not None:
            # a pickle (an old cache, or someone else's row) or a file outside the database: never opened
            raise ForeignEntry(f"a row of diskcache mode {mode} (not JSON text)")
        return from_json_text(value)


#: keys per query of :func:`read_many` (SQLite's oldest limit on a statement's parameters is 999)
READ_MANY_CHUNK = 500


def read_many(db_path: str, keys: list[str], timeout: float) -> dict[str, Any]:
    """The JSON values stored under ``keys`` in the database ``db_path``, as :meth:`diskcache.Cache.get` with
    :class:`JSONDisk` would read each (a plain-text key, not expired), in one query per :data:`READ_MANY_CHUNK`
    keys instead of one per key (2,000 lookups: 15-30 ms). A missing key is absent from the result; so is a row
    :class:`JSONDisk` refuses (:class:`ForeignEntry`: a pickle, a file, text that is not JSON)."""
    found: dict[str, Any] = {}
    if not keys:
        return found
    connection = sqlite3.connect(db_path, timeout=timeout)
    try:
        now = time.time()
        for start in range(0, len(keys), READ_MANY_CHUNK):
            chunk = keys[start:start + READ_MANY_CHUNK]
            rows = connection.execute(
                f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({','.join('?' * len(chunk))})"
                " AND (expire_time IS NULL OR expire_time > ?)", (*chunk, now))
            for key, mode, filename, value in rows:
                if not isinstance(key, str) or mode != MODE_RAW or filename is not None:
                    continue  # (JSONDisk.get and fetch refuse it: a miss)
                try:
                    found[key] = from_json_text(value)
                except ForeignEntry:
                    continue
    finally:
        connection.close()
    return found


# ---------------------------------------------------------------------------------------------------------------
# the one-time conversion of a cache written with pickles


class _NoGlobals(pickle.Unpickler):
    """An unpickler that resolves no name: a pickle can then only build the built-in containers and scalars
    (dict, list, tuple, set, str, bytes, int, float, bool, None); anything that names a class or a function (the
    way a pickle runs code) stops it."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused: a persistent id")


def _plain(value: Any) -> Any:
    """``value`` as JSON data (tuples become lists), or raise ValueError for anything else."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a non-finite number")
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise ValueError(f"a {type(value).__name__}")


def migrate_pickled_rows(db_path: str, timeout: float = 60.0) -> tuple[int, int]:
    """Convert the pickled value rows of the diskcache database ``db_path`` to JSON text, in one transaction;
    rows that cannot be converted safely (a value naming a class, kept in a separate file, a non-text key) are
    deleted. Returns (converted, dropped). Nothing is executed: see :class:`_NoGlobals`."""
    converted = dropped = 0
    connection = sqlite3.connect(db_path, timeout=timeout, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")  # one process converts; the others then find nothing to do
        rows = connection.execute(
            "SELECT rowid, value, filename, raw FROM Cache WHERE mode != ? OR filename IS NOT NULL OR raw = 0",
            (MODE_RAW,)).fetchall()
        for rowid, value, filename, raw in rows:
            text = None
            if raw and filename is None and isinstance(value, bytes):
                try:
                    text = to_json_text(_plain(_NoGlobals(io.BytesIO(value)).load()))
                except (pickle.UnpicklingError, ValueError, TypeError, EOFError, RecursionError, MemoryError,
                        IndexError, KeyError, AttributeError, OverflowError, UnicodeDecodeError):
                    text = None
            if text is None:
                connection.execute("DELETE FROM Cache WHERE rowid = ?", (rowid,))
                dropped += 1
            else:
                connection.execute("UPDATE Cache SET mode = ?, value = ?, size = 0 WHERE rowid = ?",
                                   (MODE_RAW, text, rowid))
                converted += 1
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    finally:
        connection.close()
    return converted, dropped


def has_foreign_rows(db_path: str, timeout: float = 60.0) -> bool:
    """Whether the database holds any row that :class:`JSONDisk` would not read (a pickled value above all)."""
    connection = sqlite3.connect(db_path, timeout=timeout)
    try:
        found = connection.execute("SELECT 1 FROM Cache WHERE mode != ? OR filename IS NOT NULL OR raw = 0 LIMIT 1",
                                   (MODE_RAW,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return False  # a new, empty database
        raise
    finally:
        connection.close()
    return found is not None


__all__ = ["ForeignEntry", "JSONDisk", "MODE_PICKLE", "from_json_text", "has_foreign_rows", "migrate_pickled_rows",
           "to_json_text"]
