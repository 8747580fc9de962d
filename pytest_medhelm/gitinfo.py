"""The one git lookup: the commit, branch and dirty flag of the directory a run was started from (for the results
and saved runs). Never fails: outside a work tree, or without git, the answers are None."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any


def git(rootdir: Path | str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=rootdir, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit_of(rootdir: Path | str) -> str | None:
    return git(rootdir, "rev-parse", "HEAD") or None


def commit_info(rootdir: Path | str) -> dict[str, Any]:
    """git commit, branch and dirty flag of ``rootdir`` (nulls outside a git work tree or without git)."""
    commit = commit_of(rootdir)
    if not commit:
        return {"commit": None, "branch": None, "dirty": None}
    branch = git(rootdir, "rev-parse", "--abbrev-ref", "HEAD")
    status = git(rootdir, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "branch": None if branch in (None, "HEAD") else branch,
            "dirty": None if status is None else bool(status)}
