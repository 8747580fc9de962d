"""Saved runs under ``<rootdir>/.medhelm/runs/``, numbered like pytest-benchmark's storage.

A saved run is a results JSON (the contract of docs/contract.md, ``schema_version`` 1) named
``NNNN_<name>.json``: ``NNNN`` is one more than the highest number already there (``0001_base.json``,
``0002_autosave.json``, ...), ``<name>`` the sanitized ``--medhelm-save`` name (``autosave`` for
``--medhelm-autosave``). The file is the run's results with three additions, so that it still reads back as a
results file anywhere (a baseline, a shard to merge):

* ``run.machine_info``: platform, system, machine, Python version and implementation, CPU count;
* ``run.commit_info``: git ``commit``, ``branch`` and ``dirty`` (tracked files modified) of the rootdir, or nulls;
* ``saved``: ``name``, ``number``, ``file``, ``saved_at``.

The options are the run's own ``run.options``. Numbers are taken under a file lock, so two runs saving at the same
moment get two numbers. The directory is created private to the user (0700): instances hold the model's answers,
which can quote patient text of gated or private benchmarks.

:func:`load` accepts ``"latest"`` (the highest number), a saved run's name (its latest file), a number (``3`` or
``0003``), a file name (``0003_base.json``) or the path of any results JSON; a problem is a
:class:`StorageError` whose message names the file or directory and what was expected.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_medhelm.gitinfo import commit_info
from pytest_medhelm.report.records import SCHEMA_VERSION, Results, SavedInfo, dump

RUNS_DIR = Path(".medhelm") / "runs"
_FILE = re.compile(r"^(\d{4,})_(.+)\.json$")


class StorageError(ValueError):
    """A saved run or results file that cannot be found or read; the message says which and why."""


@dataclass(frozen=True)
class SavedRun:
    number: int
    name: str
    path: Path

    def describe(self) -> dict[str, Any]:
        """Number, name, file, and what the file says about itself (models, commit, when); never raises."""
        info: dict[str, Any] = {"number": self.number, "name": self.name, "path": str(self.path)}
        try:
            results = Results.model_validate_json(self.path.read_bytes())
            run = results.run
            commit = run.commit_info or {}
            info.update(saved_at=results.saved.saved_at if results.saved else run.finished,
                        models=run.models, commit=commit.get("commit") or run.git_commit,
                        branch=commit.get("branch"), dirty=commit.get("dirty"),
                        benchmarks=len({r.slug for r in results.benchmarks}), instances=len(results.instances))
        except (OSError, ValueError, AttributeError) as exc:  # (pydantic's ValidationError is a ValueError)
            info["problem"] = f"{type(exc).__name__}: {exc}"
        return info


def runs_dir(rootdir: Path | str) -> Path:
    return Path(rootdir) / RUNS_DIR


def sanitize(name: str) -> str:
    """A name usable in a file name on every OS: letters, digits, ``.``, ``_`` and ``-``; anything else → ``_``."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip()).strip("._")
    return clean[:100] or "run"


def machine_info() -> dict[str, Any]:
    return {"platform": platform.platform(), "system": platform.system(), "machine": platform.machine(),
            "python": platform.python_version(), "python_implementation": platform.python_implementation(),
            "cpu_count": os.cpu_count()}


def list_runs(rootdir: Path | str) -> list[SavedRun]:
    """The saved runs, lowest number first (files not named ``NNNN_<name>.json`` are ignored)."""
    folder = runs_dir(rootdir)
    if not folder.is_dir():
        return []
    runs = []
    for path in folder.iterdir():
        match = _FILE.match(path.name)
        if match and path.is_file():
            runs.append(SavedRun(int(match.group(1)), match.group(2), path))
    return sorted(runs, key=lambda r: (r.number, r.name))


def save(results: Results | Mapping[str, Any], name: str, rootdir: Path | str) -> Path:
    """Write ``results`` (with machine, git and save information) as the next numbered run; return its path."""
    from filelock import FileLock

    from pytest_medhelm.report.results import write_json

    folder = runs_dir(rootdir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    saved = Results.read(results).model_copy(deep=True)
    saved.run.machine_info, saved.run.commit_info = machine_info(), commit_info(rootdir)
    clean = sanitize(name)
    with FileLock(str(folder / ".lock")):
        number = max((r.number for r in list_runs(rootdir)), default=0) + 1
        path = folder / f"{number:04d}_{clean}.json"
        saved.saved = SavedInfo(name=clean, number=number, file=path.name,
                                saved_at=datetime.now(UTC).isoformat(timespec="seconds"))
        write_json(saved, path)
    return path


def read_results(path: Path | str) -> dict[str, Any]:
    """Any results JSON, read through the models (:class:`~pytest_medhelm.report.records.Results`): ``schema_version``
    1, lists of benchmarks and instances, and every record of the kind its list holds (fields the models do not
    know are kept; fields a newer version always writes and an older file lacks get their defaults)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StorageError(f"{path}: no such file (expected a pytest-medhelm results JSON)") from None
    except OSError as exc:
        raise StorageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StorageError(f"{path}: not valid JSON ({exc}); expected a pytest-medhelm results file") from None
    if not isinstance(data, dict):
        raise StorageError(f"{path}: not a pytest-medhelm results file (a JSON object expected)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        found = "no schema_version" if version is None else f"schema_version {version!r}"
        raise StorageError(f"{path}: not a pytest-medhelm results file of schema_version {SCHEMA_VERSION} "
                           f"({found})")
    for key in ("run", "benchmarks", "instances"):
        expected = dict if key == "run" else list
        if not isinstance(data.get(key), expected):
            raise StorageError(f"{path}: malformed results file: {key!r} is missing or not a "
                               f"{'JSON object' if expected is dict else 'list'}")
    for i, inst in enumerate(data["instances"]):
        if not isinstance(inst, dict) or not all(k in inst for k in ("benchmark", "instance_id", "model")):
            raise StorageError(f"{path}: malformed results file: instances[{i}] lacks benchmark, instance_id "
                               "or model")
    from pydantic import ValidationError

    try:
        return dump(Results.model_validate(data))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                             for error in exc.errors()[:3])
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise StorageError(f"{path}: malformed results file: {problems}{more}") from None


def resolve(name_or_path: str, rootdir: Path | str) -> Path:
    """The file ``name_or_path`` designates (see :func:`load`), without reading it."""
    text = str(name_or_path).strip()
    runs = list_runs(rootdir)
    folder = runs_dir(rootdir)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if text in ("", "latest"):
        if not runs:
            raise StorageError(f"no saved run in {folder} to compare with: save one first with --medhelm-save "
                               "NAME or --medhelm-autosave, or pass the path of a results JSON")
        return runs[-1].path
    looks_like_path = os.sep in text or "/" in text or text.endswith(".json")
    if looks_like_path:
        by_file = [r for r in runs if r.path.name == text]
        if by_file:
            return by_file[-1].path
        raise StorageError(f"{text}: no such file (expected a results JSON, or the name of a run saved in "
                           f"{folder})")
    named = [r for r in runs if r.name == sanitize(text)]
    if named:
        return named[-1].path
    if text.isdigit():
        numbered = [r for r in runs if r.number == int(text)]
        if numbered:
            return numbered[-1].path
    known = ", ".join(f"{r.number:04d}_{r.name}" for r in runs[-10:]) or "none"
    raise StorageError(f"no saved run named {text!r} in {folder} (latest saved runs: {known}); pass a saved "
                       "run's name or number, 'latest', or the path of a results JSON")


def load(name_or_path: str, rootdir: Path | str) -> dict[str, Any]:
    """A saved run or results file: ``"latest"`` → the highest number; a name → the latest run saved with that
    name; a number → that run; a path → any results JSON (``schema_version`` 1). ``results["source"]`` says
    which file it was."""
    path = resolve(name_or_path, rootdir)
    data = read_results(path)
    data["source"] = str(path)
    return data
