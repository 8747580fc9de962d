"""What is sent: a :class:`Job` is one request to one model, as the scheduler and its serve loop take it."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_medhelm.values import ChatRequest, ModelSpec


@dataclass(frozen=True)
class Job:
    spec: ModelSpec
    request: ChatRequest
    #: an item waits for it now (its own question, asked while the run's answers are still being sent): it goes
    #: before every request that only waits its turn
    urgent: bool = False

    @property
    def key(self) -> str:
        return self.request.cache_key()
