"""``--medhelm-budget USD``: a spending cap enforced before each request is sent.

The rule: no new request is sent once what was spent plus the upper bound of what is in flight would exceed the
limit. What was not sent is skipped with the reason, and the summary says so.

How a request is accounted (:class:`Budget`):

* **Reserve** (just before the first try is sent): the request's upper bound, ``prompt tokens × input price +
  max_output_tokens × output price`` (the answer limit plus a reasoning model's budget), is added to what is in
  flight. It is refused (nothing is sent) when ``spent + in flight + upper bound > limit``.
* **Settle** (an answer came back): the reservation is replaced by the actual cost, ``tokens_in × input price +
  tokens_out × output price`` (:func:`pytest_medhelm.cost.cost`), or the cost the provider path reported when that
  is higher (a cap errs on the side of stopping early). An actual cost above the bound (a prompt counted short)
  is still counted in full.
* **Unknown usage** (the reply had no token counts, or a malformed reply came back): the request is counted at its
  reserved upper bound, never at $0 (a server that omits ``usage`` could otherwise spend without limit); a
  negative count is counted as 0 (pytest_medhelm/sending/replies.py validates counts before they get here).
* **Release** (the request failed for good, without an answer): the reservation is dropped and nothing is
  counted: a failed request costs nothing we know of.

One reservation per request, whatever its retries: only one answer comes back, so a retry is not counted again.

**The first refusal stops the run.** Once one request has been refused, every later one is refused too, even one
small enough to fit in what is left. A cap that squeezed in whichever small requests happen to come next would
leave a run with a random, biased subset of benchmarks answered (the short prompts); stopping cleanly leaves a
prefix of the run, in the order it was sent, and every item after it skipped with the same reason. The price of
that choice: a request refused because of what is in flight is not retried once those answers come back cheaper
than their bounds, so a run at concurrency C may stop up to about C upper bounds short of the limit.

Prices: ``price_of(spec)`` gives (USD per prompt token, USD per completion token), or None when unknown. A
``local/...`` model (llama.cpp on this machine) without a price costs nothing. Any other model without a price
cannot be bounded: :func:`unpriced` lists them so that the session refuses the run up front (a usage error); a
request to one that slips through anyway (a test body asking another model) is refused, without stopping the
others.

Prompt tokens are counted with :class:`pytest_medhelm.tokens.TokenCounter` (the same count as
``--medhelm-dry-run``: exact for OpenAI models, ``cl100k_base`` as an approximation for the others). It loads two
tokenizers, so it is created at the first reservation, and only when a budget is set. For a non-OpenAI
model the count can be short by the tokenizer's difference (typically 10-20 %), and the cap can then be overshot
by that much of the prompts of the last requests in flight; pass a stricter ``count_tokens`` for a hard bound.

Sums are kept exactly (:class:`fractions.Fraction` of each float cost) and compared with the limit exactly, so
whether a request fits never depends on the order in which the answers arrive; ``spent`` is the correctly rounded
sum of the individual costs (``math.fsum``).

Thread-safe: the scheduler's loop may run in a background thread while items on the main thread send their own
requests through the same budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_medhelm.cost import Price, cost, format_usd
from pytest_medhelm.values import BudgetExhausted, is_llama_cpp_model

if TYPE_CHECKING:
    import sqlite3

    from pytest_medhelm.values import ChatRequest, ModelSpec

PriceOf = Callable[["ModelSpec"], "Price | None"]
CountTokens = Callable[["ModelSpec", "ChatRequest"], int]

#: every message of a request refused by the budget starts with this
BUDGET_PREFIX = "medhelm budget of $"
FREE: Price = (0.0, 0.0)


def usd_limit(value: float) -> str:
    """The limit as the user wrote it: ``0.05``, ``10``, ``12.5`` (no trailing zeros)."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text != "0" or value == 0 else repr(value)


def unpriced(specs: Iterable[ModelSpec], price_of: PriceOf) -> list[str]:
    """The names of the models (in order, once each) that have no price and are not ``local/...`` models: a
    budget cannot bound what they cost."""
    names: list[str] = []
    for spec in specs:
        if spec.name in names or is_llama_cpp_model(spec.name):
            continue
        if price_of(spec) is None:
            names.append(spec.name)
    return names


@dataclass(eq=False)
class Reservation:
    """One request's place in the budget, from just before it is sent until its answer (or failure)."""

    model: str
    price: Price
    prompt_tokens: int
    max_tokens: int
    #: the upper bound reserved, USD
    upper: float
    done: bool = field(default=False, repr=False)


@dataclass
class LedgerState:
    """What a budget has counted so far (exact sums)."""

    spent: Fraction = Fraction(0)
    in_flight: Fraction = Fraction(0)
    exhausted: bool = False
    not_sent: int = 0
    sent: int = 0
    answered: int = 0


class MemoryLedger:
    """The budget's counts in this process only (a budget used outside a run, in tests and scripts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = LedgerState()

    @contextlib.contextmanager
    def update(self) -> Iterator[LedgerState]:
        with self._lock:
            yield self._state

    def close(self) -> None:
        pass


class SharedLedger:
    """The budget's counts in a small SQLite file that every process of the run updates in one transaction each
    (``BEGIN IMMEDIATE``: one writer at a time), so that the cap holds across the controller, its sender and every
    xdist worker. Sums are stored as exact fractions (``"numerator/denominator"``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._final: LedgerState | None = None  # the last counts, once the file is gone
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))  # private from the first byte
        with self._connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 0), spent TEXT, "
                         "in_flight TEXT, exhausted INTEGER, not_sent INTEGER, sent INTEGER, answered INTEGER)")
            conn.execute("INSERT OR IGNORE INTO ledger VALUES (0, '0', '0', 0, 0, 0, 0)")

    def _connect(self) -> sqlite3.Connection:
        import sqlite3

        return sqlite3.connect(self.path, timeout=60)

    @contextlib.contextmanager
    def update(self) -> Iterator[LedgerState]:
        if self._final is not None:  # the run is over: its figures stay readable, nothing more is counted
            yield dataclasses.replace(self._final)
            return
        with self._lock:
            conn = self._connect()
            try:
                conn.isolation_level = None
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("SELECT spent, in_flight, exhausted, not_sent, sent, answered FROM ledger "
                                   "WHERE id = 0").fetchone()
                state = LedgerState(Fraction(row[0]), Fraction(row[1]), bool(row[2]), *row[3:])
                try:
                    yield state
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("UPDATE ledger SET spent = ?, in_flight = ?, exhausted = ?, not_sent = ?, sent = ?, "
                             "answered = ? WHERE id = 0",
                             (str(state.spent), str(state.in_flight), int(state.exhausted), state.not_sent,
                              state.sent, state.answered))
                conn.execute("COMMIT")
            finally:
                conn.close()

    def close(self) -> None:
        if self._final is None:
            with self.update() as state:
                final = dataclasses.replace(state)
            self._final = final
            self.path.unlink(missing_ok=True)


Ledger = MemoryLedger | SharedLedger


class Budget:
    def __init__(self, limit_usd: float, price_of: PriceOf, count_tokens: CountTokens | None = None,
                 ledger: Ledger | None = None) -> None:
        if not (isinstance(limit_usd, (int, float)) and math.isfinite(limit_usd) and limit_usd >= 0):
            raise ValueError(f"a budget is a finite number of USD >= 0, got {limit_usd!r}")
        self.limit_usd = float(limit_usd)
        self._limit = Fraction(self.limit_usd)
        self._price_of = price_of
        self._count_tokens = count_tokens
        self._counter: Any = None
        self._counter_lock = threading.Lock()
        self._ledger = ledger if ledger is not None else MemoryLedger()

    def close(self) -> None:
        """The run is over: a shared ledger's file goes (its figures are in the results)."""
        self._ledger.close()

    # ------------------------------------------------------------------------------------------ pricing, counting

    def price(self, spec: ModelSpec) -> Price | None:
        """The model's price for the budget: its own, else free for a ``local/...`` model, else None."""
        price = self._price_of(spec)
        if price is None and is_llama_cpp_model(spec.name):
            return FREE
        return price

    def prompt_tokens(self, spec: ModelSpec, request: ChatRequest) -> int:
        if self._count_tokens is not None:
            return int(self._count_tokens(spec, request))
        counter = self._counter
        if counter is None:
            with self._counter_lock:
                if self._counter is None:
                    from pytest_medhelm.tokens import TokenCounter  # (only when a budget is used)

                    self._counter = TokenCounter()
                counter = self._counter
        # each message counted as its own user message: an upper bound on a request of several messages
        return sum(counter(spec.litellm_model, content) for _role, content in request.messages)

    def upper_bound(self, spec: ModelSpec, request: ChatRequest) -> float | None:
        """USD the request can cost at most (every token up to ``max_output_tokens`` written: the answer limit and a
        reasoning model's budget), None without a price."""
        price = self.price(spec)
        if price is None:
            return None
        return cost(self.prompt_tokens(spec, request), request.max_output_tokens, price)

    # ------------------------------------------------------------------------------------------ accounting

    def reserve(self, spec: ModelSpec, request: ChatRequest) -> Reservation | None:
        """Reserve the request's upper bound before it is sent; None (send nothing) when it would not fit, when
        an earlier request was refused, or when the model has no price."""
        price = self.price(spec)
        if price is None:
            with self._ledger.update() as state:
                state.not_sent += 1
            return None
        with self._ledger.update() as state:
            if state.exhausted:  # no need to count tokens: nothing is sent after the first refusal
                state.not_sent += 1
                return None
        tokens = self.prompt_tokens(spec, request)  # outside the lock: the first count loads the tokenizers
        upper = cost(tokens, request.max_output_tokens, price)
        assert upper is not None
        with self._ledger.update() as state:
            if state.exhausted or state.spent + state.in_flight + Fraction(upper) > self._limit:
                state.exhausted = True
                state.not_sent += 1
                return None
            state.in_flight += Fraction(upper)
            state.sent += 1
        return Reservation(spec.name, price, tokens, request.max_output_tokens, upper)

    @staticmethod
    def _close(state: LedgerState, reservation: Reservation) -> None:
        if reservation.done:
            raise ValueError(f"this reservation for {reservation.model} was already settled or released")
        reservation.done = True
        state.in_flight -= Fraction(reservation.upper)

    def settle(self, reservation: Reservation, tokens_in: int, tokens_out: int,
               reported_cost: float | None = None, *, usage_known: bool = True) -> float:
        """The answer came back: count its actual cost instead of the reservation; returns that cost (USD).

        The server's counts are not believed blindly: without them (``usage_known=False``: the reply had no
        usage, or a malformed one) the request costs its reserved upper bound, and a negative count is 0."""
        if usage_known:
            actual = cost(max(0, int(tokens_in or 0)), max(0, int(tokens_out or 0)), reservation.price)
        else:
            actual = reservation.upper
        assert actual is not None
        if (isinstance(reported_cost, (int, float)) and not isinstance(reported_cost, bool)
                and math.isfinite(reported_cost) and reported_cost > actual):
            actual = float(reported_cost)
        with self._ledger.update() as state:
            self._close(state, reservation)
            state.spent += Fraction(actual)
            state.answered += 1
        return actual

    def release(self, reservation: Reservation) -> None:
        """The request failed without an answer: drop its reservation; nothing is counted."""
        with self._ledger.update() as state:
            self._close(state, reservation)

    def refusal(self, spec: ModelSpec) -> BudgetExhausted:
        """The error for a request :meth:`reserve` refused."""
        if self.price(spec) is None:
            message = (f"{BUDGET_PREFIX}{usd_limit(self.limit_usd)}: no price for {spec.name}, request not sent "
                       f"(add it to --medhelm-prices FILE)")
        else:
            message = f"{BUDGET_PREFIX}{usd_limit(self.limit_usd)} reached: request not sent"
        return BudgetExhausted(spec.name, message)

    # ------------------------------------------------------------------------------------------ reading

    def _state(self) -> LedgerState:
        with self._ledger.update() as state:
            return dataclasses.replace(state)

    @property
    def spent(self) -> float:
        """USD spent on the answers received (the correctly rounded sum of their costs)."""
        return float(self._state().spent)

    @property
    def in_flight(self) -> float:
        """USD reserved for the requests sent and not answered yet (their upper bounds)."""
        return float(self._state().in_flight)

    @property
    def not_sent(self) -> int:
        """Requests the budget refused."""
        return self._state().not_sent

    @property
    def sent(self) -> int:
        """Requests the budget let through (reservations made)."""
        return self._state().sent

    @property
    def answered(self) -> int:
        return self._state().answered

    @property
    def exhausted(self) -> bool:
        """True once a request has been refused for not fitting: nothing more is sent."""
        return self._state().exhausted

    def summary(self) -> str:
        """One line for the terminal."""
        state = self._state()
        spent, not_sent = float(state.spent), state.not_sent
        text = f"medhelm budget: spent {format_usd(spent)} of {format_usd(self.limit_usd)}"
        if not_sent:
            text += (f"; {not_sent} request{'s' if not_sent != 1 else ''} not sent "
                     f"(their items are skipped)")
        return text

    def as_json(self) -> dict[str, Any]:
        """For ``results["run"]["budget"]``."""
        state = self._state()
        return {"limit_usd": self.limit_usd, "spent_usd": float(state.spent), "not_sent": state.not_sent,
                "exhausted": state.exhausted}
