"""``--medhelm-budget``: the Budget's arithmetic, and the scheduler enforcing it against our test server.

Prices are 2.50 / 10.00 USD per million tokens (exactly 2.5e-6 and 1e-5 per token through ``cost.per_token``).
Where a test needs an exact count of requests sent, the prompt tokens are counted the way the test server counts
them (``server.count_tokens``, whitespace words) and every answer is as long as ``max_tokens``: then a request's
actual cost equals its reserved upper bound, and how many fit does not depend on timing.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from pathlib import Path

import pytest
import pytester_runs

from pytest_medhelm.budget import BUDGET_PREFIX, Budget, BudgetExhausted, Reservation, unpriced, usd_limit
from pytest_medhelm.cache.store import AnswerCache
from pytest_medhelm.cost import Prices, per_token
from pytest_medhelm.sending.jobs import Job
from pytest_medhelm.sending.scheduler import Scheduler, Settings
from pytest_medhelm.testing import server as test_server
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import ChatRequest, Completion, ModelError, ModelSpec, Reasoning

IN, OUT = per_token(2.50), per_token(10.00)
PRICE = (IN, OUT)
SPEC = ModelSpec("openai/m", "openai/m")


def price_of(spec: ModelSpec):
    return {"openai/m": PRICE, "openai/cheap": (per_token(0.15), per_token(0.60))}.get(spec.name)


def server_tokens(spec: ModelSpec, request: ChatRequest) -> int:
    """Prompt tokens as the test server counts them (its usage.prompt_tokens)."""
    return sum(test_server.count_tokens(content) for _role, content in request.messages)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def request(prompt_words: int, max_tokens: int, tag: str = "w", spec: ModelSpec = SPEC) -> ChatRequest:
    return ChatRequest.for_prompt(spec, words(prompt_words, tag), max_tokens)


# ----------------------------------------------------------------------------------------------------------------
# the Budget alone


def test_per_token_prices_are_the_exact_literals():
    assert IN == 2.5e-6 and OUT == 1e-5


def test_reserve_settle_release_exact_arithmetic():
    budget = Budget(1.0, price_of, server_tokens)
    r1 = budget.reserve(SPEC, request(100, 50))
    assert isinstance(r1, Reservation)
    assert r1.prompt_tokens == 100 and r1.max_tokens == 50
    assert r1.upper == 100 * 2.5e-6 + 50 * 1e-5  # bit for bit
    assert budget.in_flight == r1.upper and budget.spent == 0.0

    r2 = budget.reserve(SPEC, request(40, 20, "x"))
    assert budget.in_flight == float(Fraction(r1.upper) + Fraction(40 * 2.5e-6 + 20 * 1e-5))

    actual = budget.settle(r1, 100, 7)
    assert actual == 100 * 2.5e-6 + 7 * 1e-5
    assert budget.spent == actual
    assert budget.in_flight == 40 * 2.5e-6 + 20 * 1e-5

    budget.release(r2)  # failed without an answer: costs nothing
    assert budget.in_flight == 0.0 and budget.spent == actual
    assert (budget.sent, budget.answered, budget.not_sent) == (2, 1, 0)

    with pytest.raises(ValueError, match="already settled or released"):
        budget.settle(r1, 1, 1)
    with pytest.raises(ValueError, match="already settled or released"):
        budget.release(r2)
    assert budget.spent == actual and budget.in_flight == 0.0


def test_spent_is_the_correctly_rounded_sum_of_the_costs():
    budget = Budget(10.0, price_of, server_tokens)
    costs = []
    for i in range(1, 301):
        r = budget.reserve(SPEC, request(i % 37 + 1, 13, f"t{i}"))
        costs.append(budget.settle(r, i % 37 + 1, i % 13))
    assert costs[0] == 2 * 2.5e-6 + 1 * 1e-5
    assert budget.spent == math.fsum(costs)
    # plain left-to-right float addition drifts; the budget does not: ten answers of $0.10 are $1.00
    tenths = Budget(1.0, price_of, server_tokens)
    naive = 0.0
    for i in range(10):
        naive += tenths.settle(tenths.reserve(SPEC, request(1, 1, f"d{i}")), 1, 1, reported_cost=0.1)
    assert naive == 0.9999999999999999 and tenths.spent == 1.0


def test_a_request_that_exactly_fits_is_sent_the_next_is_not():
    one = 10 * 2.5e-6 + 5 * 1e-5
    budget = Budget(one, price_of, server_tokens)  # room for exactly one such request
    r = budget.reserve(SPEC, request(10, 5))
    assert r is not None and r.upper == one
    assert budget.reserve(SPEC, request(10, 5, "b")) is None  # one + one > limit
    budget.settle(r, 10, 5)
    assert budget.spent == one == budget.limit_usd
    assert budget.not_sent == 1 and budget.exhausted


def test_after_the_first_refusal_everything_is_refused():
    # room for 3 requests of 1000 prompt tokens + 100 out (0.0035 each), and then some
    budget = Budget(0.012, price_of, server_tokens)
    for i in range(3):
        r = budget.reserve(SPEC, request(1000, 100, f"a{i}"))
        budget.settle(r, 1000, 100)
    assert budget.spent == math.fsum([1000 * 2.5e-6 + 100 * 1e-5] * 3)  # 0.0105, 0.0015 left
    assert budget.reserve(SPEC, request(1000, 100, "big")) is None  # 0.0035 does not fit
    # a request of 0.00006 would fit in what is left, but the run stops cleanly at the first refusal
    small = request(4, 5, "small")
    assert budget.upper_bound(SPEC, small) == 4 * 2.5e-6 + 5 * 1e-5 < 0.0015
    assert budget.reserve(SPEC, small) is None
    assert budget.reserve(ModelSpec("local/tiny", "openai/tiny"), small) is None  # even a free one
    assert budget.not_sent == 3 and budget.sent == 3 and budget.exhausted


def test_in_flight_upper_bounds_count_until_they_settle():
    upper = 100 * 2.5e-6 + 100 * 1e-5  # 0.00125
    budget = Budget(2 * upper, price_of, server_tokens)
    a = budget.reserve(SPEC, request(100, 100, "a"))
    b = budget.reserve(SPEC, request(100, 100, "b"))
    assert a is not None and b is not None
    assert budget.reserve(SPEC, request(100, 100, "c")) is None  # the answers have not come back yet
    budget.settle(a, 100, 1)
    budget.settle(b, 100, 1)
    assert budget.spent == (100 * 2.5e-6 + 1e-5) * 2 and budget.in_flight == 0.0


def test_an_answer_above_its_bound_is_counted_in_full():
    budget = Budget(1.0, price_of, lambda spec, req: 10)  # a counter that under-counts the prompt
    r = budget.reserve(SPEC, request(500, 20))
    assert r.upper == 10 * 2.5e-6 + 20 * 1e-5
    actual = budget.settle(r, 500, 25)
    assert actual == 500 * 2.5e-6 + 25 * 1e-5 > r.upper
    assert budget.spent == actual


def test_a_higher_reported_cost_wins_a_lower_one_does_not():
    budget = Budget(1.0, price_of, server_tokens)
    r = budget.reserve(SPEC, request(100, 10))
    assert budget.settle(r, 100, 10, reported_cost=0.5) == 0.5
    r = budget.reserve(SPEC, request(100, 10, "x"))
    assert budget.settle(r, 100, 10, reported_cost=1e-9) == 100 * 2.5e-6 + 10 * 1e-5
    assert budget.spent == 0.5 + (100 * 2.5e-6 + 10 * 1e-5)


def run_threads(threads_n: int, work) -> None:
    barrier = threading.Barrier(threads_n)

    def target(t: int) -> None:
        barrier.wait()
        work(t)

    threads = [threading.Thread(target=target, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_many_threads_send_exactly_what_fits():
    per_request = 20 * 2.5e-6 + 10 * 1e-5  # 0.00015, and every answer costs exactly its bound
    fits = 137
    budget = Budget(per_request * fits + per_request / 2, price_of, server_tokens)
    threads_n, each = 16, 50  # 800 requests for room for 137
    granted: list[int] = []

    def work(t: int) -> None:
        for i in range(each):
            r = budget.reserve(SPEC, request(20, 10, f"t{t}-{i}"))
            if r is not None:
                budget.settle(r, 20, 10)
                granted.append(t)  # list.append is atomic

    run_threads(threads_n, work)
    assert len(granted) == fits == budget.sent == budget.answered
    assert budget.not_sent == threads_n * each - fits
    assert budget.in_flight == 0.0
    assert budget.spent == math.fsum([per_request] * fits) <= budget.limit_usd
    assert budget.exhausted


def test_many_threads_settling_and_releasing_keep_exact_books():
    budget = Budget(100.0, price_of, server_tokens)
    threads_n, each = 16, 200
    costs: list[float] = []

    def work(t: int) -> None:
        for i in range(each):
            r = budget.reserve(SPEC, request(1 + (t * each + i) % 50, 20, f"t{t}-{i}"))
            if i % 4 == 3:  # failed: gives its reservation back and costs nothing
                budget.release(r)
            else:
                costs.append(budget.settle(r, r.prompt_tokens, i % 21))

    run_threads(threads_n, work)
    assert budget.sent == threads_n * each and budget.not_sent == 0
    assert budget.answered == len(costs) == threads_n * each * 3 // 4
    assert budget.in_flight == 0.0
    assert budget.spent == math.fsum(costs)


def test_local_models_are_free_and_never_unpriced():
    local = ModelSpec("local/smollm2", "openai/smollm2", "http://127.0.0.1:9")
    budget = Budget(0.0, price_of, server_tokens)  # a zero budget still runs free local models
    r = budget.reserve(local, request(1000, 1000, spec=local))
    assert r is not None and r.upper == 0.0
    assert budget.settle(r, 1000, 1000) == 0.0
    assert budget.reserve(SPEC, request(1, 1)) is None  # a paid one is refused
    # a prices file may still price a local model: that price is used
    priced_local = Budget(1.0, lambda spec: PRICE, server_tokens)
    assert priced_local.reserve(local, request(10, 0, spec=local)).upper == 10 * 2.5e-6


def test_unpriced_lists_the_models_without_a_price_once_in_order():
    specs = [ModelSpec("hosted_vllm/ft", "hosted_vllm/ft", "http://10.0.0.2/v1"), SPEC,
             ModelSpec("local/smollm2", "openai/smollm2"), ModelSpec("anthropic/x", "anthropic/x"),
             ModelSpec("hosted_vllm/ft", "hosted_vllm/ft", "http://10.0.0.2/v1")]
    assert unpriced(specs, price_of) == ["hosted_vllm/ft", "anthropic/x"]
    assert unpriced([SPEC, ModelSpec("openai/cheap", "openai/cheap")], price_of) == []


def test_unpriced_models_through_a_real_prices_file(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('["openai/m"]\ninput_per_million = 2.50\noutput_per_million = 10.00\n')
    prices = Prices.load(path, use_litellm=False)

    def file_price(spec: ModelSpec):
        return prices.price_for(spec.name, spec.litellm_model)

    other = ModelSpec("hosted_vllm/ft", "hosted_vllm/ft")
    assert unpriced([SPEC, other], file_price) == ["hosted_vllm/ft"]
    budget = Budget(1.0, file_price, server_tokens)
    assert budget.reserve(SPEC, request(4, 2)).upper == 4 * 2.5e-6 + 2 * 1e-5


def test_a_request_to_an_unpriced_model_is_refused_without_stopping_the_others():
    budget = Budget(1.0, price_of, server_tokens)
    other = ModelSpec("hosted_vllm/ft", "hosted_vllm/ft")
    assert budget.reserve(other, request(1, 1, spec=other)) is None
    error = budget.refusal(other)
    assert str(error) == ("medhelm budget of $1: no price for hosted_vllm/ft, request not sent "
                          "(add it to --medhelm-prices FILE)")
    assert isinstance(error, BudgetExhausted)
    assert not budget.exhausted and budget.not_sent == 1
    assert budget.reserve(SPEC, request(1, 1)) is not None


def test_budget_exhausted_message_and_its_structured_round_trip():
    budget = Budget(0.05, price_of, server_tokens)
    error = budget.refusal(SPEC)
    assert isinstance(error, BudgetExhausted) and isinstance(error, ModelError)
    assert str(error) == "medhelm budget of $0.05 reached: request not sent"
    assert str(error).startswith(BUDGET_PREFIX)
    assert error.model == "openai/m" and error.status is None and not error.retryable
    # stored and read back (the cache, the sender process's pipe) as a structured value, never parsed from text
    back = ModelError.from_json(error.to_json())
    assert type(back) is BudgetExhausted and str(back) == str(error) and back.model == "openai/m"
    # a provider whose message happens to read like a refusal is still a provider error
    other = ModelError.from_json(ModelError("openai/m", "medhelm budget of $3 reached", 500).to_json())
    assert type(other) is ModelError and other.status == 500


@pytest.mark.parametrize("limit, text", [(0.05, "0.05"), (10, "10"), (12.5, "12.5"), (0, "0"), (1e-7, "1e-07"),
                                         (1234.5678, "1234.5678")])
def test_the_limit_is_shown_as_written(limit, text):
    assert usd_limit(limit) == text


def test_summary_and_json():
    budget = Budget(0.05, price_of, server_tokens)
    assert budget.summary() == "medhelm budget: spent $0.00 of $0.0500"
    r = budget.reserve(SPEC, request(2000, 500))  # 0.005 + 0.005
    budget.settle(r, 2000, 730)  # 0.005 + 0.0073
    assert budget.spent == 2000 * 2.5e-6 + 730 * 1e-5
    budget.reserve(SPEC, request(20000, 500, "big"))  # 0.05 + 0.005: refused
    budget.reserve(SPEC, request(1, 1, "small"))
    assert budget.summary() == "medhelm budget: spent $0.0123 of $0.0500; 2 requests not sent (their items are skipped)"
    assert budget.as_json() == {"limit_usd": 0.05, "spent_usd": 2000 * 2.5e-6 + 730 * 1e-5, "not_sent": 2,
                                "exhausted": True}
    tokens = iter([10**6, 10**8])  # 2.50, then 250.00 more: refused
    big = Budget(250, price_of, lambda spec, req: next(tokens))
    big.reserve(SPEC, request(1, 0))
    big.reserve(SPEC, request(1, 0, "huge"))
    assert big.summary() == "medhelm budget: spent $0.00 of $250.00; 1 request not sent (their items are skipped)"


@pytest.mark.parametrize("limit", [-1.0, float("nan"), float("inf")])
def test_a_bad_limit_is_refused(limit):
    with pytest.raises(ValueError, match="finite number of USD >= 0"):
        Budget(limit, price_of)


def test_the_default_counter_is_the_dry_runs():
    """Without count_tokens, prompt tokens are counted as --medhelm-dry-run counts them (OpenAI's tokenizers)."""
    from pytest_medhelm.tokens import TokenCounter

    spec = ModelSpec("openai/gpt-4o", "openai/gpt-4o")
    prompt = "Answer with A, B, C or D.\n\nQuestion: Which drug is first line for hypertension in pregnancy?"
    req = ChatRequest.for_prompt(spec, prompt, 5)
    budget = Budget(1.0, lambda s: PRICE)
    expected = TokenCounter()("openai/gpt-4o", prompt)
    assert 15 < expected < 40
    r = budget.reserve(spec, req)
    assert r.prompt_tokens == expected
    assert r.upper == expected * 2.5e-6 + 5 * 1e-5


# ----------------------------------------------------------------------------------------------------------------
# the scheduler enforcing it, against the real test server


def make_jobs(url: str, n: int, max_tokens: int = 1, model: str = "openai/m") -> list[Job]:
    spec = ModelSpec(model, model, url)
    return [Job(spec, ChatRequest.for_prompt(spec, f"question {i}?", max_tokens)) for i in range(n)]


def make_scheduler(tmp_path: Path, budget: Budget | None, **settings) -> Scheduler:
    defaults = dict(concurrency=4, timeout=5.0, retries=3, backoff_base=0.01, backoff_max=0.05)
    defaults.update(settings)
    return Scheduler(AnswerCache(tmp_path / "cache", run_id="run"), Settings(**defaults), budget=budget)


#: "question N?" is 2 tokens to the server, the answer "A" 1: with max_tokens=1 the bound is the actual cost
PER_REQUEST = 2 * 2.5e-6 + 1 * 1e-5


def prompts_received(srv) -> set[str]:
    return {r["json"]["messages"][-1]["content"] for r in srv.requests}


def test_fifty_jobs_at_concurrency_4_with_room_for_ten(tmp_path):
    budget = Budget(PER_REQUEST * 10.5, price_of, server_tokens)
    with running_server(answer="A", latency=0.02) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=4)
        jobs = make_jobs(srv.url, 50)
        failures = sched.send_all(jobs)
        assert srv.count == 10
        received = prompts_received(srv)
        assert srv.max_in_flight <= 4
    assert len(received) == 10
    sent = [j for j in jobs if j.request.prompt_text in received]
    refused = [j for j in jobs if j.request.prompt_text not in received]
    assert len(refused) == 40
    assert set(failures) == {j.key for j in refused}
    assert all(type(e) is BudgetExhausted for e in failures.values())
    assert {str(e) for e in failures.values()} == {f"medhelm budget of ${usd_limit(PER_REQUEST * 10.5)} reached: "
                                                   "request not sent"}
    # the money
    assert budget.spent == math.fsum([PER_REQUEST] * 10) <= budget.limit_usd
    assert budget.in_flight == 0.0
    assert (budget.sent, budget.answered, budget.not_sent) == (10, 10, 40)
    # the cache: the answers that were sent, and never an error as an answer
    cache = sched.cache
    for job in sent:
        answer = cache.get(job.key)
        assert answer is not None and answer.text == "A" and (answer.tokens_in, answer.tokens_out) == (2, 1)
        assert cache.get_error(job.key) is None
    for job in refused:
        assert cache.get(job.key) is None
        stored = cache.get_error(job.key)
        assert type(stored) is BudgetExhausted and str(stored) == str(failures[job.key])
    # the stats: refused jobs are not failures
    s = sched.stats
    assert (s["requests"], s["answers"], s["failed"], s["not_sent_budget"], s["retries"]) == (10, 10, 0, 40, 0)
    assert sched.summary() == "40 request(s) not sent (--medhelm-budget reached)"
    assert budget.summary() == ("medhelm budget: spent $0.00015 of $0.00016; 40 requests not sent "
                                "(their items are skipped)")


def test_reservations_in_flight_stop_a_burst(tmp_path):
    """max_tokens 50 but answers of 1 token: the bound (0.000505) is far above the cost (0.000015). With room for
    two bounds, the first two go out, the third finds them in flight and is refused, and so is everything after."""
    upper = 2 * 2.5e-6 + 50 * 1e-5
    budget = Budget(2 * upper, price_of, server_tokens)
    with running_server(answer="A", latency=0.05) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=4)
        failures = sched.send_all(make_jobs(srv.url, 12, max_tokens=50))
        assert srv.count == 2
    assert len(failures) == 10
    assert budget.spent == 2 * PER_REQUEST and budget.in_flight == 0.0


def test_sequential_sending_fits_as_many_as_the_bound_allows(tmp_path):
    """One at a time: the n-th request goes out while (n-1) answers (0.000015 each) + its bound (0.000505) fit in
    0.0006: n - 1 <= 6.33, so 7 are sent."""
    budget = Budget(0.0006, price_of, server_tokens)
    with running_server(answer="A") as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=1)
        jobs = make_jobs(srv.url, 20, max_tokens=50)
        failures = sched.send_all(jobs)
        assert srv.count == 7
        assert prompts_received(srv) == {f"question {i}?" for i in range(7)}  # in order: a prefix of the run
    assert set(failures) == {j.key for j in jobs[7:]}
    assert budget.spent == math.fsum([PER_REQUEST] * 7)


def test_retries_reserve_once_per_job(tmp_path):
    """Two 500s then answers: the retried job is reserved once and settled once; the budget has room for exactly
    the three jobs, so a second reservation for the retry would have refused the last job."""
    budget = Budget(PER_REQUEST * 3, price_of, server_tokens)
    with running_server(answer="A", faults=[("status", 500), ("status", 500)]) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=1, retries=3)
        failures = sched.send_all(make_jobs(srv.url, 3))
        assert srv.stats()["by_status"] == {"500": 2, "200": 3}
    assert failures == {}
    assert (budget.sent, budget.answered, budget.not_sent) == (3, 3, 0)
    assert budget.spent == math.fsum([PER_REQUEST] * 3) and budget.in_flight == 0.0
    assert sched.stats["retries"] == 2 and sched.stats["requests"] == 5


def test_every_malformed_reply_is_counted_at_its_upper_bound(tmp_path):
    """A 2xx that is no chat completion came back: the provider may have charged for it. Each such try is counted at
    its upper bound, and the next try reserves anew: two malformed replies then an answer cost three requests."""
    budget = Budget(PER_REQUEST * 10, price_of, server_tokens)
    with running_server(answer="A", faults=[("malformed",), ("malformed",)]) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=1, retries=3)
        failures = sched.send_all(make_jobs(srv.url, 1))
        assert srv.count == 3
    assert failures == {} and sched.stats["malformed"] == 2
    assert budget.spent == math.fsum([PER_REQUEST] * 3) and budget.in_flight == 0.0


def test_malformed_replies_never_take_a_job_past_the_budget(tmp_path):
    """Room for two and a half requests; the provider answers malformed bodies: the third try does not fit, so it is
    not sent, and the job is refused by the budget (its items skipped), never over the limit."""
    budget = Budget(PER_REQUEST * 2.5, price_of, server_tokens)
    with running_server(answer="A", faults=[("malformed",)] * 3) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=1, retries=3)
        jobs = make_jobs(srv.url, 1)
        failures = sched.send_all(jobs)
        assert srv.count == 2
    assert isinstance(failures[jobs[0].key], BudgetExhausted)
    assert budget.spent == math.fsum([PER_REQUEST] * 2) <= budget.limit_usd and budget.in_flight == 0.0


def test_a_failed_request_releases_its_reservation(tmp_path):
    """Room for 4.5 requests, 5 jobs, one fails for good: it costs nothing, so the other four all fit."""
    budget = Budget(PER_REQUEST * 4.5, price_of, server_tokens)
    with running_server(answer="A", fail_matching={"question 1?": ("status", 500)}) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=1, retries=1)
        jobs = make_jobs(srv.url, 5)
        failures = sched.send_all(jobs)
        assert srv.count == 6  # the failing one twice
    assert set(failures) == {jobs[1].key}
    assert type(failures[jobs[1].key]) is ModelError
    assert budget.spent == math.fsum([PER_REQUEST] * 4) and budget.in_flight == 0.0
    assert (budget.sent, budget.answered, budget.not_sent) == (5, 4, 0)
    assert (sched.stats["failed"], sched.stats["not_sent_budget"]) == (1, 0)


def test_a_dead_endpoint_releases_every_reservation(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    budget = Budget(PER_REQUEST * 100, price_of, server_tokens)
    sched = make_scheduler(tmp_path, budget, concurrency=2, retries=1)
    failures = sched.send_all(make_jobs(f"http://127.0.0.1:{port}/v1", 6))
    assert len(failures) == 6 and not any(isinstance(e, BudgetExhausted) for e in failures.values())
    assert budget.spent == 0.0 and budget.in_flight == 0.0 and budget.not_sent == 0


def test_an_items_own_question_on_an_exhausted_budget_is_refused_and_not_sent(tmp_path):
    from pytest_medhelm.sending.background import ask_alone

    budget = Budget(PER_REQUEST, price_of, server_tokens)
    with running_server(answer="A") as srv:
        sched = make_scheduler(tmp_path, budget)
        first, second = make_jobs(srv.url, 2)
        answer = ask_alone(sched, first)
        assert isinstance(answer, Completion) and answer.text == "A"
        refused = ask_alone(sched, second)
        assert isinstance(refused, BudgetExhausted)
        assert srv.count == 1
    assert str(refused) == f"medhelm budget of ${usd_limit(PER_REQUEST)} reached: request not sent"
    # as the run reads it back from the cache's error entries and re-raises it for the item
    stored = sched.cache.get_error(second.key)
    assert type(stored) is BudgetExhausted and str(stored) == str(refused)


def test_two_threads_share_one_budget(tmp_path):
    """The background sender's loop and an item on the main thread send through the same scheduler and budget."""
    budget = Budget(PER_REQUEST * 10.5, price_of, server_tokens)
    with running_server(answer="A", latency=0.01) as srv:
        sched = make_scheduler(tmp_path, budget, concurrency=3)
        jobs = make_jobs(srv.url, 60)
        results: dict[int, dict] = {}

        def send(part: int) -> None:
            results[part] = sched.send_all(jobs[part::2])

        threads = [threading.Thread(target=send, args=(p,)) for p in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert srv.count == 10
    assert len(results[0]) + len(results[1]) == 50
    assert budget.spent == math.fsum([PER_REQUEST] * 10) and budget.in_flight == 0.0


def test_without_a_budget_nothing_changes(tmp_path):
    with running_server(answer="A") as srv:
        sched = make_scheduler(tmp_path, None, concurrency=4)
        assert sched.budget is None
        assert sched.send_all(make_jobs(srv.url, 20)) == {}
        assert srv.count == 20
    assert sched.stats["not_sent_budget"] == 0 and sched.summary() == ""


# ----------------------------------------------------------------------------------------------------------------
# the whole run: `pytest --medhelm-budget USD` as users run it
# ----------------------------------------------------------------------------------------------------------------

# $1 per completion token and nothing per prompt token: every toy request (max_tokens=1) is bounded by exactly $1
# and costs exactly $1 (the server answers "A", one token), so a budget of $5 sends exactly five requests
DOLLAR_PER_ANSWER = '["openai/toy-model"]\ninput_per_million = 0.0\noutput_per_million = 1000000.0\n'


def budget_run(pytester, data, server, *extra: str) -> pytest.RunResult:
    return pytester_runs.run(pytester, "-rs", "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                             "--medhelm-data-dir", str(data), *extra)


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_a_run_stops_sending_at_the_budget_and_skips_the_rest(pytester, toy, xdist):
    import json

    data = toy(20)
    prices = pytester.path / "prices.toml"
    prices.write_text(DOLLAR_PER_ANSWER)
    out = pytester.path / "results.json"
    with running_server(answer="A") as server:
        result = budget_run(pytester, data, server, "--medhelm-prices", str(prices), "--medhelm-budget", "5",
                            "--medhelm-concurrency", "4", "--medhelm-json", str(out),
                            *xdist)
        assert server.count == 5
    assert result.ret == 0, result.stdout.str()
    counts = result.parseoutcomes()
    assert counts.get("skipped") == 15 and counts.get("passed", 0) + counts.get("missed", 0) == 5, counts
    result.stdout.fnmatch_lines(["*medhelm budget of $5 reached: request not sent*"])
    if "no:xdist" in xdist:  # (under xdist the terminal summary is the controller's: the same line)
        result.stdout.fnmatch_lines(["*medhelm budget: spent $5* of $5*; 15 requests not sent*"])
    report = json.loads(out.read_text())
    assert report["run"]["budget"]["not_sent"] == 15
    assert report["run"]["budget"]["spent_usd"] == 5.0 and report["run"]["budget"]["limit_usd"] == 5.0
    scored = [i for i in report["instances"] if i.get("score") is not None]
    assert len(scored) == 5 and sum(i["cost_usd"] for i in scored) == 5.0


def test_a_budget_without_a_price_is_refused_before_anything_is_sent(pytester, toy):
    data = toy(4)
    with running_server(answer="A") as server:
        result = budget_run(pytester, data, server, "--medhelm-budget", "1", "-p", "no:xdist")
        assert server.count == 0
    assert result.ret == 4, result.stdout.str()
    text = result.stdout.str() + result.stderr.str()
    assert "--medhelm-budget needs a price for openai/toy-model" in text and "--medhelm-prices" in text


def test_money_limits_and_refusal_details():
    """Edges found by mutation testing: the $1 boundary of the summary, the limit's trailing zeros, the refusal's
    attributes, not-sent counts and answers without token counts."""
    budget = Budget(1, price_of, server_tokens)
    assert budget.summary() == "medhelm budget: spent $0.00 of $1.00"
    assert Budget(0.999, price_of, server_tokens).summary() == "medhelm budget: spent $0.00 of $0.9990"
    assert Budget(1.5, price_of, server_tokens).summary() == "medhelm budget: spent $0.00 of $1.50"
    assert usd_limit(100.0) == "100" and usd_limit(0.5) == "0.5" and usd_limit(1e-9) == "1e-09"
    unpriced_spec = ModelSpec("openai/x", "openai/x")
    error = Budget(2.5, price_of, server_tokens).refusal(unpriced_spec)
    assert type(error) is BudgetExhausted and error.model == "openai/x"
    assert str(error) == ("medhelm budget of $2.5: no price for openai/x, request not sent "
                          "(add it to --medhelm-prices FILE)")
    assert str(Budget(2.5, price_of, server_tokens).refusal(SPEC)) == "medhelm budget of $2.5 reached: request not sent"
    # every refusal is counted: the unpriced, the one that does not fit, and those after it
    unknown = ModelSpec("openai/unknown", "openai/unknown")
    assert budget.reserve(unknown, request(1, 1, spec=unknown)) is None
    assert budget.reserve(unknown, request(1, 1, spec=unknown)) is None
    assert budget.not_sent == 2 and not budget.as_json()["exhausted"]
    reservation = budget.reserve(SPEC, request(1, 1))
    assert reservation.model == "openai/m"
    # an answer without token counts costs nothing counted; a reported cost equal to ours changes nothing
    assert budget.settle(reservation, None, None) == 0.0
    r2 = budget.reserve(SPEC, request(1, 1))
    assert budget.settle(r2, 1, 1, reported_cost=IN + OUT) == IN + OUT
    assert budget.reserve(SPEC, request(1, 10**6)) is None  # 10 USD of output: refused
    assert budget.reserve(SPEC, request(1, 1)) is None and budget.not_sent == 4


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
