"""``--medhelm-budget USD``: a spending cap enforced before each request is sent.

The rule: no new request is sent once what was spent plus the upper bound of what is in flight would exceed the
limit. What was not sent is skipped with the reason, and the summary says so.

How a request is accounted (:class:`Budget`):

* **Reserve** (just before the first try is sent): the request's upper bound, ``prompt tokens × input price +
  max_tokens × output price``, is added to what is in flight. It is refused (nothing is sent) when
  ``spent + in flight + upper bound > limit``.
* **Settle** (an answer came back): the reservation is replaced by the actual cost, ``tokens_in × input price +
  tokens_out × output price`` (:func:`pytest_medhelm.cost.cost`), or the cost the provider path reported when that
  is higher (a cap errs on the side of stopping early). An actual cost above the bound (a prompt counted short)
  is still counted in full.
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

Prompt tokens are counted with :class:`pytest_medhelm.dryrun.TokenCounter` (the same count as
``--medhelm-dry-run``: exact for OpenAI models, ``cl100k_base`` as an approximation for the others). It imports
litellm (seconds), so it is created at the first reservation, and only when a budget is set. For a non-OpenAI
model the count can be short by the tokenizer's difference (typically 10-20 %), and the cap can then be overshot
by that much of the prompts of the last requests in flight; pass a stricter ``count_tokens`` for a hard bound.

Sums are kept exactly (:class:`fractions.Fraction` of each float cost) and compared with the limit exactly, so
whether a request fits never depends on the order in which the answers arrive; ``spent`` is the correctly rounded
sum of the individual costs (``math.fsum``).

Thread-safe: the scheduler's loop may run in a background thread while items on the main thread send their own
requests through the same budget.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pytest_medhelm.cost import Price, cost, format_usd
from pytest_medhelm.models.request import ModelError

if TYPE_CHECKING:
    from pytest_medhelm.models.request import ChatRequest, ModelSpec

PriceOf = Callable[["ModelSpec"], "Price | None"]
CountTokens = Callable[["ModelSpec", "ChatRequest"], int]

#: every message of a request refused by the budget starts with this (after any "MODEL: " prefix)
BUDGET_PREFIX = "medhelm budget of $"
LOCAL_PREFIX = "local/"
FREE: Price = (0.0, 0.0)

_REFUSED = re.compile(r"^(?:\S+: )*(" + re.escape(BUDGET_PREFIX) + r".*)\Z", re.DOTALL)


def usd_limit(value: float) -> str:
    """The limit as the user wrote it: ``0.05``, ``10``, ``12.5`` (no trailing zeros)."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text != "0" or value == 0 else repr(value)


class BudgetExhausted(ModelError):
    """A request the budget refused: it was not sent. Its items are skipped, not errors.

    ``str()`` starts with :data:`BUDGET_PREFIX` (no model prefix), so that the text stored in the cache's error
    entries is recognised by :func:`skip_reason` wherever it is read back."""

    def __init__(self, model: str, limit_usd: float, unpriced: bool = False) -> None:
        self.limit_usd = limit_usd
        self.unpriced = unpriced
        if unpriced:
            message = (f"{BUDGET_PREFIX}{usd_limit(limit_usd)}: no price for {model}, request not sent "
                       f"(add it to --medhelm-prices FILE)")
        else:
            message = f"{BUDGET_PREFIX}{usd_limit(limit_usd)} reached: request not sent"
        super().__init__(model, message)
        self.args = (message,)


def skip_reason(error_message: str) -> str | None:
    """The skip reason for the message of a :class:`BudgetExhausted` (as stored, or re-raised with any number of
    ``MODEL: `` prefixes in front); None for any other error."""
    match = _REFUSED.match(error_message or "")
    return match.group(1) if match else None


def is_local(spec: "ModelSpec") -> bool:
    return spec.name.startswith(LOCAL_PREFIX)


def unpriced(specs: Iterable["ModelSpec"], price_of: PriceOf) -> list[str]:
    """The names of the models (in order, once each) that have no price and are not ``local/...`` models: a
    budget cannot bound what they cost."""
    names: list[str] = []
    for spec in specs:
        if spec.name in names or is_local(spec):
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


class Budget:
    def __init__(self, limit_usd: float, price_of: PriceOf, count_tokens: CountTokens | None = None) -> None:
        if not (isinstance(limit_usd, (int, float)) and math.isfinite(limit_usd) and limit_usd >= 0):
            raise ValueError(f"a budget is a finite number of USD >= 0, got {limit_usd!r}")
        self.limit_usd = float(limit_usd)
        self._limit = Fraction(self.limit_usd)
        self._price_of = price_of
        self._count_tokens = count_tokens
        self._counter: Any = None
        self._counter_lock = threading.Lock()
        self._lock = threading.Lock()
        self._spent = Fraction(0)
        self._in_flight = Fraction(0)
        self._exhausted = False
        self._not_sent = 0
        self._sent = 0
        self._answered = 0

    # ------------------------------------------------------------------------------------------ pricing, counting

    def price(self, spec: "ModelSpec") -> Price | None:
        """The model's price for the budget: its own, else free for a ``local/...`` model, else None."""
        price = self._price_of(spec)
        if price is None and is_local(spec):
            return FREE
        return price

    def prompt_tokens(self, spec: "ModelSpec", request: "ChatRequest") -> int:
        if self._count_tokens is not None:
            return int(self._count_tokens(spec, request))
        counter = self._counter
        if counter is None:
            with self._counter_lock:
                if self._counter is None:
                    from pytest_medhelm.dryrun import TokenCounter  # imports litellm: only when a budget is used

                    self._counter = TokenCounter()
                counter = self._counter
        # each message counted as its own user message: an upper bound on a request of several messages
        return sum(counter(spec.litellm_model, content) for _role, content in request.messages)

    def upper_bound(self, spec: "ModelSpec", request: "ChatRequest") -> float | None:
        """USD the request can cost at most (every token up to ``max_tokens`` written), None without a price."""
        price = self.price(spec)
        if price is None:
            return None
        return cost(self.prompt_tokens(spec, request), request.max_tokens, price)

    # ------------------------------------------------------------------------------------------ accounting

    def reserve(self, spec: "ModelSpec", request: "ChatRequest") -> Reservation | None:
        """Reserve the request's upper bound before it is sent; None (send nothing) when it would not fit, when
        an earlier request was refused, or when the model has no price."""
        price = self.price(spec)
        if price is None:
            with self._lock:
                self._not_sent += 1
            return None
        with self._lock:
            if self._exhausted:  # no need to count tokens: nothing is sent after the first refusal
                self._not_sent += 1
                return None
        tokens = self.prompt_tokens(spec, request)  # outside the lock: the first count may import litellm
        upper = cost(tokens, request.max_tokens, price)
        assert upper is not None
        with self._lock:
            if self._exhausted or self._spent + self._in_flight + Fraction(upper) > self._limit:
                self._exhausted = True
                self._not_sent += 1
                return None
            self._in_flight += Fraction(upper)
            self._sent += 1
        return Reservation(spec.name, price, tokens, request.max_tokens, upper)

    def _close(self, reservation: Reservation) -> None:
        # with self._lock held
        if reservation.done:
            raise ValueError(f"this reservation for {reservation.model} was already settled or released")
        reservation.done = True
        self._in_flight -= Fraction(reservation.upper)

    def settle(self, reservation: Reservation, tokens_in: int, tokens_out: int,
               reported_cost: float | None = None) -> float:
        """The answer came back: count its actual cost instead of the reservation; returns that cost (USD)."""
        actual = cost(int(tokens_in or 0), int(tokens_out or 0), reservation.price)
        assert actual is not None
        if (isinstance(reported_cost, (int, float)) and not isinstance(reported_cost, bool)
                and math.isfinite(reported_cost) and reported_cost > actual):
            actual = float(reported_cost)
        with self._lock:
            self._close(reservation)
            self._spent += Fraction(actual)
            self._answered += 1
        return actual

    def release(self, reservation: Reservation) -> None:
        """The request failed without an answer: drop its reservation; nothing is counted."""
        with self._lock:
            self._close(reservation)

    def refusal(self, spec: "ModelSpec") -> BudgetExhausted:
        """The error for a request :meth:`reserve` refused."""
        return BudgetExhausted(spec.name, self.limit_usd, unpriced=self.price(spec) is None)

    # ------------------------------------------------------------------------------------------ reading

    @property
    def spent(self) -> float:
        """USD spent on the answers received (the correctly rounded sum of their costs)."""
        with self._lock:
            return float(self._spent)

    @property
    def in_flight(self) -> float:
        """USD reserved for the requests sent and not answered yet (their upper bounds)."""
        with self._lock:
            return float(self._in_flight)

    @property
    def not_sent(self) -> int:
        """Requests the budget refused."""
        with self._lock:
            return self._not_sent

    @property
    def sent(self) -> int:
        """Requests the budget let through (reservations made)."""
        with self._lock:
            return self._sent

    @property
    def answered(self) -> int:
        with self._lock:
            return self._answered

    @property
    def exhausted(self) -> bool:
        """True once a request has been refused for not fitting: nothing more is sent."""
        with self._lock:
            return self._exhausted

    def summary(self) -> str:
        """One line for the terminal."""
        with self._lock:
            spent, not_sent = float(self._spent), self._not_sent
        text = f"medhelm budget: spent {format_usd(spent)} of {format_usd(self.limit_usd)}"
        if not_sent:
            text += (f"; {not_sent} request{'s' if not_sent != 1 else ''} not sent "
                     f"(their items are skipped)")
        return text

    def as_json(self) -> dict[str, Any]:
        """For ``results["run"]["budget"]``."""
        with self._lock:
            return {"limit_usd": self.limit_usd, "spent_usd": float(self._spent), "not_sent": self._not_sent,
                    "exhausted": self._exhausted}
