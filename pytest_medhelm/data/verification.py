"""Checking a run's data files against their pinned sha256, so that "the same prompts as HELM" is never silently false.

A public benchmark's files are pinned (``DataFile.sha256``: the checksum of the upstream file at the pinned URL).
A file found under ``--medhelm-data-dir`` that differs from its pin (an updated upstream release, a file cut at a
row boundary, a local edit) is a :class:`~pytest_medhelm.data.errors.DataError` naming the file and both checksums;
the benchmark's items are errors, the other benchmarks run. Files without a pin (gated and private data the user
supplies, folders) are not checked; a public file without a pin is recorded (below).

``--medhelm-data-unverified SLUG`` (repeatable; ini ``medhelm_data_unverified``, one per line) accepts a different
version of that benchmark's files: the run goes on, and :meth:`DataVerification.record` says what was accepted,
for the results JSON's ``run.data_unverified``: ``{slug: {file name: {"expected": pinned, "actual": found}}}``.
A public file that has no pin (five downloads: MedQA's and MedMCQA's archives, MedDialog's two files, MedHallu's
parquet) is used and recorded there too, with ``"expected": null`` and a ``"reason"``: the run says that it was
not verified.

Hashing costs little next to a run (all 15 pinned files of the 13 public benchmarks, 20 MB, hash in about 0.02 s
from the page cache); each file is hashed once per process, remembered by (path, size, modification time).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_medhelm.data.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.data.sources import DataFile
    from pytest_medhelm.data.sources import FileSet as Benchmark

OPTION = "--medhelm-data-unverified"
#: why a public file with no pin is in ``run.data_unverified`` (its ``expected`` is null)
UNPINNED = "no sha256 is pinned for this public file: it was used unverified"

#: (resolved path, size, mtime_ns) -> sha256: a file is hashed once per process while it does not change
_HASHED: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The file's sha256, from the memo when its size and modification time are unchanged."""
    from pytest_medhelm.data.sources import sha256_of

    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    digest = _HASHED.get(key)
    if digest is None:
        digest = _HASHED[key] = sha256_of(Path(path))
    return digest


@dataclass
class DataVerification:
    """The run's check of its data files: which benchmarks may differ from their pins, and what did."""

    #: slugs whose files may differ from the pinned version (``--medhelm-data-unverified``)
    accepted: frozenset[str] = frozenset()
    #: slug -> file name -> {"expected": pinned sha256 (None: unpinned), "actual": sha256 found, "reason"?}: the
    #: accepted differences
    changed: dict[str, dict[str, dict[str, str | None]]] = field(default_factory=dict)

    @classmethod
    def of(cls, slugs: Iterable[str] | None) -> DataVerification:
        return cls(frozenset(slugs or ()))

    def check(self, benchmark: Benchmark, file: DataFile, path: Path) -> None:
        """Raise :class:`DataError` when ``path`` differs from ``file``'s pinned sha256, unless the benchmark is
        accepted (then the difference is recorded). Files without a pin and folders are not checked."""
        if file.is_dir or not path.is_file():
            return
        if not file.sha256:
            if file.url:  # a public download whose checksum this project does not know: used, and recorded so
                self.changed.setdefault(benchmark.slug, {})[file.name] = {
                    "expected": None, "actual": file_sha256(path), "reason": UNPINNED}
            return
        actual = file_sha256(path)
        if actual == file.sha256:
            return
        if benchmark.slug in self.accepted:
            self.changed.setdefault(benchmark.slug, {})[file.name] = {"expected": file.sha256, "actual": actual}
            return
        raise DataError(path, "", f"sha256 {actual} differs from the pinned {file.sha256} (the {benchmark.slug} "
                                  f"file published at {file.url or 'its pinned source'}): this is not the data HELM "
                                  f"evaluates on; put the pinned file there, or accept this version with "
                                  f"{OPTION} {benchmark.slug} (recorded in the results)")

    def record(self) -> dict[str, dict[str, dict[str, str | None]]]:
        """For the results JSON's ``run.data_unverified`` (empty when every checked file matched its pin)."""
        return {slug: dict(sorted(files.items())) for slug, files in sorted(self.changed.items())}
