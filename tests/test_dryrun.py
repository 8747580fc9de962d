"""--medhelm-dry-run's estimate: counted offline, upper bounds, jury calls, prices, and the terminal table."""

from __future__ import annotations

import math
import re

import pytest
import pytester_runs
from report_fixtures import no_network

from pytest_medhelm.cost import Prices, per_token
from pytest_medhelm.dryrun import JUDGE_MAX_TOKENS, estimate, render, totals, usd
from pytest_medhelm.tokens import TokenCounter

JUDGES = ["openai/gpt-4o", "anthropic/claude-3-7-sonnet-20250219", "hosted_vllm/llama-3.3-70b"]


def fake_count(model: str, text: str) -> int:
    return len(text.split())


def items():
    out = []
    for model in ("openai/gpt-4o", "hosted_vllm/mine"):
        out += [("pubmedqa", model, "Is aspirin protective ? " + "w " * i, 1) for i in range(10)]
        out += [("mtsamples", model, "Write the plan . " + "w " * i, 512) for i in range(4)]
    return out


def prices() -> Prices:
    return Prices({"openai/gpt-4o": (per_token(2.50), per_token(10.00)),
                   "anthropic/claude-3-7-sonnet-20250219": (per_token(3.00), per_token(15.00)),
                   "hosted_vllm/llama-3.3-70b": (per_token(0.71), per_token(0.71))}, use_litellm=False)


def test_estimate_counts_requests_tokens_upper_bounds_and_jury_calls():
    rows = estimate(items(), JUDGES, 1000, open_benchmarks={"mtsamples"}, prices=prices(), count_tokens=fake_count)
    assert [(r.benchmark, r.model) for r in rows] == [("pubmedqa", "openai/gpt-4o"), ("mtsamples", "openai/gpt-4o"),
                                                      ("pubmedqa", "hosted_vllm/mine"),
                                                      ("mtsamples", "hosted_vllm/mine")]
    pub, mts = rows[0], rows[1]
    assert pub.requests == 10 and pub.prompt_tokens == sum(4 + i for i in range(10)) and pub.max_output_tokens == 10
    assert pub.jury_calls == 0 and pub.jury_cost == 0.0  # closed benchmark: no jury
    assert mts.requests == 4 and mts.max_output_tokens == 4 * 512
    assert mts.jury_calls == 3 * 4 and mts.jury_max_output_tokens == 3 * 4 * JUDGE_MAX_TOKENS
    prompt = sum(4 + i for i in range(4))
    assert mts.jury_prompt_tokens == 3 * (prompt + 4 * 512 + 4 * 1000)
    # USD: the upper bound at the given prices, exactly
    assert pub.model_cost == pub.prompt_tokens * 2.5e-6 + 10 * 1e-5
    per_judge = prompt + 4 * 512 + 4 * 1000
    assert mts.jury_cost == math.fsum([per_judge * 2.5e-6 + 4 * 4096 * 1e-5, per_judge * 3e-6 + 4 * 4096 * 1.5e-5,
                                       per_judge * 7.1e-7 + 4 * 4096 * 7.1e-7])
    assert mts.total_cost == math.fsum([mts.model_cost, mts.jury_cost])


def test_unknown_prices_are_unknown_not_zero():
    rows = estimate(items(), JUDGES, open_benchmarks={"mtsamples"}, prices=prices(), count_tokens=fake_count)
    mine = [r for r in rows if r.model == "hosted_vllm/mine"]
    assert all(r.model_cost is None and r.total_cost is None for r in mine)
    assert all("hosted_vllm/mine" in r.unknown_prices for r in mine)
    t = totals(rows)
    assert t["total_cost"] is None and t["model_cost"] is None
    assert t["known_cost"] == pytest.approx(sum(r.known_cost for r in rows))
    assert t["known_cost"] > 0 and t["unknown_prices"] == ["hosted_vllm/mine"]
    # a judge without a price makes the jury cost unknown
    rows = estimate(items(), JUDGES + ["hosted_vllm/judge-x"], open_benchmarks={"mtsamples"}, prices=prices(),
                    count_tokens=fake_count)
    assert rows[1].jury_cost is None and rows[1].jury_known_cost > 0


def test_render_prints_rows_totals_and_dollars():
    rows = estimate(items(), JUDGES, open_benchmarks={"mtsamples"}, prices=prices(), count_tokens=fake_count)
    text = render(rows, JUDGES)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["benchmark", "model", "requests"]
    assert any(line.startswith("pubmedqa") and "openai/gpt-4o" in line for line in lines)
    assert any(line.startswith("subtotal") for line in lines) and any(line.startswith("TOTAL") for line in lines)
    assert "unknown" in text and "$" in text
    assert "dry run: nothing was sent" in text and "+ unknown" in text
    assert "No price for: hosted_vllm/mine" in text and "--medhelm-prices" in text
    one = estimate(items()[:3], prices=prices(), count_tokens=fake_count)
    assert "TOTAL" not in render(one)
    assert usd(None) == "unknown" and usd(None, 2.5) == "$2.50 + unknown" and usd(1234.5) == "$1,234.50"
    assert usd(0.00123) == "$0.0012"


def test_estimate_with_the_real_counter_sends_nothing():
    with no_network() as attempts:
        rows = estimate([("pubmedqa", "openai/gpt-4o-mini", "Question: is this a test?", 1)] * 3,
                        ["openai/gpt-4o"], open_benchmarks=())
    assert attempts == []
    assert rows[0].requests == 3 and rows[0].prompt_tokens > 3 * 5 and rows[0].model_cost is not None
    assert rows[0].counting == "tiktoken"


def test_a_model_named_otherwise_is_counted_with_the_tokenizer_of_the_string_sent():
    """As the budget counts (with the litellm model string sent): a name of the user's own for gpt-4o gets gpt-4o's
    o200k_base, not cl100k_base as an unknown name would."""
    text = "Le patient présente une douleur thoracique ; 患者胸痛。"
    counter = TokenCounter()
    [row] = estimate([("pubmedqa", "our-gpt", text, 1)], litellm_models={"our-gpt": "openai/gpt-4o"},
                     count_tokens=counter, prices=prices())
    assert row.prompt_tokens == counter("openai/gpt-4o", text) != counter("our-gpt", text)


def test_characters_over_four_when_the_tokenizers_are_unavailable(monkeypatch):
    import tiktoken

    def cannot_load(name):  # (as offline, with TIKTOKEN_CACHE_DIR at a folder without the file)
        raise ConnectionError(f"no {name} here")

    monkeypatch.setattr(tiktoken, "get_encoding", cannot_load)
    counter = TokenCounter()
    assert counter("openai/gpt-4o", "x" * 41) == 11 and counter.method == "chars/4"
    rows = estimate([("pubmedqa", "m", "x" * 40, 1)], count_tokens=counter, prices=Prices(use_litellm=False))
    assert rows[0].prompt_tokens == 10 and rows[0].counting == "chars/4"
    assert "characters / 4" in render(rows)


def test_estimate_to_json():
    [row] = estimate([("pubmedqa", "openai/gpt-4o", "a b c", 1)], prices=prices(), count_tokens=fake_count)
    data = row.to_json()
    assert data["requests"] == 1 and data["prompt_tokens"] == 3 and data["model_cost_usd"] == 3 * 2.5e-6 + 1e-5
    assert data["total_cost_usd"] == data["model_cost_usd"]


def test_a_judges_prompt_given_with_the_item_is_counted_instead_of_the_allowance():
    frame = "Rate this note against the gold note: gold text here"  # 10 words
    items = [("mtsamples", "m", "Write the plan .", 512, frame), ("mtsamples", "m", "Write the plan .", 512, None)]
    [row] = estimate(items, ["j1", "j2"], 1000, open_benchmarks={"mtsamples"}, prices=prices(),
                     count_tokens=fake_count)
    assert row.jury_calls == 4
    # with its prompt: 10 + 512 per judge; without: the benchmark prompt (4) + 512 + the allowance
    assert row.jury_prompt_tokens == 2 * (10 + 512) + 2 * (4 + 512 + 1000)


@pytest.mark.e2e
def test_the_dry_run_counts_the_judge_prompts_a_run_would_send(pytester, shared_data):
    """aci_bench with one judge: the jury's prompt tokens are HELM's judge prompt for each instance (read here from
    HELM's annotator file, independently of the plugin) plus the longest answer, counted."""
    if not (shared_data / "helm_jury").is_dir() or not (shared_data / "aci_bench").is_dir():
        pytest.skip("../shared/data lacks helm_jury or aci_bench")
    from pathlib import Path

    from catalogue_helpers import BENCHMARKS, load
    from helm_reference import helm_judge_prompt, helm_template

    suite = Path(__file__).resolve().parents[1] / "benchmarks"
    result = pytester_runs.run(pytester, str(suite), "--medhelm-model", "openai/writer", "--medhelm-jury",
                               "openai/judge-a", "--medhelm-benchmark", "aci_bench", "--medhelm-data-dir",
                               str(shared_data), "--medhelm-dry-run")  # (in this process: a new interpreter
    # costs a second of CPU)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "medhelm dry run: judge prompts helm@ef439fc" in result.stdout.str()
    lines = result.stdout.lines
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))  # tabulate's rule under the header
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[rule])]
    header = [lines[rule - 1][a:b].strip() for a, b in spans]
    [row] = [{name: line[a:b].strip() for name, (a, b) in zip(header, spans)} for line in lines
             if line.startswith("aci_bench ")]
    jury_prompt_tokens = int(row["jury prompt tok"].replace(",", ""))
    template, counter = helm_template(shared_data, "aci_bench"), TokenCounter()
    instances = load("aci_bench", shared_data)
    max_tokens = BENCHMARKS["aci_bench"].max_tokens
    expected = sum(counter("openai/judge-a", helm_judge_prompt(template, inst.input, "", inst.references[0]))
                   + max_tokens for inst in instances)
    assert int(row["jury calls"].replace(",", "")) == len(instances)  # one jury call per answer
    assert jury_prompt_tokens == expected


def test_the_dry_runs_upper_bound_grows_by_the_reasoning_budget():
    from pytest_medhelm.cost import Prices, per_token
    from pytest_medhelm.dryrun import JUDGE_MAX_TOKENS, estimate, render

    prices = Prices({"openai/o3-mini": (per_token(1.10), per_token(4.40)),
                     "openai/gpt-5": (per_token(1.25), per_token(10.00))}, use_litellm=False)
    items = [("pubmedqa", "openai/o3-mini", "q " * 5, 1)] * 3 + [("mtsamples", "openai/o3-mini", "w " * 4, 512)] * 2

    def count(_model, text):
        return len(text.split())

    plain = estimate(items, ["openai/gpt-5"], open_benchmarks={"mtsamples"}, prices=prices, count_tokens=count)
    thinking = estimate(items, ["openai/gpt-5"], open_benchmarks={"mtsamples"}, prices=prices, count_tokens=count,
                        reasoning_budgets={"openai/o3-mini": 100, "openai/gpt-5": 300})
    (p_pub, p_mts), (t_pub, t_mts) = plain, thinking
    assert (p_pub.max_output_tokens, t_pub.max_output_tokens) == (3, 3 + 3 * 100)
    assert (p_mts.max_output_tokens, t_mts.max_output_tokens) == (2 * 512, 2 * 512 + 2 * 100)
    assert t_mts.jury_max_output_tokens == p_mts.jury_max_output_tokens + 2 * 300 == 2 * (JUDGE_MAX_TOKENS + 300)
    assert t_pub.model_cost == t_pub.prompt_tokens * per_token(1.10) + 303 * per_token(4.40)
    assert t_mts.jury_cost > p_mts.jury_cost  # the judge's thinking is priced as its output
    assert "reasoning budget on top of each" in render(thinking, ["openai/gpt-5"], reasoning=True)
    assert "reasoning" not in render(plain, ["openai/gpt-5"])
