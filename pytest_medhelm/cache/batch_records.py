"""The batches a run submitted (``--medhelm-batch``), recorded in the cache directory until their results are in
the cache: a later run collects a recorded batch instead of paying for it twice (:mod:`pytest_medhelm.sending.batching`
writes and reads them)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_medhelm.cache.store import CacheRefused, read_private_text, write_private_text


@dataclass
class BatchRecord:
    batch_id: str
    #: where it was submitted (the endpoint's base URL) and for which model (a batch holds one model's requests)
    base: str
    model: str
    #: the cache keys of its requests (its lines' custom_id)
    keys: list[str] = field(default_factory=list)
    submitted: float = field(default_factory=time.time)


class BatchRecords:
    """One small JSON file per submitted batch under ``<cache dir>/batches/`` (0600 in a 0700 folder; no prompt
    text, only cache keys and ids): written as soon as the batch exists, removed once its results are stored.
    A file that cannot be read is skipped and named once (``problems``): a cache directory never stops a run."""

    def __init__(self, cache_dir: Path) -> None:
        self.folder = Path(cache_dir) / "batches"
        self.problems: list[str] = []

    def path(self, batch_id: str) -> Path:
        """The record file of ``batch_id``."""
        return self.folder / f"{hashlib.sha256(batch_id.encode('utf-8')).hexdigest()[:24]}.json"

    def save(self, record: BatchRecord) -> None:
        write_private_text(self.path(record.batch_id), json.dumps(asdict(record)))

    def remove(self, batch_id: str) -> None:
        self.path(batch_id).unlink(missing_ok=True)

    def pending(self, base: str, model: str) -> list[BatchRecord]:
        """The recorded batches submitted to ``base`` for ``model`` whose results were not stored yet."""
        out: list[BatchRecord] = []
        if not self.folder.is_dir():
            return out
        for path in sorted(self.folder.glob("*.json")):
            try:
                data = json.loads(read_private_text(path))  # no link followed; the user's own file only
                record = BatchRecord(batch_id=data["batch_id"], base=data["base"], model=data["model"],
                                     keys=list(data["keys"]), submitted=float(data["submitted"]))
                if not (isinstance(record.batch_id, str) and all(isinstance(k, str) for k in record.keys)):
                    raise TypeError("batch_id and keys must be strings")
            except (OSError, ValueError, KeyError, TypeError, CacheRefused) as exc:
                problem = f"{path}: not a batch record ({type(exc).__name__}: {exc}); ignored"
                if problem not in self.problems:
                    self.problems.append(problem)
                continue
            if record.base == base and record.model == model:
                out.append(record)
        return out
