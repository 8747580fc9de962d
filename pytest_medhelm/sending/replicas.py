"""Several endpoints serving one model (``--medhelm-endpoint MODEL=URL1,URL2,...``): which one a request goes to.

A fine-tune served by several vLLM replicas (data parallel), or by a vLLM and a TGI server, is one model: its
answers are cached under the model and the group's canonical value (``ModelSpec.api_base``, made by
:func:`pytest_medhelm.values.replica_group`: the URLs sorted), never under the replica that happened to answer, so a
re-run with the URLs listed in another order, or answered by other replicas, finds every answer.

The scheduler asks :class:`ReplicaTable` for a replica before each try of a request:

* **least busy**: the replica with the fewest of this process's requests in flight to it (waiting for its window
  or slots included), then the one sent the fewest so far, then the first of the sorted URLs, so that requests sent
  one at a time alternate;
* **rest**: a replica whose request failed at the connection (refused, reset, dropped, no answer within the
  timeout) or with a 5xx is rested for ``REST_S`` seconds: the request goes at once to another replica that is not
  resting (a failover is not one of the request's ``--medhelm-retries``: the request did nothing wrong), and the
  others carry the run. When its rest is over the next request tries it again; an answer ends the rest;
* **every replica resting**: the one whose rest ends first is tried, and the failure counts as one of the
  request's tries, as for a model with one endpoint; when they all fail to connect the group is down as one
  endpoint (``Scheduler.down``).

Each replica keeps its own rate-limit window (the scheduler's AIMD on 429s, keyed by URL) and its own slots. A 429
is the replica asking to slow down, not a failure: it lowers that replica's window, and the request's retry goes to
whichever replica is least busy then.
"""

from __future__ import annotations

import time
from collections import Counter

from pytest_medhelm.values import ModelSpec

#: how long a replica that failed gets no request (after which one request tries it again)
REST_S = 15.0


class ReplicaTable:
    """This process's view of the replicas of every group: requests in flight to each, requests sent to each, and
    which ones are resting. Lives on one event loop (a scheduler's); a lookup costs a few comparisons."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.resting_until: dict[str, float] = {}
        #: replica URL -> why it was last rested (for the run's summary line)
        self.rested: dict[str, str] = {}

    def choose(self, spec: ModelSpec) -> str:
        """The replica of ``spec``'s group that its next try goes to."""
        urls = spec.urls
        now = time.monotonic()
        awake = [url for url in urls if self.resting_until.get(url, 0.0) <= now]
        if not awake:  # all resting: the one back soonest
            return min(urls, key=lambda url: self.resting_until[url])
        return min(awake, key=lambda url: (self.in_flight[url], self.sent[url]))  # (ties: the first, URLs sorted)

    def can_fail_over(self, spec: ModelSpec) -> bool:
        """Whether a replica of ``spec``'s group is not resting (after the one that just failed was rested)."""
        now = time.monotonic()
        return any(self.resting_until.get(url, 0.0) <= now for url in spec.urls)

    def entered(self, url: str) -> None:
        self.in_flight[url] += 1
        self.sent[url] += 1

    def left(self, url: str) -> None:
        self.in_flight[url] -= 1

    def rest(self, url: str, why: str) -> None:
        self.resting_until[url] = time.monotonic() + REST_S
        self.rested[url] = why

    def answered(self, url: str) -> None:
        self.resting_until.pop(url, None)


def is_replica_failure(status: int | None) -> bool:
    """A failure that says the replica is unwell, not the request: no connection or no answer (no status), or a
    5xx. A 4xx is the request's (or, 429, the replica's rate limit: its window handles that)."""
    return status is None or status >= 500
