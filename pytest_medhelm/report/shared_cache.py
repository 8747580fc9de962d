"""``run.shared_cache``: the run's shared answer cache (``--medhelm-cache-url``) as the results record it."""

from __future__ import annotations

from pydantic import Field

from pytest_medhelm.report.record_base import Record, about


class SharedCacheState(Record):
    """``--medhelm-cache-url``: the run's shared answer cache, and whether it answered."""

    url: str = Field(description="the Redis URL, its password as ***")
    answered: bool = about("it answered at start-up and through the run, in every process of the run (xdist "
                           "workers included; false: the run went on with its local cache only from then on)", True)
    problem: str | None = about("why it did not: not reachable at start-up, no answer within the deadline of one "
                                "operation, an error reply, stopped answering during the run")
    hits: int = about("entries the run's processes read from it", 0)
    writes: int = about("entries the run's processes wrote to it", 0)
