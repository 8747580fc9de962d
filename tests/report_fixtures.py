"""Shared material of the cost, dry-run and HTML tests: a realistic results dict and a network guard."""

from __future__ import annotations

import contextlib
import hashlib
import socket
from collections.abc import Iterator
from typing import Any

#: two models priced by a prices file (the issue's 2.50 / 10.00 and a local model's 0.71 / 0.71)
PRICES_TOML = """
["openai/gpt-4o"]
input_per_million = 2.50
output_per_million = 10.00

["hosted_vllm/llama-3.3-70b"]
input_per_million = 0.71
output_per_million = 0.71
"""

MODELS = ("openai/gpt-4o", "hosted_vllm/llama-3.3-70b")
JUDGES = ("openai/gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet-20250219", "together_ai/meta-llama/Llama-3.3-70B")
#: three benchmarks in two categories; mtsamples is open-ended (judged by the jury)
BENCHMARKS = ("medqa", "mtsamples", "pubmedqa")
HOSTILE_ANSWER = ('<img src="http://203.0.113.9/x.png" onerror="window.__pwned=1">'
                  '</script><script>window.__pwned=2</script>')
N_PER_BENCHMARK = 6


def sample_prices() -> Any:
    """The prices of PRICES_TOML, without a file."""
    from pytest_medhelm.cost import Prices, per_token

    return Prices({"openai/gpt-4o": (per_token(2.50), per_token(10.00)),
                   "hosted_vllm/llama-3.3-70b": (per_token(0.71), per_token(0.71))}, use_litellm=False)


def catalogue() -> dict[str, Any]:
    from pytest_medhelm.catalogue import builtin_benchmarks

    return {b.slug: b for b in builtin_benchmarks() if b.slug in BENCHMARKS}


def sample_records(prices: Any = None) -> list[dict[str, Any]]:
    """Per-instance records as the plugin makes them (fixtures + assert_metric + the jury), costs from ``prices``."""
    prices = prices or sample_prices()
    records = []
    for m, model in enumerate(MODELS):
        for slug in BENCHMARKS:
            for i in range(N_PER_BENCHMARK):
                prompt = f"{slug} question {i}: a 54-year-old patient with chest pain … é"
                tokens_in, tokens_out = 120 + 17 * i + m, (1 if slug != "mtsamples" else 200 + 31 * i)
                rec: dict[str, Any] = {
                    "benchmark": slug, "instance_id": f"id{i:03d}", "model": model, "subset": "",
                    "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                    "tokens_in": tokens_in, "tokens_out": tokens_out,
                    "cost_usd": prices.completion_cost(model, model, tokens_in, tokens_out),
                    "latency_s": 0.25, "cached": False, "error": None,
                }
                if slug == "mtsamples":
                    score = [0.9, 0.75, 0.5, 0.25, 0.8, 0.6][(i + m) % 6]
                    rec.update(answer=f"Plan {i}: start aspirin 81 mg daily; follow up in 2 weeks.",
                               expected=f"Reference plan {i}", score=score, raw_score=1 + 4 * score,
                               metric="medhelm_jury", missed=score < 0.5)
                    # as assert_metric records the jury metric's Score.extra (pytest_medhelm.metrics.jury)
                    per_judge = {
                        judge: {"accuracy": {"score": 4 - (j + i) % 3,
                                             "explanation": f"{judge} on {i}: accurate <b>dose</b>"},
                                "completeness": {"score": 3, "explanation": "misses the follow-up imaging"},
                                "clarity": {"score": 5, "explanation": "clear"}}
                        for j, judge in enumerate(JUDGES[:2])}
                    jury = {"raw": 1 + 4 * score, "per_judge": per_judge,
                            "failures": {JUDGES[2]: "malformed JSON"}, "flagged": None}
                    rec["metrics"] = {"jury": jury, "jury_tokens_in": 3 * (600 + tokens_out), "jury_tokens_out": 450,
                                      "jury_cost_usd": 0.0123, "rouge_1": 0.4, "rouge_2": 0.2,
                                      "rouge_l": 0.31 + 0.01 * i}
                    # the per-model sums read these at the top of the record
                    rec.update({k: rec["metrics"][k] for k in ("jury_tokens_in", "jury_tokens_out", "jury_cost_usd")})
                else:
                    right = (i + m + len(slug)) % 3 != 0
                    answer = "A" if right else "B"
                    if slug == "pubmedqa" and i == 2 and m == 0:
                        answer = HOSTILE_ANSWER
                        right = False
                    rec.update(answer=answer, expected="A", score=1.0 if right else 0.0,
                               raw_score=1.0 if right else 0.0, metric="exact_match", missed=not right,
                               detail="" if right else f"expected 'A', got {answer!r}")
                records.append(rec)
    # one request that failed for good: no score, an error
    records.append({"benchmark": "medqa", "instance_id": "id999", "model": MODELS[1], "subset": "",
                    "prompt_sha256": None, "answer": None, "score": None, "raw_score": None, "tokens_in": 0,
                    "tokens_out": 0, "cost_usd": None, "latency_s": 0.0, "cached": False,
                    "error": "hosted_vllm/llama-3.3-70b (HTTP 500): upstream <overloaded>"})
    return records


def sample_results(prices: Any = None) -> dict[str, Any]:
    from pytest_medhelm.report.results import build_results

    return build_results(sample_records(prices), catalogue(), models=list(MODELS), judges=list(JUDGES),
                         options={"prices": "prices.toml"}, started="2025-05-12T10:00:00+00:00",
                         finished="2025-05-12T10:42:00+00:00", compat="default", commit="0123abcd")


@contextlib.contextmanager
def no_network() -> Iterator[list[str]]:
    """Refuse (and record) every attempt to resolve a name or open a socket connection in this process."""
    attempts: list[str] = []
    real = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection)

    def refuse(what: str):
        def _refuse(*args: Any, **kwargs: Any):
            attempts.append(f"{what}{args[1:] if what.startswith('socket.') else args}")
            raise OSError(f"network access refused in this test ({what})")
        return _refuse

    socket.socket.connect = refuse("socket.connect")  # type: ignore[method-assign]  # replaced for this test
    socket.socket.connect_ex = refuse("socket.connect_ex")  # type: ignore[method-assign]  # replaced for this test
    socket.getaddrinfo = refuse("getaddrinfo")
    socket.create_connection = refuse("create_connection")
    try:
        yield attempts
    finally:
        (socket.socket.connect, socket.socket.connect_ex,  # type: ignore[method-assign]  # the originals put back
         socket.getaddrinfo, socket.create_connection) = real


THINKER = "openai/o3-mini"
#: the reasoning model's answers whose token limit ran out before any answer (pubmedqa's first two)
RAN_OUT_IDS = ("id000", "id001")


def reasoning_results(model: str = THINKER, budget: int = 40) -> dict[str, Any]:
    """:func:`sample_results` with ``MODELS[0]`` renamed ``model`` and made a reasoning model: ``budget`` reasoning
    tokens in each of its answers (of its tokens out, as servers count them), pubmedqa's ``RAN_OUT_IDS`` used the
    whole limit thinking (empty answers, misses), ``run.reasoning`` as the run writes it; ``MODELS[1]`` stays plain
    (its server says nothing of reasoning tokens)."""
    from types import SimpleNamespace

    from pytest_medhelm.report.reasoning import reasoning_record
    from pytest_medhelm.report.results import build_results
    from pytest_medhelm.values import Reasoning

    records = sample_records()
    for rec in records:
        if rec["model"] != MODELS[0]:
            continue
        rec["model"] = model
        rec["tokens_out"] += budget
        rec["reasoning_tokens"] = budget
        if rec["benchmark"] == "pubmedqa" and rec["instance_id"] in RAN_OUT_IDS:
            rec.update(answer="", score=0.0, raw_score=0.0, missed=True, tokens_out=budget + 1,
                       reasoning_tokens=budget + 1, detail="the token limit ran out before any answer",
                       ran_out={"max_output_tokens": budget + 1, "reasoning_budget": budget,
                                "reasoning_tokens": budget + 1})
    results = build_results(records, catalogue(), models=[model, MODELS[1]], judges=list(JUDGES),
                            options={}, started="2025-05-12T10:00:00+00:00", finished="2025-05-12T10:42:00+00:00",
                            compat="default", commit="0123abcd")
    spec = SimpleNamespace(name=model, reasoning=Reasoning("openai", budget, "low", "option"))
    judge = SimpleNamespace(name="openai/gpt-5", reasoning=Reasoning("openai", budget, "low", "option"))
    settings = reasoning_record(budget, "low", [spec, SimpleNamespace(name=MODELS[1], reasoning=None)], [judge])
    assert settings is not None
    results["run"]["reasoning"] = settings.model_dump(mode="json")
    return results


def jury_run_results(jury_prompts: str | None, judges: list[str], scores: list[float]) -> dict[str, Any]:
    """A run of one open-ended benchmark whose jury asked from ``jury_prompts`` (the run's instrument)."""
    return {"run": {"models": ["m"], "judges": judges, "jury_prompts": jury_prompts, "compat": "default"},
            "benchmarks": [{"slug": "aci_bench", "model": "m", "mean": sum(scores) / len(scores),
                            "category_slug": "clinical_note_generation"}],
            "instances": [{"benchmark": "aci_bench", "model": "m", "instance_id": str(i), "score": s}
                          for i, s in enumerate(scores)]}
