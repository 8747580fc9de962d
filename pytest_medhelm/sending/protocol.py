"""The two interfaces of the sending engine: the :class:`Sender` the run talks to, and the :class:`Transport` a
request goes out through.

* A **sender** takes the run's planned jobs (``start``), hands each item its own result (``wait``), takes a request
  an item needs now ahead of what waits (``ask``), and stops (``stop``). Two senders keep this contract:
  :class:`~.background.BackgroundSender` (the scheduler's loop on a thread) keeps it, request by request, or with a
  :class:`Way` of sending rounds of them: :class:`~.batching.Batching` (``--medhelm-batch``: the batchable requests
  gathered into a provider's Batch API). :class:`~pytest_medhelm.run.delivery.Delivery` chooses the way once and
  knows only this protocol.
* A **way** of sending decides which of the sender's jobs it takes (the others go directly) and sends each round of
  them; it sees the sender only through :class:`WaySender` (what a result it brought changes, a job handed back).
* A **transport** sends one chat request to one endpoint and returns its :class:`~pytest_medhelm.values.Completion`,
  or raises :class:`~.transport.RequestFailed` (status, ``Retry-After``, whether another try may help) for the one
  retry policy (:mod:`.retry`) to act on: :class:`~.transport.OpenAIWire` (an OpenAI-compatible endpoint by URL,
  over one aiohttp session) and :class:`~.transport.LitellmTransport` (every other provider, through litellm).
  :func:`~pytest_medhelm.endpoints.wire.uses_openai_wire` says which a model takes; both build the request's body
  with :func:`~.reasoning.wire_request` (its parameters from :func:`~.reasoning.generation_parameters`), the one
  place a model's wire request is made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_medhelm.sending.jobs import Job
    from pytest_medhelm.values import ChatRequest, Completion, ModelError, ModelSpec

    Result = Completion | ModelError


class Sender(Protocol):
    """What the run knows of the engine that sends its requests (see the module)."""

    #: finished jobs (answered or failed for good) and jobs queued, by kind ("answers", "jury"): the status line's
    done: Counter[str]
    queued: Counter[str]

    def start(self, jobs: list[Job]) -> None:
        """Begin sending ``jobs`` (in this order, what an item waits for first) and return at once."""

    def expects(self, key: str) -> bool:
        """Whether the result for the request ``key`` is (or will be) sent here."""

    def has(self, key: str) -> bool:
        """Whether that result is already here."""

    def wait(self, key: str, on_wait: Callable[[float], None] | None = None) -> Result:
        """The result for ``key`` once it is here (``on_wait(seconds)`` every :data:`~.background.WAIT_TICK_S`
        seconds meanwhile); raises :class:`~.background.SenderCrashed` when the sender stopped before it."""

    def ask(self, job: Job) -> Result | None:
        """Send ``job`` ahead of what waits and return its result; None when the sender takes no more requests."""

    def stop(self, timeout: float = 10.0, drain: float | None = None) -> None:
        """Stop sending (``drain``: let what is in flight finish first, for at most that many seconds)."""

    def summary_lines(self) -> list[str]:
        """What the sending did, for the terminal summary."""

    @property
    def summary(self) -> str:
        """One more line of what retrying and rate limiting did, or ""."""

    @property
    def broken(self) -> dict[str, str]:
        """Models every request of which fails alike (a wrong key, an unknown model), with the message."""

    @property
    def crash(self) -> str | None:
        """Why the sender stopped before its work was done (a bug), or None."""


class WaySender(Protocol):
    """What a :class:`Way` sees of the sender it sends for (on the sender's loop)."""

    def has(self, key: str) -> bool:
        """Whether the result for ``key`` is already here."""

    def finish(self, job: Job, result: Result) -> None:
        """``result`` (stored) is ``job``'s: its item gets it; the jobs that follow from it are routed."""

    def route(self, job: Job) -> None:
        """A claimed job into the next round, or sent directly when no way takes it (now)."""


class Way(Protocol):
    """A way of sending: which jobs go in rounds, and how a round is sent (see the module)."""

    def open(self, sender: WaySender) -> None:
        """On the sender's loop, before the first job: the sender the results go to."""

    def takes(self, job: Job) -> bool:
        """Whether ``job`` waits for the next round (else it is sent directly)."""

    async def send_round(self, jobs: list[Job]) -> None:
        """Send ``jobs`` and give every one its result (:meth:`WaySender.finish`) or hand it back (``route``)."""

    async def close(self) -> None:
        """On the sender's loop, once it ends: release what the way holds (its connections)."""

    def summary_lines(self) -> list[str]:
        """What the way did, for the terminal summary."""

    @property
    def status(self) -> str:
        """The rounds in flight, for the line of an item that waits (``batch batch_1 in_progress 3/12``), or ""."""


class Transport(Protocol):
    """One wire to a model (see the module)."""

    async def send(self, spec: ModelSpec, request: ChatRequest, timeout: float) -> Completion:
        """``request`` sent to ``spec``'s endpoint, its reply checked (:mod:`.replies`), within ``timeout`` s."""
