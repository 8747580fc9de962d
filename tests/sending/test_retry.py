"""The one retry policy (pytest_medhelm/sending/retry.py), by itself: which failures get another try, how many, and
how long is waited between them. The scheduler's use of it against a real server is tests/sending/test_scheduler.py's
fault matrix; batch administration's is tests/sending/test_batching_faults.py."""

from __future__ import annotations

import asyncio

import pytest

from pytest_medhelm.sending.retry import RetryPolicy, retrying, retrying_raised
from pytest_medhelm.sending.transport import RequestFailed

QUICK = RetryPolicy(retries=3, backoff_base=0.001, backoff_max=0.004, retry_after_max=0.01)


def tries_of(outcomes: list[object]) -> tuple[list[int], object]:
    """How many tries ``retrying`` made of a call that gives ``outcomes`` in turn, with the waits it announced."""
    calls: list[int] = []
    waits: list[float] = []

    async def attempt() -> object:
        calls.append(1)
        return outcomes[len(calls) - 1]

    result = asyncio.run(retrying(QUICK, attempt, on_retry=waits.append))
    return [len(calls), len(waits)], result


def test_a_success_is_not_tried_again():
    assert tries_of(["answer"]) == ([1, 0], "answer")


def test_a_retryable_failure_is_tried_again_until_it_succeeds():
    failure = RequestFailed("HTTP 503", 503)
    assert tries_of([failure, failure, "answer"]) == ([3, 2], "answer")


def test_the_tries_are_bounded_and_the_last_failure_is_returned():
    failures = [RequestFailed(f"HTTP 500 #{n}", 500) for n in range(10)]
    counts, result = tries_of(failures)
    assert counts == [1 + QUICK.retries, QUICK.retries]
    assert result is failures[QUICK.retries]


def test_a_failure_not_worth_another_try_ends_at_once():
    unauthorized = RequestFailed("HTTP 401", 401, retryable=False)
    assert tries_of([unauthorized, "answer"]) == ([1, 0], unauthorized)


def test_retry_after_is_honoured_and_capped():
    policy = RetryPolicy(retries=3, backoff_base=5.0, retry_after_max=60.0)
    assert policy.delay(RequestFailed("429", 429, retry_after=2.5), 1) == 2.5
    assert policy.delay(RequestFailed("429", 429, retry_after=3600.0), 1) == 60.0


def test_backoff_doubles_with_jitter_and_is_capped():
    policy = RetryPolicy(retries=10, backoff_base=0.5, backoff_max=30.0)
    failure = RequestFailed("HTTP 502", 502)
    for number, base in ((1, 0.5), (2, 1.0), (3, 2.0), (10, 30.0)):
        delays = [policy.delay(failure, number) for _ in range(200)]
        assert all(0.5 * base <= d < 1.5 * base for d in delays)
        assert max(delays) - min(delays) > 0.1 * base  # jittered: the retries of a burst do not arrive together


def test_a_raising_call_is_retried_and_its_last_failure_raised():
    calls: list[int] = []

    async def upload() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RequestFailed("connection reset")
        return "file-1"

    assert asyncio.run(retrying_raised(QUICK, upload)) == "file-1" and len(calls) == 3

    async def always_down() -> str:
        calls.append(1)
        raise RequestFailed("HTTP 503", 503)

    calls.clear()
    with pytest.raises(RequestFailed, match="HTTP 503"):
        asyncio.run(retrying_raised(QUICK, always_down))
    assert len(calls) == 1 + QUICK.retries
