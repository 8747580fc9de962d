"""Reasoning models beyond the report package: merged runs' ``run.reasoning`` (compare/merge.py), the reserved
reasoning budget of ``--medhelm-budget`` and the dry run's estimate (their runs through pytest:
tests/run/test_reasoning_runs.py). What the report modules say of reasoning models is tested beside each module
(tests/report/test_aggregate.py, test_report_reasoning.py, test_tables.py, html/test_render.py)."""

from __future__ import annotations

import copy

import pytest
from report_fixtures import RAN_OUT_IDS, THINKER, reasoning_results

from pytest_medhelm.values import Reasoning


@pytest.fixture(scope="module")
def results():
    return reasoning_results()


# ============================================================================================== merged runs
def test_merge_results_keeps_run_reasoning_and_refuses_a_conflict(results):
    from pytest_medhelm.compare.merge import MergeError, merge_results

    thinker = [i for i in results["instances"] if i["model"] == THINKER]
    first = dict(copy.deepcopy(results), instances=thinker[: len(thinker) // 2])
    second = dict(copy.deepcopy(results), instances=thinker[len(thinker) // 2:])
    merged = merge_results([("1.json", first), ("2.json", second)])
    assert merged["run"]["reasoning"] == results["run"]["reasoning"]
    [row] = merged["models"]
    assert (row["reasoning_tokens"], row["n_ran_out"]) == (722, 2)
    assert [i["instance_id"] for i in thinker if i.get("ran_out")] == list(RAN_OUT_IDS)
    second["run"]["reasoning"]["models"][THINKER]["budget"] = 400
    with pytest.raises(MergeError, match="ran as a reasoning model"):
        merge_results([("1.json", first), ("2.json", second)])


# ============================================================================================== the budget
def test_the_budget_reserves_the_reasoning_budget_in_each_upper_bound():
    from pytest_medhelm.budget import Budget
    from pytest_medhelm.values import ChatRequest, ModelSpec

    price = (2.5e-6, 1e-5)
    plain = ModelSpec("openai/m", "openai/m")
    thinker = ModelSpec("openai/o3-mini", "openai/o3-mini", reasoning=Reasoning("openai", 100, "", "option"))

    def tokens(_spec, _request):
        return 10

    # room for a plain request's bound (10 in + 5 out) and not for 5 + 100 reasoning tokens
    one_plain = 10 * price[0] + 5 * price[1]
    budget = Budget(one_plain * 2, lambda _s: price, tokens)
    request = ChatRequest.for_prompt(thinker, "q", 5)
    assert request.max_output_tokens == 105
    assert budget.upper_bound(thinker, request) == 10 * price[0] + 105 * price[1]
    assert budget.reserve(thinker, request) is None and budget.not_sent == 1  # refused, nothing sent
    fresh = Budget(one_plain * 2, lambda _s: price, tokens)
    reservation = fresh.reserve(plain, ChatRequest.for_prompt(plain, "q", 5))
    assert reservation is not None and reservation.upper == one_plain
    # a budget that holds the reasoning model's bound reserves it whole
    roomy = Budget(1.0, lambda _s: price, tokens)
    held = roomy.reserve(thinker, request)
    assert held is not None and held.upper == 10 * price[0] + 105 * price[1] and roomy.in_flight == held.upper


# ============================================================================================== the dry run
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
