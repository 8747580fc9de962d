"""A gate's ``power`` record (``--medhelm-power``): what its run can detect, computed by
:mod:`pytest_medhelm.compare.power` (the method is in docs/comparing.md, "Power planning for gates")."""

from __future__ import annotations

from pydantic import Field

from pytest_medhelm.report.record_base import Record, about


class GatePower(Record):
    """The minimum detectable effect of a gate at its run's n, and the n for a margin (normal approximation)."""

    design: str = Field(description="'paired' (differences from the baseline's instances) or 'one_sample' (no "
                                    "baseline: the spread of this run's scores)")
    variance: str = about("the variance used: 'paired_differences', 'binomial' (0/1 scores, p(1-p) at the mean), "
                          "'sample', or 'mixed' over the benchmarks of a category", "")
    baseline_model: str | None = about("the baseline's model the differences are taken from")
    n: int = about("instances the estimate rests on (a category or overall: over its benchmarks)", 0)
    k: int = about("benchmarks averaged (1 for a benchmark): the gate's variance is their means' summed over k^2", 1)
    se: float | None = about("standard error of the gate's score (or of its difference from the baseline)")
    mde: float | None = about("minimum detectable effect at n: (z_(1-alpha) + z_power) * se, one-sided")
    detects: float | None = about("the drop the gate detects with that power (a compare-fail gate: DROP + mde)")
    alpha: float = about("one-sided significance", 0.05)
    power: float = about("the power", 0.8)
    margin: float | None = about("the margin the n below is for")
    n_for_margin: int | None = about("instances (per benchmark, for a category or overall) to detect the margin")
    note: str | None = about("why nothing could be planned, or what the figures assume")
