"""The jury end to end: an open-ended benchmark answered by a model and graded by two judges, all served by our
test server (judges are ordinary OpenAI-compatible endpoints here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import NO_BERTSCORE

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"
VERDICT = json.dumps({axis: {"score": 4, "explanation": f"{axis} is good"}
                      for axis in ("accuracy", "completeness", "clarity")})


def answer_or_judge(body):
    if body["model"].startswith("judge"):
        return "Here is my assessment:\n```json\n" + VERDICT + "\n```" if body["model"] == "judge-a" else VERDICT
    return "HISTORY OF PRESENT ILLNESS: the patient reports a cough. ASSESSMENT AND PLAN: rest."


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_two_judges_scoring_4_give_raw_4_and_normalized_075(pytester, shared_data, xdist):
    from pytest_medhelm.testing.server import running_server

    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(answer_or_judge)
        result = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
                                   server.url, "--medhelm-jury", "openai/judge-a", "--medhelm-jury", "openai/judge-b",
                                   "--medhelm-jury-api-base", server.url, "--medhelm-benchmark", "aci_bench",
                                   "--medhelm-max-instances", "5", "--medhelm-data-dir", str(shared_data),
                                   "--medhelm-cache-dir", str(pytester.path / "cache"), "--medhelm-json", str(out),
                                   *NO_BERTSCORE, *xdist, subprocess=True)  # (BERTScore is not under test here)
        assert result.ret == 0, result.stdout.str()[-3000:]
        judged = [r for r in server.requests if r["json"]["model"].startswith("judge")]
        assert len(server.requests) == 15 and len(judged) == 10  # 5 answers, then 2 judges x 5
    report = json.loads(out.read_text())
    [bench] = report["benchmarks"]
    assert bench["raw_mean"] == pytest.approx(4.0) and bench["mean"] == pytest.approx(0.75)
    [model] = report["models"]
    assert model["jury_tokens_in"] > 0 and model["jury_tokens_out"] > 0
    assert report["run"]["judges"] == ["openai/judge-a", "openai/judge-b"]
    inst = report["instances"][0]
    assert inst["metrics"]["jury"]["per_judge"]["openai/judge-a"]["accuracy"]["explanation"] == "accuracy is good"
