"""How tests/perf/bench.py runs what it measures: pytest subprocesses, the toy project, the bare aiohttp loop.

Every measured process gets the measured checkout first on its path (``repo``), so that the same script measures
this checkout or an older one (``bench.py --repo PATH``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the tests' own toy benchmark (tests/toy_benchmark.py: text, no import of the package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from toy_benchmark import TOY_CONFTEST, TOY_TEST

#: a plugin module loaded with -p before ours: it marks our package for assertion rewriting as pytest marks the
#: packages of an installed plugin's distribution (autoloading is off in these runs, and a ``-p`` plugin alone is
#: only marked itself), so that every run pays what an installed user's cold session pays
AS_INSTALLED_PLUGIN = "medhelm_bench_as_installed"
AS_INSTALLED = textwrap.dedent('''
    import sys

    for finder in sys.meta_path:
        if callable(getattr(finder, "mark_rewrite", None)):
            finder.mark_rewrite("pytest_medhelm")
''')


@dataclass(frozen=True)
class PytestRun:
    """One pytest subprocess: its wall time, the CPU time of it and its children, max RSS, exit code, output."""

    wall: float
    cpu: float
    rss_kib: int
    code: int
    output: str


def pytest_env(repo: Path, support: Path | None = None) -> dict[str, str]:
    """The environment of every measured process: the measured checkout first on the path (and the bench's own
    support modules, the as-installed marker, after it), autoloading off (only what we load with -p: ours and
    xdist), no bytecode written (every session as cold as a fresh install's, ours byte-compiled once beforehand)."""
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (repo, support) if p)
    return env


def run_pytest(args: list[str], cwd: Path, repo: Path,
               plugins: Sequence[str] = ("pytest_medhelm.plugin", "xdist.plugin"),
               env: dict[str, str] | None = None, autoload: bool = False, as_installed: Path | None = None,
               codes: Sequence[int] = (0, 1)) -> PytestRun:
    """One pytest subprocess, timed from a wrapper process (wall, CPU and max RSS of pytest and its children:
    xdist's workers, the sending child). ``as_installed``: the folder of :data:`AS_INSTALLED_PLUGIN`, loaded first."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if as_installed is not None:
        command += ["-p", AS_INSTALLED_PLUGIN]
    for plugin in plugins:
        command += ["-p", plugin]
    wrapper = ("import resource, subprocess, sys, time; t=time.perf_counter(); "
               "r=subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE); "
               "w=time.perf_counter()-t; u=resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(w, u.ru_utime+u.ru_stime, u.ru_maxrss, r.returncode); print(r.stdout.decode()[-20000:]); "
               "sys.stderr.write(r.stderr.decode()[-2000:])")
    environment = pytest_env(repo, as_installed)
    if autoload:
        environment.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    environment.update(env or {})
    out = subprocess.run([sys.executable, "-c", wrapper, *command, *args], cwd=cwd, env=environment,
                         capture_output=True, text=True, check=True)
    first, _, output = out.stdout.partition("\n")
    wall, cpu, rss, code = first.split()
    if int(code) not in codes:
        raise SystemExit(f"pytest {' '.join(args)} exited {code}: {out.stderr}\n{output[-3000:]}")
    return PytestRun(float(wall), float(cpu), int(rss), int(code), output)


def as_installed_folder(work: Path) -> Path:
    folder = work / "as-installed"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{AS_INSTALLED_PLUGIN}.py").write_text(AS_INSTALLED)
    return folder


def toy_project(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(TOY_CONFTEST)
    (root / "test_toy.py").write_text(TOY_TEST)
    (root / "data" / "toy").mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"q{i:05d}", "q": f"question {i}?", "correct": i % 2} for i in range(n)]
    (root / "data" / "toy" / "toy.json").write_text(json.dumps(rows))
    return root / "data"


def toy_bodies(n: int) -> list[dict[str, Any]]:
    return [{"model": "toy", "messages": [{"role": "user", "content": f"Answer A or B.\n\nQuestion: question {i}?"
                                                                     "\nA. yes\nB. no\nAnswer:"}],
             "temperature": 0.0, "max_tokens": 1} for i in range(n)]


async def bare_aiohttp(url: str, bodies: Sequence[dict[str, Any]], concurrency: int) -> float:
    """The reference: ``bodies`` POSTed in order by ``concurrency`` workers of one aiohttp session."""
    import aiohttp

    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(url + "/chat/completions", json=body) as response:
                    await response.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


ANSWERS_LINE = re.compile(r"medhelm answers: (\d+)/(\d+) \(([\d.]+)/s, done in ([\d.]+)s\)")


def answers_time(output: str) -> float | None:
    """The sending time the run reports (``medhelm answers: N/N (R/s, done in Ss)``), when it reports one."""
    found = ANSWERS_LINE.search(output)
    return float(found.group(4)) if found else None
