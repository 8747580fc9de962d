"""Where a benchmark's files come from, and finding them on this machine.

Lookup order for each file of a benchmark:

1. ``--medhelm-data-dir DIR`` given: ``DIR/<slug>/<file name>`` and nothing else (a fully offline run), except
   for a benchmark that names its own ``data_dir``: there its files are found when DIR does not hold them;
2. a benchmark's own ``data_dir`` (a custom benchmark shipped with its data): ``<data_dir>/<file name>`` only;
3. the user data cache (``$MEDHELM_DATA_HOME`` or ``~/.cache/pytest-medhelm/data``), ``<slug>/<file name>``,
   verified against the pinned sha256 the first time it is used;
4. a public file with a pinned URL is downloaded once into that cache, verified, and used from there.

Wherever a file is found, a run also checks it against its pinned sha256 every time (it passes a
:class:`~pytest_medhelm.data.verification.DataVerification`; cheap, see there). A loader called on its own, as the
tests do with synthetic files, checks nothing beyond the rules above.

A file that cannot be found is a :class:`DataMissing` whose message says which file to put where and where it
comes from; the benchmark's items are then skipped with that reason.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_medhelm.data.errors import DataMissing


class Verifier(Protocol):
    """Checks a found file against its pin (:class:`pytest_medhelm.data.verification.DataVerification`)."""

    def check(self, benchmark: FileSet, file: DataFile, path: Path) -> None: ...


class FileSet(Protocol):
    """What :func:`resolve_files` needs of a benchmark: a :class:`~pytest_medhelm.catalogue.definition.Benchmark`
    is one, and so is any other set of pinned files kept under ``<DIR>/<slug>/`` (HELM's judge prompts)."""

    # read-only: the benchmarks and file sets are frozen dataclasses
    @property
    def slug(self) -> str: ...
    @property
    def files(self) -> Sequence[DataFile]: ...
    @property
    def data_help(self) -> str: ...
    # (optionally ``data_dir``: a benchmark's own folder of its files)


@dataclass(frozen=True)
class DataFile:
    #: the file name as published upstream; the data directory holds it as ``<slug>/<name>``
    name: str
    #: pinned download URL (a commit or revision), or "" for gated/private files the user supplies
    url: str = ""
    sha256: str = ""
    #: what the file is and what it must contain (shown when it is missing)
    description: str = ""
    #: a folder of files rather than one file (read as a whole; never downloaded)
    is_dir: bool = False
    #: the benchmark can run without it (an alternative format of another file)
    optional: bool = False
    #: an optional file that, when found, stands in for the file of this name (which is then not needed); list it
    #: before that file in ``Benchmark.files``
    stands_in_for: str = ""
    #: the folder the file lives in under the data directory and the data cache, when it is not the benchmark's
    #: slug: pinned files several benchmarks share (medhelm 0.8.0's templates: ``DIR/medhelm08_templates/``)
    folder: str = ""

    def folder_of(self, benchmark: FileSet) -> str:
        """``<folder>`` of ``DIR/<folder>/<name>``: :attr:`folder`, else the benchmark's slug."""
        return self.folder or benchmark.slug


def user_data_home() -> Path:
    env = os.environ.get("MEDHELM_DATA_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-medhelm" / "data"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _missing_message(benchmark: FileSet, file: DataFile, data_dir: Path | None, why: str = "") -> str:
    folder = file.folder_of(benchmark)
    where = (data_dir / folder / file.name) if data_dir else Path("<DIR>") / folder / file.name
    parts = [f"{benchmark.slug}: data file {file.name!r} not found" + (f" ({why})" if why else "")]
    own_dir = getattr(benchmark, "data_dir", None)
    own = f"{Path(own_dir) / file.name} (the benchmark's data_dir)" if own_dir else ""
    if own and data_dir is None:
        parts.append(f"expected at {own}")
    else:
        parts.append(f"expected at {where}" + ("" if data_dir else " with --medhelm-data-dir DIR")
                     + (f" or at {own}" if own else ""))
    if file.url:
        parts.append(f"source: {file.url}" + (f" (sha256 {file.sha256})" if file.sha256 else ""))
    if file.description:
        parts.append(file.description)
    if benchmark.data_help:
        parts.append(benchmark.data_help)
    return "; ".join(parts)


def _download(url: str, target: Path, sha256: str) -> None:
    import urllib.request

    from pytest_medhelm.data import gdrive

    # Google Drive answers a large file's URL with a confirmation page: gdrive.urlopen gets past it
    urlopen = gdrive.urlopen if gdrive.is_drive_url(url) else urllib.request.urlopen
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as out, urlopen(url, timeout=60) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)
        actual = sha256_of(Path(tmp_name))
        if sha256 and actual != sha256:
            raise DataMissing(f"download of {url} has sha256 {actual}, expected {sha256}")
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def resolve_files(benchmark: FileSet, data_dir: Path | None, download: bool = True,
                  verification: Verifier | None = None) -> Mapping[str, Path]:
    """Find every file of ``benchmark``; raise :class:`DataMissing` naming the first one absent. With
    ``verification``, a file that differs from its pinned sha256 is a
    :class:`~pytest_medhelm.data.errors.DataError` (unless accepted there)."""
    found: dict[str, Path] = {}
    for file in benchmark.files:
        if any(alt.stands_in_for == file.name and alt.name in found for alt in benchmark.files):
            continue
        path = _resolve_one(benchmark, file, data_dir, download)
        if path is not None:
            if verification is not None:  # in the data home too: a file edited after its first check
                verification.check(benchmark, file, path)
            found[file.name] = path
    return found


def _resolve_one(benchmark: FileSet, file: DataFile, data_dir: Path | None, download: bool) -> Path | None:
    own_dir = getattr(benchmark, "data_dir", None)
    own = Path(own_dir) / file.name if own_dir else None
    if data_dir is not None or own is not None:
        for path in (data_dir / file.folder_of(benchmark) / file.name if data_dir is not None else None, own):
            if path is not None and path.exists():
                return path
        if file.optional:
            return None
        raise DataMissing(_missing_message(benchmark, file, data_dir))

    path = user_data_home() / file.folder_of(benchmark) / file.name
    verified = path.with_name(path.name + ".sha256-ok")
    if path.exists():
        if not file.sha256 or verified.exists():
            return path
        if sha256_of(path) == file.sha256:
            verified.touch()
            return path
        raise DataMissing(_missing_message(benchmark, file, None, f"{path} does not match the pinned sha256"))
    if file.optional:
        return None
    if not (download and file.url and not file.is_dir):
        raise DataMissing(_missing_message(benchmark, file, None))
    try:
        _download(file.url, path, file.sha256)
    except DataMissing:
        raise
    except Exception as exc:  # noqa: BLE001 - network down, HTTP error: the run goes on with this benchmark skipped
        raise DataMissing(_missing_message(benchmark, file, None, f"download failed: {exc}")) from None
    if file.sha256:
        verified.touch()
    return path
