"""The one retry policy of the run: every request, an answer's or a judge's, and every call of a batch's
administration (uploading its file, creating it, reading its results), tries again by these rules and no others.

* ``1 + retries`` tries at most; only a failure that says it is worth another try (:attr:`RequestFailed.retryable`:
  a 429, a 5xx, a connection failure, a malformed body) gets one. A 401/403/404 or a 400 ends at once.
* Between tries, the server's ``Retry-After`` when it sent one (capped at ``retry_after_max``: a provider asking
  for an hour does not hang the run), else exponential backoff with jitter: ``backoff_base * 2**(n - 1)`` before
  the n-th retry, capped at ``backoff_max``, times a random factor in [0.5, 1.5), so that the retries of a burst
  do not arrive together.

A try reports its failure by returning it (:func:`retrying`: the scheduler's tries, whose failures are data it
acts on), or by raising it (:func:`retrying_raised`: a client's calls); both go through the same loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from pytest_medhelm.sending.transport import RequestFailed

T = TypeVar("T")

#: called before each wait between tries, with the seconds about to be waited
OnRetry = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: the longest a ``Retry-After`` is honoured for; longer requests wait this long
    retry_after_max: float = 60.0

    def worth_another_try(self, outcome: object) -> bool:
        return isinstance(outcome, RequestFailed) and outcome.retryable

    def delay(self, failure: RequestFailed, retry_number: int) -> float:
        """Seconds to wait before the ``retry_number``-th retry (1 for the first) after ``failure``."""
        if failure.retry_after is not None:
            return min(failure.retry_after, self.retry_after_max)
        backoff = min(self.backoff_max, self.backoff_base * 2.0 ** (retry_number - 1))
        return backoff * (0.5 + random.random())


async def retrying(policy: RetryPolicy, attempt: Callable[[], Awaitable[T | RequestFailed]], *,
                   first: T | RequestFailed | None = None, on_retry: OnRetry | None = None) -> T | RequestFailed:
    """The outcome of ``attempt`` tried by ``policy``: its first success, or its last failure once the tries are
    spent or a failure is not worth another. ``first``: the outcome of a first try already made (the scheduler
    makes it outside this loop, which only the rare failed job enters)."""
    outcome = await attempt() if first is None else first
    retry_number = 0
    while retry_number < policy.retries and isinstance(outcome, RequestFailed) and policy.worth_another_try(outcome):
        retry_number += 1
        wait = policy.delay(outcome, retry_number)
        if on_retry is not None:
            on_retry(wait)
        await asyncio.sleep(wait)
        outcome = await attempt()
    return outcome


async def retrying_raised(policy: RetryPolicy, call: Callable[[], Awaitable[T]], *,
                          on_retry: OnRetry | None = None) -> T:
    """``call``'s result, tried by ``policy``; its :class:`RequestFailed` is raised once the tries are spent."""

    async def attempt() -> T | RequestFailed:
        try:
            return await call()
        except RequestFailed as failure:
            return failure

    outcome = await retrying(policy, attempt, on_retry=on_retry)
    if isinstance(outcome, RequestFailed):
        raise outcome
    return outcome
