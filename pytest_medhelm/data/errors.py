"""Errors of benchmark data: each names the file, the row or key, and what was expected."""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    """A data file is malformed. The message names the file, the place in it, and what was expected."""

    def __init__(self, path: Path | str, where: str, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        place = f", {where}" if where else ""
        super().__init__(f"{self.path}{place}: {problem}")


class DataMissing(Exception):
    """A benchmark's data is absent. The message says which file to put where, and where it comes from."""
