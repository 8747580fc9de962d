"""The answer cache: diskcache on disk, shared safely by the controller and every xdist worker.

Entries hold patient text, so the directory is created private to the user (0700). Only successful answers are
stored; an error is never cached. Modes (``--medhelm-cache``):

* ``on``: read and write;
* ``refresh``: ask again once per run: an entry counts only when this run wrote it (its ``run_id`` matches);
* ``off``: nothing persists across runs: the run uses a private temporary directory that is removed at the end.

diskcache writes each entry in one SQLite transaction, so a crash or Ctrl-C leaves every finished answer intact.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable

from pytest_medhelm.values import Completion, ModelError

CACHE_MODES = ("on", "off", "refresh")


def make_private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created, then made 0700: created with that mode (the umask can only narrow
    it) and chmod-ed, as an existing directory may be wider. The process's umask is never changed: it is shared by
    every thread of the user's process, and a test or library thread creating files meanwhile would get ours."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except OSError:  # not ours to change (a shared mount): still usable
        pass
    return path


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; make it 0600 either way (files we write hold patient
    text). ``O_CREAT`` with an explicit mode: never readable by others, not even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    try:
        os.chmod(path, 0o600)
    except OSError:  # pragma: no cover - a file of someone else's: diskcache will say so when it opens it
        pass


class AnswerCache:
    def __init__(self, directory: Path, mode: str = "on", run_id: str = "") -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {CACHE_MODES}, got {mode!r}")
        import diskcache  # deferred: only runs that call models pay for it

        self.directory = make_private_dir(Path(directory))
        self.mode = mode
        self.run_id = run_id
        # diskcache's SQLite file (DBNAME). SQLite creates its -wal and -shm files with the mode of the database
        # file, so an empty 0600 file made before diskcache opens it (SQLite takes an empty file for a new
        # database) keeps them all private without touching the umask
        create_private_file(self.directory / diskcache.core.DBNAME)
        # eviction off: a size-limited cache would silently drop answers someone paid for
        self._cache = diskcache.Cache(str(self.directory), eviction_policy="none", size_limit=2**62,
                                      # every value in the 0600 SQLite file, never in separate files
                                      disk_min_file_size=2**40,
                                      timeout=60)

    def _valid(self, entry: Any) -> bool:
        if not isinstance(entry, dict) or "completion" not in entry:
            return False
        return self.mode != "refresh" or entry.get("run_id") == self.run_id

    def get(self, key: str) -> Completion | None:
        entry = self._cache.get(key)
        if not self._valid(entry):
            return None
        completion = Completion.from_cache(entry["completion"])
        # "cached" means: not asked in this run (an answer the answers-ahead phase just fetched is fresh)
        completion.cached = entry.get("run_id") != self.run_id
        return completion

    def __contains__(self, key: str) -> bool:
        if self.mode == "refresh":
            return self._valid(self._cache.get(key))
        return key in self._cache

    def missing(self, keys: Iterable[str]) -> list[str]:
        return [k for k in keys if k not in self]

    def put(self, key: str, completion: Completion, request_json: dict[str, Any] | None = None) -> None:
        entry = {"completion": completion.to_cache(), "run_id": self.run_id, "stored": time.time()}
        if request_json is not None:
            entry["request"] = request_json
        self._cache.set(key, entry)

    # Failures of this run: kept so an item reports the provider's message instead of asking again. Scoped to
    # the run id and removed at the end of the run, so an error is never served to a later run.
    def put_error(self, key: str, error: ModelError) -> None:
        self._cache.set(f"error:{self.run_id}:{key}", error.to_json(), tag=f"error:{self.run_id}")

    def get_error(self, key: str) -> ModelError | None:
        data = self._cache.get(f"error:{self.run_id}:{key}")
        return ModelError.from_json(data) if isinstance(data, dict) else None

    def clear_errors(self) -> None:
        self._cache.evict(f"error:{self.run_id}")

    def close(self) -> None:
        self._cache.close()

    def __len__(self) -> int:
        return len(self._cache)
