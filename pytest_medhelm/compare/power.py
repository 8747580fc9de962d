"""Power planning for gates: what a run of n instances can detect, and the n a margin needs.

``pytest-medhelm power RUN [--baseline BASE]`` and ``--medhelm-power`` (a line per gate in the run's summary and a
``power`` record on each gate of the results) compute, for each gate and each benchmark:

* the **minimum detectable effect** at the run's n: ``MDE = (z_{1−α} + z_{power}) · SE``, one-sided (the
  compare-fail gate tests one-sidedly whether the score dropped), the true drop a one-sided level-α test detects
  with probability ``power``;
* the **n for a margin** ``m``: ``n = ⌈(z_{1−α} + z_{power})² · V / m²⌉``, the instances (per benchmark, for a
  category or overall) at which the MDE falls to ``m``.

The variance, per benchmark (and per subset, when HELM runs a benchmark as several subsets):

* **with a baseline** (``--medhelm-compare``'s, or ``--baseline``): the paired design, the sample variance (ddof 1)
  of the per-instance differences ``d_i = current_i − baseline_i`` on the instances both runs scored, matched as
  the comparison matches them. Pairing removes what both runs share (an instance that is hard for both), which is
  why a paired comparison needs far fewer instances than two independent samples.
* **without one**: the spread of the run's own scores, the design of a threshold gate (the run's mean against a
  fixed value): for a 0/1 metric the binomial variance ``p(1 − p)`` at the observed mean ``p`` (exact for a
  Bernoulli score, and what a planner assumes for a proportion), else the sample variance.

``SE² = Σ_s V_s / n_s / S²`` for a benchmark of S subsets (1 for most). A category or ``overall`` gate reads a
macro-average, the unweighted mean of its k benchmarks' means, whose instances are independent between benchmarks:
``SE² = Σ_k SE_k² / k²``; its n for a margin assumes the same n per benchmark (what ``--medhelm-max-instances``
sets), with ``V = Σ_k V_k / k²`` and ``V_k = n_k · SE_k²`` each benchmark's per-instance variance.

Why a normal approximation on the differences rather than the bootstrap: planning asks about runs not yet made (a
different n), which the bootstrap of one run cannot resample, and the closed form gives the n for a margin
directly; the central limit theorem makes it accurate for the means of a few dozen instances and more.
tests/compare/test_power.py checks it against simulated runs whose true drop equals the computed MDE. It is
optimistic (detects less than it says) for small n (the variance is estimated, the test's critical value is then
Student's), for scores at or near 0 or 1 (a binomial variance near 0, a skewed mean), and for clustered instances
(several instances from one patient or note are not independent: the effective n is smaller); a variance of 0 (no
instance changed, or every score the same) plans nothing and says so.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from pytest_medhelm.compare.stats import ALPHA, POWER
from pytest_medhelm.report.power_record import GatePower
from pytest_medhelm.report.records import Results
from pytest_medhelm.report.results import gate_value

PAIRED, BINOMIAL, SAMPLE, MIXED = "paired_differences", "binomial", "sample", "mixed"


def z_one_sided(alpha: float = ALPHA, power: float = POWER) -> float:
    """``z_{1−α} + z_{power}`` (2.4865 for α = 0.05, power = 0.8)."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r} and {power!r}")
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha) + normal.inv_cdf(power)


def n_for_margin(unit_variance: float, margin: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """``⌈(z_{1−α} + z_{power})² · V / m²⌉``: the n at which the MDE is ``margin``; None when V is 0."""
    if margin <= 0.0:
        raise ValueError(f"the margin must be > 0, got {margin!r}")
    if unit_variance <= 0.0:
        return None
    exact = (z_one_sided(alpha, power) / margin) ** 2 * unit_variance
    return max(2, math.ceil(exact - 1e-9))


@dataclass(frozen=True)
class Spread:
    """One benchmark's variance: per subset, (instances, per-instance variance)."""

    groups: tuple[tuple[int, float], ...]
    variance: str

    @property
    def n(self) -> int:
        return sum(n for n, _ in self.groups)

    @property
    def mean_variance(self) -> float:
        """The variance of the benchmark's score (the mean of its subset means)."""
        return sum(v / n for n, v in self.groups) / len(self.groups) ** 2

    @property
    def unit_variance(self) -> float:
        """The per-instance variance at the run's proportions: ``n · Var(mean)``."""
        return self.n * self.mean_variance


def spread_of(subsets: Iterable[Sequence[float]], *, paired: bool) -> Spread | None:
    """The spread of a benchmark's values (per subset: differences when ``paired``, else scores); None when a
    subset has too few values to estimate it (2, or 1 for 0/1 scores)."""
    groups, kinds = [], set()
    for values in subsets:
        values = [float(v) for v in values]
        if not values:
            continue
        if not paired and all(v in (0.0, 1.0) for v in values):
            p = sum(values) / len(values)
            groups.append((len(values), p * (1.0 - p)))
            kinds.add(BINOMIAL)
            continue
        if len(values) < 2:
            return None
        groups.append((len(values), statistics.variance(values)))
        kinds.add(PAIRED if paired else SAMPLE)
    if not groups:
        return None
    return Spread(tuple(groups), kinds.pop() if len(kinds) == 1 else MIXED)


@dataclass(frozen=True)
class Plan:
    """The power of one score (a benchmark, a category or overall: the mean of ``spreads``' benchmark means)."""

    spreads: tuple[Spread, ...]
    alpha: float = ALPHA
    power: float = POWER

    @property
    def k(self) -> int:
        return len(self.spreads)

    @property
    def n(self) -> int:
        return sum(s.n for s in self.spreads)

    @property
    def ns(self) -> list[int]:
        return [s.n for s in self.spreads]

    @property
    def se(self) -> float:
        return math.sqrt(sum(s.mean_variance for s in self.spreads)) / self.k

    @property
    def unit_variance(self) -> float:
        return sum(s.unit_variance for s in self.spreads) / self.k ** 2

    @property
    def variance(self) -> str:
        kinds = {s.variance for s in self.spreads}
        return kinds.pop() if len(kinds) == 1 else MIXED

    @property
    def mde(self) -> float:
        return z_one_sided(self.alpha, self.power) * self.se

    def n_for(self, margin: float) -> int | None:
        return n_for_margin(self.unit_variance, margin, self.alpha, self.power)


# ---------------------------------------------------------------------------------------------------- from results
Scores = dict[str, dict[str, dict[str, float]]]  # benchmark → subset → instance id → score


def _scores(results: Results, model: str) -> Scores:
    out: Scores = defaultdict(lambda: defaultdict(dict))
    for inst in results.instances:
        if inst.model == model and inst.score is not None:
            out[inst.benchmark][inst.subset or ""][str(inst.instance_id)] = inst.score
    return out


def benchmark_spreads(run: Results, model: str, baseline: Results | None = None,
                      baseline_model: str | None = None) -> dict[str, Spread]:
    """Per benchmark of ``model``: the spread of its paired differences from ``baseline_model``'s scores in
    ``baseline`` (the instances both scored), or of its own scores without a baseline."""
    current = _scores(run, model)
    if baseline is None:
        found = {slug: spread_of([list(scores.values()) for scores in subsets.values()], paired=False)
                 for slug, subsets in current.items()}
        return {slug: s for slug, s in sorted(found.items()) if s is not None}
    before = _scores(baseline, baseline_model or model)
    out = {}
    for slug in sorted(set(current) & set(before)):
        diffs = []
        for subset in sorted(set(current[slug]) & set(before[slug])):
            now, then = current[slug][subset], before[slug][subset]
            diffs.append([now[i] - then[i] for i in sorted(now.keys() & then.keys())])
        spread = spread_of(diffs, paired=True)
        if spread is not None:
            out[slug] = spread
    return out


def members(name: str, spreads: Mapping[str, Spread], category_of: Mapping[str, str]) -> list[str]:
    """The benchmarks a gate's target reads: ``overall`` all, a category its own, a benchmark itself."""
    if name == "overall":
        return sorted(spreads)
    if name in spreads:
        return [name]
    return sorted(slug for slug in spreads if category_of.get(slug) == name)


@dataclass(frozen=True)
class GateSpec:
    """A gate to plan: a threshold ``NAME>=VALUE`` or a compare-fail ``NAME:DROP`` (``name`` its target)."""

    spec: str
    name: str
    threshold: float | None = None
    drop: float | None = None


def gate_power(gate: GateSpec, model: str, run: Results, spreads: Mapping[str, Spread],
               category_of: Mapping[str, str], *, baseline: Results | None = None, baseline_model: str | None = None,
               margin: float | None = None, alpha: float = ALPHA, power: float = POWER) -> GatePower:
    """The gate's ``power`` record. The margin, unless given: for a threshold, the reference score (the baseline's,
    else this run's) minus the threshold, the drop that would bring the score down to it; for a compare-fail gate,
    DROP (the n at which a drop of twice the allowed one is detected)."""
    paired = baseline is not None
    record = GatePower(design="paired" if paired else "one_sample", baseline_model=baseline_model if paired else None,
                       alpha=alpha, power=power)
    slugs = members(gate.name, spreads, category_of)
    if not slugs:
        record.note = ("no instance scored by both runs" if paired else "no scored instance") + \
            " (or too few to estimate a variance)"
        return record
    plan = Plan(tuple(spreads[s] for s in slugs), alpha, power)
    record.variance, record.n, record.k, record.se = plan.variance, plan.n, plan.k, plan.se
    if plan.unit_variance <= 0.0:
        record.note = ("no spread: no instance changed from the baseline" if paired else
                       "no spread: every score is the same") + "; the normal approximation cannot plan this gate"
        return record
    record.mde = plan.mde
    record.detects = plan.mde + (gate.drop or 0.0)
    if margin is None:
        if gate.drop is not None:
            margin = gate.drop
        elif gate.threshold is not None:
            reference = gate_value(baseline if baseline is not None else run, gate.name,
                                 baseline_model if paired and baseline_model else model)
            if reference is not None and reference - gate.threshold > 1e-12:
                margin = reference - gate.threshold
    if margin is not None:
        record.margin, record.n_for_margin = margin, plan.n_for(margin)
    return record


# ---------------------------------------------------------------------------------------------------- text
def _num(value: float) -> str:
    return f"{round(value, 3):g}"


def n_text(record: GatePower, ns: Sequence[int] | None = None) -> str:
    if record.k <= 1:
        return f"n={record.n}"
    if ns and min(ns) != max(ns):
        return f"n={min(ns)}-{max(ns)} per benchmark ({record.k} benchmarks)"
    return f"n={record.n // record.k} per benchmark ({record.k} benchmarks)"


def summary_line(spec: str, record: GatePower, *, model: str | None = None, threshold: float | None = None,
                 drop: float | None = None, ns: Sequence[int] | None = None) -> str:
    """``medhelm power: SPEC at n=N: detects a drop of X or more (alpha A one-sided, power P; M instances for
    MARGIN)``."""
    who = f" for {model}" if model else ""
    head = f"medhelm power: {spec}{who}"
    if record.mde is None:
        return f"{head}: not planned: {record.note}"
    head += f" at {n_text(record, ns)}"
    bits = []
    if record.design == "paired":
        what = f"detects a drop of {record.detects:.3f} or more"
    elif threshold is not None:
        what = f"detects a true score {record.mde:.3f} or more below {_num(threshold)}"
        bits.append(f"no baseline: the {record.variance} variance of this run's scores")
    else:
        what = f"detects a drop of {record.detects:.3f} or more"
        bits.append(f"no baseline: the {record.variance} variance of this run's scores")
    if drop is not None:
        bits.insert(0, f"{_num(drop)} allowed + {record.mde:.3f}")
    bits.append(f"alpha {_num(record.alpha)} one-sided, power {_num(record.power)}")
    if record.margin is not None and record.n_for_margin is not None:
        per = " per benchmark" if record.k > 1 else ""
        beyond = " beyond the allowed drop" if drop is not None else ""
        bits.append(f"{record.n_for_margin} instances{per} for {_num(record.margin)}{beyond}")
    return f"{head}: {what} ({'; '.join(bits)})"


def note() -> str:
    return ("normal approximation on the per-instance differences from the baseline (without one: on this run's "
            "scores, binomial for 0/1 scores); categories and overall are macro-averages: Var = sum of the "
            "benchmarks' mean variances / k^2; optimistic for small n, scores near 0 or 1 and clustered instances "
            "(docs/comparing.md)")


# ---------------------------------------------------------------------------------------------------- gates of a run
def pairs_for(run: Results, baseline: Results | None) -> list[tuple[str, str | None]]:
    """(model, baseline model) per model of the run (a model without a baseline model is left out when there is a
    baseline), as the comparison pairs them."""
    if baseline is None:
        return [(m, None) for m in run.model_names()]
    from pytest_medhelm.compare.compare import model_pairs

    pairs, _ = model_pairs(baseline.model_names(), run.model_names())
    return [(m, b) for m, b in pairs]


def category_map(*runs: Results | None) -> dict[str, str]:
    from pytest_medhelm.compare.compare import _categories

    return _categories(*[r for r in runs if r is not None])


def annotate_gates(results: dict[str, Any], baseline: Results | Mapping[str, Any] | None, *,
                   alpha: float = ALPHA, power: float = POWER) -> list[str]:
    """``--medhelm-power``: a ``power`` record on each threshold and compare-fail gate of ``results`` (the run's
    data, changed in place), against ``baseline`` when there is one; returns the summary lines."""
    run = Results.read(results)
    base = Results.read(baseline) if baseline is not None else None
    category_of = category_map(run, base)
    pairs = dict(pairs_for(run, base))
    several = len(run.model_names()) > 1
    spreads: dict[str, dict[str, Spread]] = {}
    lines = []
    for gate in results.get("gates", []):
        model = gate.get("model")
        kind = gate.get("kind")
        if model is None or kind not in (None, "compare_fail") or gate.get("name") is None:
            continue
        if base is not None and model not in pairs:
            lines.append(f"medhelm power: {gate['spec']} for {model}: not planned: no baseline model")
            continue
        base_model = pairs.get(model)
        if model not in spreads:
            spreads[model] = benchmark_spreads(run, model, base, base_model)
        target = GateSpec(spec=gate["spec"], name=gate["name"], threshold=gate.get("threshold") if kind is None
                          else None, drop=gate.get("drop") if kind == "compare_fail" else None)
        record = gate_power(target, model, run, spreads[model], category_of, baseline=base,
                            baseline_model=base_model, alpha=alpha, power=power)
        gate["power"] = record.model_dump(exclude_none=True)
        ns = [spreads[model][s].n for s in members(target.name, spreads[model], category_of)]
        lines.append(summary_line(target.spec, record, model=model if several else None,
                                  threshold=target.threshold, drop=target.drop, ns=ns))
    return lines


def recorded_gates(run: Results, thresholds: Iterable[str] = (),
                   compare_fail: Iterable[tuple[str, float]] = ()) -> list[GateSpec]:
    """The gates a saved run recorded (its thresholds and compare-fail gates: the gates' records and the run's
    options) and any given here, once each."""
    from pytest_medhelm.catalogue.taxonomy import gate_target
    from pytest_medhelm.options import parse_threshold

    benchmarks = {row.slug for row in run.benchmarks} | {inst.benchmark for inst in run.instances}
    out: dict[tuple[str, float | None, float | None], GateSpec] = {}

    def add(spec: str, name: str, threshold: float | None = None, drop: float | None = None) -> None:
        target = gate_target(name, benchmarks)
        if target is None:
            raise ValueError(f"{spec}: {name!r} is not a benchmark of the run, a category or 'overall'")
        out.setdefault((target, threshold, drop), GateSpec(spec=spec, name=target, threshold=threshold, drop=drop))

    for gate in run.gates:
        if gate.kind is None and gate.name and gate.threshold is not None:
            add(gate.spec, gate.name, threshold=gate.threshold)
        elif gate.kind == "compare_fail" and gate.name and gate.drop is not None:
            add(f"compare-fail {gate.name}:{gate.drop:g}", gate.name, drop=gate.drop)
    options = run.run.options or {}
    for text in [*(options.get("thresholds") or []), *thresholds]:
        name, value = parse_threshold(text)
        add(f"{name}>={value:g}", name, threshold=value)
    for name, drop in [*(tuple(x) for x in options.get("compare_fail") or []), *compare_fail]:
        add(f"compare-fail {name}:{drop:g}", name, drop=float(drop))
    return list(out.values())


def plan_rows(run: Results, baseline: Results | None, gates: Sequence[GateSpec], *, margin: float | None = None,
              alpha: float = ALPHA, power: float = POWER) -> list[dict[str, Any]]:
    """``pytest-medhelm power``: one row per gate and per benchmark, for each model (and its baseline model)."""
    category_of = category_map(run, baseline)
    rows = []
    for model, base_model in pairs_for(run, baseline):
        spreads = benchmark_spreads(run, model, baseline, base_model)
        targets = [(g, "gate") for g in gates] + [(GateSpec(spec=slug, name=slug), "benchmark") for slug in spreads]
        for target, scope in targets:
            record = gate_power(target, model, run, spreads, category_of, baseline=baseline,
                                baseline_model=base_model, margin=margin, alpha=alpha, power=power)
            ns = [spreads[s].n for s in members(target.name, spreads, category_of)]
            rows.append({"scope": scope, "spec": target.spec, "name": target.name, "model": model,
                         "threshold": target.threshold, "drop": target.drop, "ns": ns,
                         **record.model_dump(exclude_none=True)})
    return rows


def table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    several = len({r["model"] for r in rows}) > 1
    header = ["gate or benchmark"] + (["model"] if several else []) + ["n", "variance", "SE", "MDE", "detects",
                                                                       "margin", "n for margin"]
    out = []
    for r in rows:
        ns = r.get("ns") or []
        if r.get("k", 1) > 1 and ns:
            n = f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"
            n += f" x {r['k']}"
        else:
            n = str(r.get("n", 0))
        per = " /bench" if r.get("k", 1) > 1 and r.get("n_for_margin") is not None else ""
        out.append([r["spec"]] + ([r["model"]] if several else []) + [
            n, r.get("variance") or "-", _fixed(r.get("se")), _fixed(r.get("mde")), _fixed(r.get("detects")),
            _num(r["margin"]) if r.get("margin") is not None else "-",
            f"{r['n_for_margin']}{per}" if r.get("n_for_margin") is not None else (r.get("note") or "-")])
    return header, out


def _fixed(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
