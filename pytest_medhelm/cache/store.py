"""The answer cache: diskcache on disk, shared safely by the controller and every xdist worker, optionally backed
by a shared Redis (``--medhelm-cache-url``, :mod:`pytest_medhelm.cache.shared`).

A cache directory is untrusted input like any other: whoever can write into it could otherwise change what the run
sends or believes. So:

* values are JSON text (:mod:`~pytest_medhelm.cache.disk`), never pickles: reading the cache runs no code;
  a cache written with pickles by an earlier version is converted once, without unpickling anything that names a
  class or function;
* the directory must be owned by the user and, after it is made 0700, not writable by anyone else; its files are
  opened without following symbolic links and must be the user's own regular files; otherwise the run stops with a
  usage error naming the path (:class:`CacheRefused`), before anything is sent;
* every entry read (from disk or Redis) is checked to be one of ours (:func:`valid_entry`) before it is used: a
  malformed one is a miss, never an exception.

Entries hold patient text: the directory is 0700 and its files 0600. Only successful answers are stored; an error
is never cached. Modes (``--medhelm-cache``):

* ``on``: read and write;
* ``refresh``: ask again once per run: an entry counts only when this run wrote it (its ``run_id`` matches);
* ``off``: nothing persists across runs: the run uses a private temporary directory that is removed at the end.

diskcache writes each entry in one SQLite transaction, so a crash or Ctrl-C leaves every finished answer intact.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_medhelm.values import MAX_COST_USD, MAX_SECONDS, Completion, ModelError, count_ok, float_ok, split_thinking

CACHE_MODES = ("on", "off", "refresh")


@dataclasses.dataclass(frozen=True)
class Stored:
    """What one write stores: an answer (with the request it answers) under its key, or this run's error for it."""
    key: str
    result: Completion | ModelError
    request_json: dict[str, Any] | None = None


#: what keeps git (and tools that honour .gitignore) out of the cache directory, as pytest does for .pytest_cache
GITIGNORE_TEXT = "# Created by pytest-medhelm automatically: answers and prompts (patient text) stay out of git.\n*\n"
DB_NAME = "cache.db"  # diskcache.core.DBNAME, without importing diskcache to know it
#: how long a reader or writer waits for another process's lock on the database (SQLite's busy timeout)
LOCK_TIMEOUT_S = 60.0
#: up to this many keys, :meth:`AnswerCache.get_many` reads them one by one on the cache's open connection (about 7
#: µs each) rather than opening one for a query (about 80 µs)
FEW_KEYS = 16


class CacheRefused(Exception):
    """The cache directory (or a file in it) cannot be used safely, or cannot be read: the message names the path
    and what to do. A usage error at start-up (exit 4)."""


# ---------------------------------------------------------------------------------------------------------------
# ownership and modes


def _check_owned(path: Path, st: os.stat_result, what: str) -> None:
    uid = os.getuid()
    if st.st_uid != uid:
        raise CacheRefused(f"{what} {path} is owned by user id {st.st_uid}, not by you (user id {uid}): whoever "
                           "owns it could change the answers and the requests of your run; use a directory of "
                           "your own (--medhelm-cache-dir DIR)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheRefused(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}) and could "
                           "not be made private: others could change the answers and the requests of your run; "
                           "use a directory of your own (--medhelm-cache-dir DIR)")


def make_private_dir(path: Path, *, follow_symlinks: bool = False) -> Path:
    """``path`` (and missing parents) created, then made 0700: created with that mode (the umask can only narrow
    it) and chmod-ed, as an existing directory may be wider. It must then be the user's own and writable by nobody
    else; a symbolic link is refused unless ``follow_symlinks`` (the cache directory itself may be a link the user
    made, to an encrypted volume say; the folders inside it may not). Raises :class:`CacheRefused`.

    The process's umask is never changed: it is shared by every thread of the user's process, and a test or
    library thread creating files meanwhile would get ours."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(path) if follow_symlinks else os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheRefused(f"cache directory {path} is a symbolic link or not a directory; the folders inside the "
                           "cache directory are made by pytest-medhelm and are never links")
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)
            st = os.stat(path)
        except OSError:  # a file system without modes: judged by what it reports below
            pass
    _check_owned(path, st, "cache directory")
    return path


def _open_private(path: Path, flags: int) -> int:
    """A file descriptor of ``path`` opened without following a symbolic link, checked to be the user's own
    regular file, writable by nobody else; created 0600 with O_CREAT (never readable by others, not even for a
    moment). Raises :class:`CacheRefused`."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise CacheRefused(f"cache file {path} is a symbolic link: the cache's files are never links (it could "
                               "point the run at another user's file); remove it") from None
        raise CacheRefused(f"cache file {path} cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheRefused(f"cache file {path} is not a regular file; remove it")
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
            st = os.fstat(fd)
        _check_owned(path, st, "cache file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; it must be the user's own regular file (no link)
    and is made 0600 either way (files we write hold patient text). Raises :class:`CacheRefused`."""
    os.close(_open_private(Path(path), os.O_WRONLY | os.O_CREAT))


def read_private_text(path: Path) -> str:
    """The text of a file the run itself wrote into the cache directory, read without following a link and only
    when it is the user's own file. Raises :class:`CacheRefused` (a FileNotFoundError when it is absent)."""
    if not os.path.lexists(path):
        raise FileNotFoundError(str(path))
    with os.fdopen(_open_private(Path(path), os.O_RDONLY), "r", encoding="utf-8") as fh:
        return fh.read()


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a 0600 temporary file renamed over it), in a private folder."""
    path = Path(path)
    make_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


SIGNED_HEADER = "medhelm-signed-v1 "


def signed(key: bytes, text: str) -> str:
    """``text`` with a first line holding its HMAC-SHA256 under ``key`` (the run's coordination key)."""
    import hashlib
    import hmac

    return SIGNED_HEADER + hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest() + "\n" + text


def verified(key: bytes, data: str) -> str | None:
    """The text of ``data`` written by :func:`signed` with the same ``key``, or None (unsigned, signed by another
    run, or changed since): a file planted in the cache directory is not believed."""
    import hashlib
    import hmac

    header, newline, text = data.partition("\n")
    if not key or not newline or not header.startswith(SIGNED_HEADER):
        return None
    expected = hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()
    return text if hmac.compare_digest(header[len(SIGNED_HEADER):], expected) else None


def ensure_gitignore(directory: Path) -> None:
    """A ``.gitignore`` of ``*`` in the cache directory, made once (as pytest does for ``.pytest_cache``)."""
    try:
        fd = os.open(Path(directory) / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(GITIGNORE_TEXT)


def check_cache_dir(directory: Path) -> None:
    """At start-up: the cache directory is usable safely (see the module's docstring). Raises CacheRefused."""
    directory = make_private_dir(Path(directory), follow_symlinks=True)
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
        if os.path.lexists(directory / name):
            create_private_file(directory / name)


# ---------------------------------------------------------------------------------------------------------------
# what an entry must look like to be used

#: what Completion.to_cache writes: its fields but "cached" (which says how this run got it)
_COMPLETION_FIELDS = {f.name for f in dataclasses.fields(Completion)} - {"cached"}


def valid_completion(data: Any) -> bool:
    """Whether ``data`` is a stored answer of ours (:meth:`Completion.to_cache`): its fields, of their types, its
    numbers within the bounds a reply's are held to (:mod:`pytest_medhelm.sending.replies`: a token count at most
    10^9, a cost and a latency finite and >= 0): an entry with ``tokens_in`` of ``1e308`` is a miss, asked again."""
    return (isinstance(data, dict) and set(data) <= _COMPLETION_FIELDS and isinstance(data.get("text"), str)
            and count_ok(data.get("tokens_in", 0)) and count_ok(data.get("tokens_out", 0))
            and float_ok(data.get("latency_s", 0.0), MAX_SECONDS)
            and (data.get("cost_usd") is None or float_ok(data["cost_usd"], MAX_COST_USD))
            and (data.get("finish_reason") is None or isinstance(data["finish_reason"], str))
            and isinstance(data.get("extra", {}), dict)
            and (data.get("reasoning_tokens") is None or count_ok(data["reasoning_tokens"]))
            and isinstance(data.get("thinking", ""), str))


def valid_entry(entry: Any) -> bool:
    """Whether ``entry`` (read from disk or from the shared cache) is an answer entry this package wrote."""
    return (isinstance(entry, dict) and valid_completion(entry.get("completion"))
            and isinstance(entry.get("run_id", ""), str)
            and (entry.get("request") is None or isinstance(entry["request"], dict)))


def valid_error(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("model"), str) and isinstance(data.get("message"), str)
            and (data.get("status") is None or (count_ok(data["status"]) and data["status"] < 1000)))


# ---------------------------------------------------------------------------------------------------------------


class AnswerCache:
    """The run's answers by request key. ``shared_url``: a shared cache behind this one (``redis://...``): a local
    miss is looked up there (and a hit stored here too), every new answer is written to both."""

    def __init__(self, directory: Path, mode: str = "on", run_id: str = "", shared_url: str | None = None) -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {CACHE_MODES}, got {mode!r}")
        self.directory = make_private_dir(Path(directory), follow_symlinks=True)
        ensure_gitignore(self.directory)
        self.mode = mode
        self.run_id = run_id
        #: (converted, dropped) entries of an earlier version's pickled cache, converted by this process
        self.migrated: tuple[int, int] = (0, 0)
        db_path = self.directory / DB_NAME
        # SQLite creates its -wal and -shm files with the mode of the database file, so an empty 0600 file made
        # before diskcache opens it (SQLite takes an empty file for a new database) keeps them all private
        check_cache_dir(self.directory)
        create_private_file(db_path)
        self._cache = self._open(db_path)
        self.shared = None
        if shared_url:
            from pytest_medhelm.cache.shared import SharedCache

            self.shared = SharedCache(shared_url)

    def _open(self, db_path: Path) -> Any:
        import diskcache

        from pytest_medhelm.cache import disk as cache_disk

        # what a read refuses with is the exception of this very module (not one imported again by name: a host
        # that re-imports modules, pytester's in-process runs, would make it another class that no except matches)
        self._foreign_entry = cache_disk.ForeignEntry
        try:
            if cache_disk.has_foreign_rows(str(db_path)):
                self.migrated = cache_disk.migrate_pickled_rows(str(db_path))
            # eviction off: a size-limited cache would silently drop answers someone paid for
            return diskcache.Cache(str(self.directory), disk=cache_disk.JSONDisk, eviction_policy="none",
                                   size_limit=2**62, disk_min_file_size=2**40, timeout=LOCK_TIMEOUT_S)
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            raise CacheRefused(f"the answer cache {db_path} cannot be read ({exc}); it is damaged or not a "
                               f"pytest-medhelm cache: move it away, or delete {self.directory} to start an "
                               "empty cache") from None

    # --------------------------------------------------------------------------------------------- reading
    def _read(self, key: str) -> Any:
        try:
            return self._cache.get(key)
        except self._foreign_entry:
            return None  # never decoded: a miss

    def _usable(self, entry: Any) -> bool:
        if not valid_entry(entry):
            return False
        return self.mode != "refresh" or entry.get("run_id") == self.run_id

    def get(self, key: str) -> Completion | None:
        """The answer held for ``key``: here, else in the shared cache (copied here); None without one."""
        found = self.get_here(key)
        if found is None:
            entry = self._from_shared([key]).get(key)
            found = None if entry is None else self._completion(entry)
        return found

    def get_here(self, key: str) -> Completion | None:
        """The answer held for ``key`` in this directory only, not in the shared cache: what an xdist worker polls
        for while the controller sends its answer (the controller looked the shared cache up for every planned
        answer and copied what it found here; a Redis round trip at each poll would only slow the wait)."""
        entry = self._read(key)
        return self._completion(entry) if self._usable(entry) else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        """The answers held for ``keys``, each as :meth:`get` finds it (here, else in the shared cache, copied
        here), read in a few queries instead of one (and one Redis round trip) per key: a run's start looks up
        every planned answer. Keys without an answer are left out."""
        from pytest_medhelm.cache.disk import read_many

        wanted = list(dict.fromkeys(keys))
        if len(wanted) <= FEW_KEYS:  # (a judge's few verdicts for one answer) the open connection is cheaper
            local = {key: self._read(key) for key in wanted}
        else:
            local = read_many(str(self.directory / DB_NAME), wanted, LOCK_TIMEOUT_S)
        entries = {key: entry for key, entry in local.items() if self._usable(entry)}
        entries.update(self._from_shared([key for key in wanted if key not in entries]))
        return {key: self._completion(entry) for key, entry in entries.items()}

    def _from_shared(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The usable entries the shared cache holds for ``keys`` (none without a shared cache), copied here: the
        next read, and the workers beside us, find them here."""
        if self.shared is None or not keys:
            return {}
        found = {key: entry for key, entry in self.shared.get_many(keys).items() if self._usable(entry)}
        if found:
            with self._cache.transact():  # (one commit)
                for key, entry in found.items():
                    self._cache.set(key, entry)
        return found

    def _completion(self, entry: dict[str, Any]) -> Completion:
        completion = Completion.from_cache(entry["completion"])
        if "thinking" not in entry["completion"] and "think>" in completion.text:
            # an answer cached before the thinking was split off (its request's key unchanged: a plain model at a
            # URL): split now, as a fresh reply is (pytest_medhelm.sending.reasoning)
            completion.text, completion.thinking = split_thinking(completion.text)
        # "cached" means: not asked in this run (an answer the answers-ahead phase just fetched is fresh)
        completion.cached = entry.get("run_id") != self.run_id
        return completion

    # --------------------------------------------------------------------------------------------- writing
    def put(self, key: str, completion: Completion, request_json: dict[str, Any] | None = None) -> None:
        self.put_many([Stored(key, completion, request_json)])

    def put_many(self, stored: list[Stored]) -> None:
        """Answers (with the requests they answer) and this run's errors, in one transaction: one commit for all."""
        answers = []
        with self._cache.transact():
            for one in stored:
                if isinstance(one.result, ModelError):
                    self.put_error(one.key, one.result)
                    continue
                entry: dict[str, Any] = {"completion": one.result.to_cache(), "run_id": self.run_id,
                                         "stored": time.time()}
                if one.request_json is not None:
                    entry["request"] = one.request_json
                self._cache.set(one.key, entry)
                answers.append((one.key, entry))
        if self.shared is not None:
            for key, entry in answers:
                self.shared.put(key, entry)

    # Failures of this run: kept so an item reports the provider's message instead of asking again. Scoped to
    # the run id and removed at the end of the run, so an error is never served to a later run (nor shared).
    def put_error(self, key: str, error: ModelError) -> None:
        self._cache.set(f"error:{self.run_id}:{key}", error.to_json(), tag=f"error:{self.run_id}")

    def get_error(self, key: str) -> ModelError | None:
        data = self._read(f"error:{self.run_id}:{key}")
        return ModelError.from_json(data) if valid_error(data) else None

    def clear_errors(self) -> None:
        self._cache.evict(f"error:{self.run_id}")

    def close(self) -> None:
        self._cache.close()
        if self.shared is not None:
            self.shared.close()

    def __len__(self) -> int:
        return len(self._cache)
