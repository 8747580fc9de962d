"""``--medhelm-max-tokens N``: every benchmark's answers capped at N tokens, and that said wherever scores are shown.

MedHELM gives each benchmark its own ``max_tokens`` (HELM's run specs: 1 for a multiple-choice letter, up to 1024
for a clinical note or a SQL query). A cap below that is a departure from MedHELM's generation settings: an answer
cut short scores differently, so the run says so in pytest's header, in the terminal summary, in the Markdown and
HTML reports, and records it in the results JSON as ``run.generation_cap``::

    {"max_tokens": 64, "benchmarks": {"ehrsql": 1024, "medicationqa": 512}}

(``benchmarks``: those of the run whose own limit the cap lowered, with that limit; ``null`` without a cap). The
cap is part of each request it changes (``max_tokens`` is in the cache key), so capped and uncapped answers never
mix; a benchmark whose own limit is at or below the cap sends the very request it sends without one, and shares
its cached answers. The judges are not capped: a judgement cut short would not parse, and the jury is part of the
metric.

What it is for: a demonstration on a small machine (the README's main job), where a small model may otherwise
write to a benchmark's limit (an EHRSQL answer of 1024 tokens takes SmolLM2 about a minute on 2 cores).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover  (the header line is made at every start: no pydantic for it)
    from pytest_medhelm.report.records import GenerationCap


def capped(max_tokens: int, cap: int | None) -> int:
    """A benchmark's ``max_tokens`` under the run's cap (``None``: no cap)."""
    return max_tokens if cap is None else min(max_tokens, cap)


def cap_record(cap: int | None, benchmarks: Iterable[Any]) -> GenerationCap | None:
    """``run.generation_cap``: the cap and the benchmarks (objects with ``slug`` and ``max_tokens``) it lowered."""
    from pytest_medhelm.report.records import GenerationCap

    if cap is None:
        return None
    lowered = {b.slug: int(b.max_tokens) for b in sorted(benchmarks, key=lambda b: b.slug) if b.max_tokens > cap}
    return GenerationCap(max_tokens=cap, benchmarks=lowered)


def header_line(cap: int | None) -> str | None:
    """pytest's header, before anything is sent."""
    if cap is None:
        return None
    return (f"medhelm: answers capped at {cap} tokens (--medhelm-max-tokens {cap}): a departure from MedHELM's "
            "generation settings; the scores of the benchmarks it shortens are not comparable with MedHELM's")


def cap_note(record: GenerationCap | Mapping[str, Any] | None) -> str | None:
    """One sentence for the summary and the reports, from ``run.generation_cap``; None without a cap."""
    if not record:
        return None
    from pytest_medhelm.report.records import GenerationCap

    record = record if isinstance(record, GenerationCap) else GenerationCap.model_validate(record)
    cap, lowered = record.max_tokens, record.benchmarks
    if not lowered:
        return (f"Answers capped at {cap} tokens (--medhelm-max-tokens), a departure from MedHELM's generation "
                "settings; no benchmark of this run allows more, so none was shortened.")
    listed = ", ".join(f"{slug} {limit}" for slug, limit in lowered.items())
    return (f"Answers capped at {cap} tokens (--medhelm-max-tokens), a departure from MedHELM's generation "
            f"settings: {len(lowered)} benchmark(s) allow more ({listed}); their scores are not comparable with "
            "MedHELM's.")
