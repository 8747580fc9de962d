"""``--medhelm-dry-run``: what a run would cost, counted offline, without calling any model.

For every benchmark × model of the collected items:

* **requests** and **prompt tokens**, each prompt counted as the one user message it is sent as
  (:mod:`pytest_medhelm.tokens`: OpenAI's tokenizers, offline, ``o200k_base`` for the GPT-4o, GPT-4.1, GPT-5 and
  o-series families, ``cl100k_base`` for everything else, which for other providers' models is an approximation,
  typically within 10-20 % of the model's own tokenizer). A provider prefix is dropped for choosing the encoding
  (``openai/gpt-4o`` is counted as ``gpt-4o``). Where tiktoken's files cannot be loaded, ``ceil(len(text) / 4)``
  characters-per-token is used and the table says so.
* **max output tokens**: the paper's upper bound, every answer as long as the benchmark's ``max_tokens``.
* **jury calls** for open-ended benchmarks: each judge grades each answer once (3 judges × n with the paper's
  jury). A judge's prompt is counted as the run's instrument renders it for the instance (HELM's judge prompt,
  or our rubric without HELM's files: the question, the reference and the instructions, exactly) plus the answer,
  at most ``max_tokens``; an item given without its judge prompt gets the benchmark prompt plus a rough allowance
  (``judge_prompt_tokens_estimate``) instead. A judge may write up to ``judge_max_tokens`` (4096).
* **USD**: prices from the prices file, then litellm's local table (:mod:`pytest_medhelm.cost`); a model without
  a price shows ``unknown``, and a total that misses some prices shows ``$X + unknown``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_medhelm.cost import Prices, add_costs, cost, format_usd
from pytest_medhelm.jury.instrument import JUDGE_MAX_TOKENS
from pytest_medhelm.tokens import TokenCounter

#: allowance per jury call for the rubric, the instructions and the reference text around prompt and answer
JUDGE_PROMPT_TOKENS_ESTIMATE = 1000

#: (benchmark slug, model name, prompt text, max_tokens), and optionally the judges' prompt for it with the answer
#: left out (:meth:`pytest_medhelm.jury.instrument.JuryInstrument.judge_prompt_without_answer`); a caller that
#: does not give it gets the allowance below
DryItem = tuple[str, str, str, int] | tuple[str, str, str, int, "str | None"]


@dataclass
class EstimateRow:
    benchmark: str
    model: str
    requests: int = 0
    prompt_tokens: int = 0
    max_output_tokens: int = 0
    model_cost: float | None = 0.0
    jury_calls: int = 0
    jury_prompt_tokens: int = 0
    jury_max_output_tokens: int = 0
    #: None when some judge's price is unknown (and jury_calls > 0)
    jury_cost: float | None = 0.0
    #: the part of the jury's cost whose prices are known
    jury_known_cost: float = 0.0
    #: models and judges of this row without a price
    unknown_prices: list[str] = field(default_factory=list)
    #: how the prompt tokens were counted: "tiktoken" or "chars/4"
    counting: str = "tiktoken"
    #: HealthBench's rubric grader: one call per criterion (and grader), their prompt tokens, their maximum output
    grader_calls: int = 0
    grader_prompt_tokens: int = 0
    grader_max_output_tokens: int = 0
    #: None when some grader's price is unknown (and grader_calls > 0)
    grader_cost: float | None = 0.0
    grader_known_cost: float = 0.0

    @property
    def total_cost(self) -> float | None:
        return add_costs([self.model_cost, self.jury_cost, self.grader_cost])

    @property
    def known_cost(self) -> float:
        """The part of the total whose prices are known."""
        return (self.model_cost or 0.0) + self.jury_known_cost + self.grader_known_cost

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "model": self.model, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "max_output_tokens": self.max_output_tokens,
                "model_cost_usd": self.model_cost, "jury_calls": self.jury_calls,
                "jury_prompt_tokens": self.jury_prompt_tokens, "jury_max_output_tokens": self.jury_max_output_tokens,
                "jury_cost_usd": self.jury_cost, "total_cost_usd": self.total_cost,
                "unknown_prices": list(self.unknown_prices), "counting": self.counting,
                "grader_calls": self.grader_calls, "grader_prompt_tokens": self.grader_prompt_tokens,
                "grader_max_output_tokens": self.grader_max_output_tokens, "grader_cost_usd": self.grader_cost}


@dataclass(frozen=True)
class GraderWork:
    """A rubric grader's calls for one answer (HealthBench): ``calls`` requests to ``grader``, with
    ``prompt_tokens`` in all (the answer counted at its longest) and at most ``max_tokens`` out each."""

    benchmark: str
    model: str
    grader: str
    calls: int
    prompt_tokens: int
    max_tokens: int


def estimate(items: Iterable[DryItem], judges: Sequence[str] = (),
             judge_prompt_tokens_estimate: int = JUDGE_PROMPT_TOKENS_ESTIMATE, *,
             open_benchmarks: Iterable[str] = (), prices: Prices | None = None,
             litellm_models: Mapping[str, str] | None = None, judge_max_tokens: int = JUDGE_MAX_TOKENS,
             count_tokens: Callable[[str, str], int] | None = None,
             grader_work: Iterable[GraderWork] = (),
             reasoning_budgets: Mapping[str, int] | None = None) -> list[EstimateRow]:
    """One :class:`EstimateRow` per benchmark × model, in the order first seen.

    ``reasoning_budgets``: model or judge name → the reasoning tokens it may spend on top of each answer limit
    (docs/reasoning.md): reserved in each of its requests' upper bound, as ``--medhelm-budget`` reserves them.
    ``open_benchmarks``: the slugs whose answers the jury grades (``judges`` each grade every answer once).
    ``litellm_models``: model or judge name → the litellm model string sent, for price look-ups and for choosing
    the tokenizer, as the budget does (default: the name itself). ``count_tokens(model, text)``: the counter
    (default :class:`TokenCounter`). Sends nothing."""
    prices = prices if prices is not None else Prices()
    counter = count_tokens if count_tokens is not None else TokenCounter()
    open_set = set(open_benchmarks)
    names = dict(litellm_models or {})
    rows: dict[tuple[str, str], EstimateRow] = {}
    judge_prompt: dict[tuple[str, str, str], int] = {}  # (benchmark, model, judge) → prompt tokens
    budgets = dict(reasoning_budgets or {})
    judge_out = {judge: judge_max_tokens + budgets.get(judge, 0) for judge in judges}
    for slug, model, prompt, max_tokens, *around in items:
        judge_frame = around[0] if around else None
        row = rows.get((slug, model))
        if row is None:
            row = rows[(slug, model)] = EstimateRow(slug, model)
        tokens = counter(names.get(model, model), prompt)  # (with the string sent, as the budget counts)
        row.requests += 1
        row.prompt_tokens += tokens
        row.max_output_tokens += max_tokens + budgets.get(model, 0)  # (the answer at its longest, and the thinking)
        if slug in open_set:
            for judge in judges:
                row.jury_calls += 1
                if judge_frame is not None:  # the judges' own prompt, counted; the answer at its longest
                    judge_tokens = counter(names.get(judge, judge), judge_frame) + max_tokens
                else:
                    judge_tokens = counter(names.get(judge, judge), prompt) + max_tokens + judge_prompt_tokens_estimate
                row.jury_prompt_tokens += judge_tokens
                row.jury_max_output_tokens += judge_out[judge]
                judge_prompt[(slug, model, judge)] = judge_prompt.get((slug, model, judge), 0) + judge_tokens
    grader_tokens: dict[tuple[str, str, str], list[int]] = {}  # (benchmark, model, grader) -> [calls, in, out]
    for work in grader_work:
        row = rows.get((work.benchmark, work.model))
        if row is None:
            row = rows[(work.benchmark, work.model)] = EstimateRow(work.benchmark, work.model)
        row.grader_calls += work.calls
        row.grader_prompt_tokens += work.prompt_tokens
        row.grader_max_output_tokens += work.calls * work.max_tokens
        acc = grader_tokens.setdefault((work.benchmark, work.model, work.grader), [0, 0, 0])
        acc[0] += work.calls
        acc[1] += work.prompt_tokens
        acc[2] += work.calls * work.max_tokens
    method = getattr(counter, "method", "custom")
    for (slug, model, grader), (_calls, tokens_in, tokens_out) in grader_tokens.items():
        row = rows[(slug, model)]
        grader_price = prices.price_for(grader, names.get(grader, grader))
        if grader_price is None and grader not in row.unknown_prices:
            row.unknown_prices.append(grader)
        part = cost(tokens_in, tokens_out, grader_price)
        row.grader_cost = add_costs([row.grader_cost, part])
        row.grader_known_cost += part or 0.0
    for (slug, model), row in rows.items():
        row.counting = method
        price = prices.price_for(model, names.get(model, model))
        row.model_cost = cost(row.prompt_tokens, row.max_output_tokens, price)
        if price is None:
            row.unknown_prices.append(model)
        judge_costs: list[float | None] = []
        for judge in judges:
            if (slug, model, judge) not in judge_prompt:
                continue
            judge_price = prices.price_for(judge, names.get(judge, judge))
            if judge_price is None:
                row.unknown_prices.append(judge)
            calls = row.jury_calls // len(judges)
            judge_costs.append(cost(judge_prompt[(slug, model, judge)], calls * judge_out[judge], judge_price))
        # a known part is kept for the "$X + unknown" display; jury_cost itself is None when any part is unknown
        row.jury_cost = add_costs(judge_costs) if judge_costs else 0.0
        row.jury_known_cost = math.fsum(c for c in judge_costs if c is not None)
    return list(rows.values())


def totals(rows: Sequence[EstimateRow]) -> dict[str, Any]:
    """Sums over rows; ``*_cost`` is None when any price is unknown, ``known_cost`` the priced part."""
    return {
        "requests": sum(r.requests for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "max_output_tokens": sum(r.max_output_tokens for r in rows),
        "model_cost": add_costs(r.model_cost for r in rows),
        "jury_calls": sum(r.jury_calls for r in rows),
        "jury_prompt_tokens": sum(r.jury_prompt_tokens for r in rows),
        "jury_max_output_tokens": sum(r.jury_max_output_tokens for r in rows),
        "jury_cost": add_costs(r.jury_cost for r in rows),
        "grader_calls": sum(r.grader_calls for r in rows),
        "grader_prompt_tokens": sum(r.grader_prompt_tokens for r in rows),
        "grader_cost": add_costs(r.grader_cost for r in rows),
        "total_cost": add_costs(r.total_cost for r in rows),
        "known_cost": math.fsum(r.known_cost for r in rows),
        "unknown_prices": sorted({n for r in rows for n in r.unknown_prices}),
    }


def usd(value: float | None, known_part: float | None = None) -> str:
    """``$1,234.56`` (``$0.0012`` below a dollar), ``unknown``, or ``$X + unknown`` when only part is priced."""
    if value is None:
        if known_part:
            return f"{format_usd(known_part)} + unknown"
        return "unknown"
    return format_usd(value)


def render(rows: Sequence[EstimateRow], judges: Sequence[str] = (), judge_max_tokens: int = JUDGE_MAX_TOKENS,
           reasoning: bool = False) -> str:
    """The estimate as a terminal table: one line per benchmark × model, a subtotal per model, the total.
    ``reasoning``: the estimate reserved reasoning budgets (``estimate(reasoning_budgets=...)``): the note says so."""
    from tabulate import tabulate

    graded = any(r.grader_calls for r in rows)  # HealthBench's rubric grader: its columns beside the jury's
    header = ["benchmark", "model", "requests", "prompt tok", "max out tok", "model USD", "jury calls",
              "jury prompt tok", "jury max out tok", "jury USD"]
    header += ["grader calls", "grader prompt tok", "grader USD"] if graded else []
    header += ["total USD"]

    def line(label: str, model: str, group: Sequence[EstimateRow]) -> list[str]:
        t = totals(group)
        jury_known = math.fsum(r.jury_known_cost for r in group)
        model_known = math.fsum(r.model_cost or 0.0 for r in group)
        cells = [label, model, f"{t['requests']:,}", f"{t['prompt_tokens']:,}", f"{t['max_output_tokens']:,}",
                 usd(t["model_cost"], model_known), f"{t['jury_calls']:,}", f"{t['jury_prompt_tokens']:,}",
                 f"{t['jury_max_output_tokens']:,}", usd(t["jury_cost"], jury_known) if t["jury_calls"] else "-"]
        if graded:
            grader_known = math.fsum(r.grader_known_cost for r in group)
            cells += [f"{t['grader_calls']:,}", f"{t['grader_prompt_tokens']:,}",
                      usd(t["grader_cost"], grader_known) if t["grader_calls"] else "-"]
        return cells + [usd(t["total_cost"], t["known_cost"])]

    table = [line(r.benchmark, r.model, [r]) for r in rows]
    models = list(dict.fromkeys(r.model for r in rows))
    if len(rows) > 1:
        for model in models:
            group = [r for r in rows if r.model == model]
            if len(group) > 1:
                table.append(line("subtotal", model, group))
        table.append(line("TOTAL", f"{len(models)} model(s)", rows))
    text = tabulate(table, headers=header, tablefmt="simple", disable_numparse=True,
                    colalign=("left", "left") + ("right",) * (len(header) - 2))
    t = totals(rows)
    counting = {r.counting for r in rows}
    notes = [
        f"dry run: nothing was sent. Estimated upper bound: {usd(t['total_cost'], t['known_cost'])} "
        f"for {t['requests']:,} requests and {t['jury_calls']:,} jury calls"
        + (f" and {t['grader_calls']:,} rubric grader calls (one per criterion)." if t["grader_calls"] else "."),
        "Upper bound: every answer is assumed as long as its benchmark's max_tokens, every judgement "
        f"{judge_max_tokens:,} tokens" + (f" ({len(judges)} judge(s): {', '.join(judges)})" if judges else "")
        + ("; a reasoning model's or judge's reasoning budget on top of each (reasoning tokens are priced as output "
           "tokens)." if reasoning else "."),
    ]
    if "chars/4" in counting:
        notes.append("Prompt tokens approximated as characters / 4 (OpenAI's tokenizers were not available).")
    else:
        notes.append("Prompt tokens counted offline with OpenAI's tokenizers (approximate for non-OpenAI models).")
    if t["unknown_prices"]:
        notes.append("No price for: " + ", ".join(t["unknown_prices"]) +
                     " (add them to a --medhelm-prices TOML file: [\"model\"] input_per_million = ..., "
                     "output_per_million = ...).")
    return text + "\n\n" + "\n".join(notes)
