"""The jury MedHELM validated, end to end: the five public open-ended benchmarks run through the plugin as users run
it, against our test server, three judges scoring 4.

Every prompt the model and the judges receive is compared with the prompt HELM 0.5.16 would send, computed here
independently of the plugin: the model's from HELM's generation-adapter rule (the whole prompt as one user message) and
each benchmark's instructions and nouns; the judges' from HELM's annotator file (``PROMPT_TEMPLATE`` read as a literal)
with ``{X}`` -> ``$X`` and :class:`string.Template`. Instances come from the catalogue loaders (their fidelity is
tested in test_catalogue_open.py). An empty answer (one in four, chosen by the prompt's hash) must score HELM's 1.0
and send no judge request.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import load
from helm_reference import HELM, helm_judge_prompt, helm_model_prompt, helm_template
from pytester_runs import NO_BERTSCORE

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"
JUDGES = ("openai/judge-1", "openai/judge-2", "openai/judge-3")
ANSWER = "PLAN: rest and fluids {RESPONSE} $GOLD_RESPONSE\u00a0\n\n"  # not stripped by anyone


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_empty_for(prompt: str) -> bool:
    return int(sha(prompt), 16) % 4 == 0


def answer_or_judge(body: dict) -> str:
    prompt = body["messages"][0]["content"]
    if body["model"].startswith("judge"):
        return json.dumps({axis: {"score": 4, "explanation": f"{axis}: good"}
                           for axis in ("accuracy", "completeness", "clarity")})
    return "" if is_empty_for(prompt) else ANSWER


def run(pytester: pytest.Pytester, data: Path, slugs: list[str], extra: list[str]) -> tuple[dict, list[dict]]:
    from pytest_medhelm.testing.server import running_server

    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(answer_or_judge)
        args = [str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
                server.url, "--medhelm-jury-api-base", server.url, "--medhelm-data-dir", str(data),
                "--medhelm-cache-dir", str(pytester.path / "cache"), "--medhelm-json", str(out),
                *NO_BERTSCORE, *extra]  # (BERTScore beside the jury is not under test here)
        for judge in JUDGES:
            args += ["--medhelm-jury", judge]
        for slug in slugs:
            args += ["--medhelm-benchmark", slug]
        # a subprocess, as users run it
        result = pytester_runs.run(pytester, *args, subprocess=True)
        assert result.ret == 0, result.stdout.str()[-3000:]
        assert "not comparable with MedHELM" not in result.stdout.str()
        sent = [r["json"] for r in server.requests]
    return json.loads(out.read_text()), sent


def check(report: dict, sent: list[dict], data: Path, slugs: list[str]) -> None:
    assert report["run"]["jury_prompts"] == "helm@ef439fc"
    asked_model = [b["messages"][0]["content"] for b in sent if b["model"] == "writer"]
    asked_judges = [b for b in sent if b["model"].startswith("judge")]
    for body in sent:
        assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
    for body in asked_judges:
        assert body["temperature"] == 0 and body.get("max_tokens", body.get("max_completion_tokens")) == 4096
    judge_prompts: dict[str, list[str]] = {}
    for body in asked_judges:
        judge_prompts.setdefault(body["messages"][0]["content"], []).append(body["model"])
    expected_judge_prompts: set[str] = set()
    n_empty = n_judged = 0
    for slug in slugs:
        instances = {i.id: i for i in load(slug, data)}
        template = helm_template(data, slug)
        records = [r for r in report["instances"] if r["benchmark"] == slug]
        assert records, slug
        for rec in records:
            inst = instances[rec["instance_id"]]
            prompt = helm_model_prompt(slug, inst.input)
            assert rec["prompt_sha256"] == sha(prompt) and prompt in asked_model, (slug, inst.id)
            if is_empty_for(prompt):
                n_empty += 1
                assert rec["answer"] == "" and rec["raw_score"] == 1.0 and rec["score"] == 0.0
                assert rec["judge_prompt_sha256"] == [] and rec["metrics"]["jury"]["flagged"] == "empty answer"
                continue
            n_judged += 1
            judge_prompt = helm_judge_prompt(template, inst.input, ANSWER, inst.references[0])
            expected_judge_prompts.add(judge_prompt)
            assert rec["judge_prompt_sha256"] == [sha(judge_prompt)] * 3, (slug, inst.id)
            assert sorted(judge_prompts.get(judge_prompt, [])) == ["judge-1", "judge-2", "judge-3"], (slug, inst.id)
            assert rec["raw_score"] == 4.0 and rec["score"] == 0.75
    # nothing else was sent to the judges: no request for an empty answer
    assert set(judge_prompts) == expected_judge_prompts
    assert n_empty and n_judged
    for row in report["benchmarks"]:
        assert row["raw_mean"] == pytest.approx(
            sum(r["raw_score"] for r in report["instances"] if r["benchmark"] == row["slug"]) / row["n"])
    agreement = {r["benchmark"]: r for r in report["jury_agreement"]}
    assert set(agreement) == set(slugs)
    for row in agreement.values():
        assert row["judges"] == list(JUDGES) and row["failures"] == dict.fromkeys(JUDGES, 0)


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_five_open_benchmarks_on_a_sample_ask_what_helm_asks(pytester, shared_data, xdist):
    if not (shared_data / "helm_jury").is_dir():
        pytest.skip("../shared/data/helm_jury is absent")
    slugs = list(HELM)
    report, sent = run(pytester, shared_data, slugs, ["--medhelm-max-instances", "4", *xdist])
    check(report, sent, shared_data, slugs)


def test_every_instance_of_aci_bench_and_mediqa_asks_what_helm_asks(pytester, shared_data):
    if not (shared_data / "helm_jury").is_dir():
        pytest.skip("../shared/data/helm_jury is absent")
    slugs = ["aci_bench", "mediqa"]
    report, sent = run(pytester, shared_data, slugs, ["-n", "2"])
    assert len({r["instance_id"] for r in report["instances"] if r["benchmark"] == "aci_bench"}) == 120
    check(report, sent, shared_data, slugs)
