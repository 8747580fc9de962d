"""What a running item records about itself: one typed value, written by the model fixture (the calls' accounting
and the benchmark's answer) and by the assertion (the score), read by the run when the item's report is made.

The run turns it into the results' :class:`~pytest_medhelm.report.records.InstanceRecord` (validated there: an item's
own code may have written anything into it, and only that item's record says so), which xdist carries to the
controller as plain data.

Not imported when a session runs no medhelm item: the first record is made by the first item's first call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_medhelm.cost import add_costs

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import ChatRequest, Completion


@dataclass(slots=True)
class RanOut:
    """The token limit was used up before any answer was written (a reasoning model's thinking took it all): what the
    limit was, as far as is known. An answer scored without the model fixture (a Completion a test made) knows only
    its reasoning tokens."""

    reasoning_tokens: int | None = None
    max_output_tokens: int | None = None
    reasoning_budget: int | None = None
    #: the model is treated as a reasoning model (None: not known, the hint to raise the budget is given)
    reasoning_model: bool | None = None

    @classmethod
    def of(cls, completion: Completion, request: ChatRequest | None = None,
           reasoning_model: bool | None = None) -> RanOut | None:
        """The limits ``completion`` ran out of (None when it did not)."""
        if not completion.ran_out:
            return None
        if request is None:
            return cls(completion.reasoning_tokens)
        return cls(completion.reasoning_tokens, request.max_output_tokens, request.reasoning_budget, reasoning_model)

    def as_json(self) -> dict[str, Any]:
        """The record's ``ran_out`` (docs/contract.md): ``reasoning_model`` only when known."""
        data: dict[str, Any] = {"max_output_tokens": self.max_output_tokens,
                                "reasoning_budget": self.reasoning_budget, "reasoning_tokens": self.reasoning_tokens}
        if self.reasoning_model is not None:
            data["reasoning_model"] = self.reasoning_model
        return data

    def reason(self) -> str:
        """Why the answer is empty, with what the limit was (``the token limit ran out before any answer: 201
        reasoning tokens spent of a limit of 201 tokens (200 reasoning budget + the answer's); raise
        --medhelm-reasoning-budget``)."""
        spent, budget, limit = self.reasoning_tokens, self.reasoning_budget, self.max_output_tokens
        parts = [f"{spent:,} reasoning tokens spent"] if isinstance(spent, int) else []
        if isinstance(limit, int):
            room = f"{budget:,} reasoning budget + the answer's" if isinstance(budget, int) and budget else \
                "no reasoning budget"
            parts.append(f"a limit of {limit:,} tokens ({room})")
        said = " of ".join(parts) or "the thinking took it all"
        hint = "; raise --medhelm-reasoning-budget" if self.reasoning_model is not False else ""
        return f"the token limit ran out before any answer: {said}{hint}"


@dataclass(slots=True)
class ItemRecord:
    """One item's record while it runs. Fields left None were not written (a test that asked no model has no
    accounting; an item not yet scored no score); :meth:`fields` gives what was written."""

    # the accounting of every call the item made (the benchmark's answer and any other question it asked)
    calls: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    #: None once any call's cost is unknown: never counted as 0
    cost_usd: float | None = None
    #: of tokens_out; None while no call's server said
    reasoning_tokens: int | None = None
    # the benchmark's answer (or, until it is asked, the first call's)
    prompt_sha256: str | None = None
    answer: str | None = None
    latency_s: float | None = None
    cached: bool | None = None
    thinking_chars: int | None = None
    #: kept in the results only with --medhelm-report-text (it may quote patient data)
    thinking: str | None = None
    ran_out: RanOut | None = None
    # the score (written by the assertion)
    metric: str | None = None
    score: float | None = None
    raw_score: float | None = None
    missed: bool | None = None
    expected: Any = None
    detail: str | None = None
    #: the metric's secondary values (and the jury's verdicts and accounting)
    metrics: dict[str, Any] | None = None
    not_scored: str | None = None
    score_nan: bool | None = None

    def add_call(self, completion: Completion) -> None:
        """Count one call's tokens and cost."""
        first = self.calls == 0
        self.calls += 1
        self.tokens_in = (0 if first else self.tokens_in or 0) + completion.tokens_in
        self.tokens_out = (0 if first else self.tokens_out or 0) + completion.tokens_out
        self.cost_usd = completion.cost_usd if first else add_costs((self.cost_usd, completion.cost_usd))
        if completion.reasoning_tokens is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + completion.reasoning_tokens

    def keep_answer(self, completion: Completion, prompt_text: str, request: ChatRequest,
                    reasoning_model: bool) -> None:
        """The answer the item is scored on: its prompt's hash, its text, latency and thinking."""
        import hashlib  # (not at module level: loading OpenSSL costs every pytest session milliseconds)

        self.prompt_sha256 = hashlib.sha256(prompt_text.encode("utf-8")).hexdigest()
        self.answer = completion.text
        self.latency_s = round(completion.latency_s, 6)
        self.cached = completion.cached
        self.thinking_chars = len(completion.thinking)
        self.thinking = completion.thinking or None
        self.ran_out = RanOut.of(completion, request, reasoning_model)

    def add_metrics(self, extra: dict[str, Any]) -> None:
        if extra:
            self.metrics = {**(self.metrics or {}), **extra}

    def fields(self, keep_thinking: bool) -> dict[str, Any]:
        """What was written, by the results' field names (the answer's thinking only when ``keep_thinking``)."""
        out: dict[str, Any] = {}
        if self.calls:
            out.update(tokens_in=self.tokens_in, tokens_out=self.tokens_out, cost_usd=self.cost_usd,
                       reasoning_tokens=self.reasoning_tokens)
        if self.prompt_sha256 is not None:
            out.update(prompt_sha256=self.prompt_sha256, answer=self.answer, latency_s=self.latency_s,
                       cached=self.cached, thinking_chars=self.thinking_chars)
        if self.thinking is not None and keep_thinking:
            out["thinking"] = self.thinking
        if self.ran_out is not None:
            out["ran_out"] = self.ran_out.as_json() if isinstance(self.ran_out, RanOut) else self.ran_out
        if self.metric is not None:
            out.update(metric=self.metric, score=self.score, raw_score=self.raw_score)
            if self.score_nan:
                out["score_nan"] = True
            else:
                out.update(missed=self.missed, expected=self.expected, detail=self.detail)
        for name in ("metrics", "not_scored"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        # (anything else an item's own code wrote over a field is validated with the rest, by the results)
        for name in ("tokens_in", "tokens_out", "cost_usd", "latency_s", "score", "raw_score", "detail", "answer"):
            value = getattr(self, name)
            if value is not None and name not in out:
                out[name] = value
        return out
