"""The metric interface: a metric turns (answer, instance) into a :class:`Score`.

Scores are normalized to [0, 1] for aggregation (``value``); ``raw`` keeps the metric on its own scale (a jury
mean on 1-5, for example). ``compat`` is ``"default"`` (corrected metrics) or ``"helm"`` (HELM's numbers, bugs
included), see docs/fidelity.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue.definition import Instance


@dataclass(frozen=True)
class Score:
    value: float
    raw: float | None = None
    #: one line for a person: why this score (shown for misses)
    detail: str = ""
    #: secondary values (query validity, sentence accuracy, ROUGE-2 ...), recorded beside the main score
    extra: dict[str, Any] = field(default_factory=dict)
    #: why this item cannot be scored, when it cannot (an EHRSQL gold query that returns no rows on the database in
    #: use tells no answer from another); None for a scored item. A not-scored item counts neither for nor against:
    #: its ``value`` (0) means nothing, the run records it with score null and this reason (``not_scored``) and
    #: reports the item as skipped, as the loaders report the instances they filter out
    not_scored: str | None = None

    @property
    def raw_value(self) -> float:
        return self.value if self.raw is None else self.raw


class Metric(Protocol):
    #: HELM's main metric name, e.g. "exact_match", "medcalc_bench_accuracy"
    name: str
    #: 0/1 metrics: a miss is a 0. Continuous metrics: a miss is a value below ``pass_mark``.
    binary: bool
    pass_mark: float

    def score(self, answer: str, instance: "Instance", compat: str = "default") -> Score: ...
