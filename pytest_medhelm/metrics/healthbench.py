"""HealthBench's rubric-graded metrics: ``health_bench_score`` and ``health_bench_professional_score``.

A judged metric of a new kind beside the jury: the grader (:mod:`pytest_medhelm.jury.rubric_grader`) is asked once
per rubric criterion, and the run hands the metric every reply through the scoring context's
``grader_completions(instance, answer)`` (a :class:`GraderReplies`), planned and sent as judge requests are.

**HealthBench, default** (OpenAI's reference, simple-evals): each reply read by
:func:`~pytest_medhelm.jury.grader_reply.parse_reference_verdict`; the example's score is the reference's formula
(:func:`~pytest_medhelm.jury.rubric_scoring.reference_score`), kept raw (it can be negative: ``Score.value`` and
``Score.raw`` alike); the benchmark's mean is the mean clipped to [0, 1] with the bootstrap standard deviation of the
clipped mean (``extra["aggregate"] = "clipped_mean"`` tells the aggregation). ``extra["tag_scores"]`` holds the
reference's per-tag scores of the example (``theme:*`` from ``example_tags``, ``axis:*`` from the criteria's tags,
and any other tag the data has), which the report averages into the theme and axis breakdowns. A criterion the grader
gave no verdict for (a failed request, a reply without a boolean ``criteria_met``) makes the item an error that
names each reason once with its count: never a 0, never a criterion left out.

**HealthBench under --medhelm-compat medhelm (or helm)**: medhelm 0.8.0's scoring: every judge of the jury grades,
replies read by :func:`~pytest_medhelm.jury.grader_reply.parse_fork_verdict`, a reply the fork drops is dropped
(the later verdicts shift onto earlier criteria, counted in ``extra["dropped"]``), the judge's score
:func:`~pytest_medhelm.jury.rubric_scoring.fork_score`, the instance's the mean of the judges'; an empty answer
scores 0 without a request; no clipping.

**HealthBench Professional, default** (its authors' reference, simple-evals PR #108): HealthBench's formula on its
rubric (``criterion_text``), graded by its reference grader, ``openai/gpt-5.4-2026-03-05`` at low reasoning effort
(``--medhelm-grader`` replaces it); no comparison with the physician's answer. **Under --medhelm-compat medhelm (or
helm)**: medhelm 0.8.0's: per judge of the jury, the rubric score as above (the fork's) and the judge's 1-10
comparison with the physician's answer v: (rubric + v / 10) / 2, with the fork's mix-up (one list of verdicts for
all judges, so every judge's rubric score is computed from the first verdicts accepted, the first judge's, and the
comparison verdicts are appended to it).

**Length adjustment** (every HealthBench variant, every mode): ``extra["length_adjusted"]`` is the instance's score
less 0.0147 per 500 characters of answer over 2,000 (plus as much under), :func:`~pytest_medhelm.jury.
rubric_scoring.length_adjusted`; ``extra["answer_chars"]`` the answer's length. The report puts its aggregate
beside the raw score (:mod:`pytest_medhelm.report.length_adjustment`), never instead of it.

**A rubric without positive points** (reference scoring): the reference's score cannot exist (simple-evals asserts
that it does, and stops); no grader request is planned for it (:func:`~pytest_medhelm.jury.rubric_grader.
grading_calls`), and the item is an error saying why. medhelm 0.8.0's formula scores such a rubric (its negative
points are rectified), so under its compat mode it is graded as the fork grades it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.cost import add_costs
from pytest_medhelm.jury.grader_reply import (
    GraderReplyError,
    comparison_value,
    parse_fork_verdict,
    parse_reference_verdict,
)
from pytest_medhelm.jury.rubric_grader import (
    COMPARISON,
    FORK_INSTRUMENT,
    PROFESSIONAL_GRADER_EFFORT,
    REFERENCE_INSTRUMENT,
    GraderCall,
    has_positive_points,
)
from pytest_medhelm.jury.rubric_scoring import (
    fork_score,
    length_adjusted,
    points_of,
    reference_score,
    reference_tag_scores,
)
from pytest_medhelm.metrics.base import Score, ScoringContext, ScoringError

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Completion, Instance

#: what ``Score.extra["aggregate"]`` says of a benchmark whose mean is clipped to [0, 1] (the reference's)
CLIPPED_MEAN = "clipped_mean"
#: the error of an example whose rubric has no positive points (simple-evals asserts its score exists: it stops)
NO_POSITIVE_POINTS = ("not graded: no rubric criterion has positive points, so the reference's score (points met "
                      "over positive points) cannot exist; no grader request was sent")


def is_fork(compat: str) -> bool:
    """For the benchmarks medhelm 0.8.0 added, both ``helm`` and ``medhelm`` mean medhelm 0.8.0."""
    return reproduces_helm(compat)


@dataclass
class GraderReplies:
    """The grader's replies for one answer: each call with its reply (or the error its request ended with), in
    the planned order; ``unavailable`` is why no call could be made (the grader prompts missing), else ""."""

    calls: list[GraderCall] = field(default_factory=list)
    replies: list[Completion | BaseException] = field(default_factory=list)
    unavailable: str = ""


def _request_reason(exc: BaseException) -> str:
    return f"request failed: {exc}" if str(exc) else f"request failed: {type(exc).__name__}"


def _by_grader(failures: Sequence[tuple[str, str]]) -> dict[str, str]:
    """grader -> its distinct reasons (the item's ``judge_failures``: the run's summary counts each (grader, reason)
    once over the items, so a reason is said once)."""
    out: dict[str, list[str]] = {}
    for grader, reason in failures:
        if reason not in out.setdefault(grader, []):
            out[grader].append(reason)
    return {grader: "; ".join(reasons) for grader, reasons in out.items()}


def _explain(failures: Sequence[str], total: int, what: str) -> str:
    """Each reason once, with how many calls it concerns."""
    counts = Counter(failures)
    reasons = "; ".join(f"{reason} (x{n})" if n > 1 else reason for reason, n in counts.items())
    return f"{len(failures)} of {total} {what} without a verdict: {reasons}"


class RubricGradedMetric:
    """HealthBench's metric (``professional=False``) or HealthBench Professional's."""

    #: judged: the run plans and sends its grader requests as each answer arrives (Benchmark.is_judged)
    judged = True
    #: graded per rubric criterion (not by the jury's one request per judge)
    rubric_graded = True
    binary = False
    pass_mark = 0.5

    def __init__(self, slug: str, professional: bool = False) -> None:
        self.slug = slug
        self.professional = professional
        self.name = "health_bench_professional_score" if professional else "health_bench_score"

    def __repr__(self) -> str:
        return f"RubricGradedMetric({self.slug!r})"

    def fork_prompts(self, compat: str) -> bool:
        """Whether medhelm 0.8.0's prompts (and the jury as graders) are used: under ``--medhelm-compat medhelm``
        (or ``helm``) only; by default both benchmarks are graded by their reference's grader."""
        return is_fork(compat)

    @property
    def grader_effort(self) -> str:
        """The reasoning effort the reference grades with (HealthBench Professional's ``low``; "" for HealthBench,
        whose grader takes the run's)."""
        return PROFESSIONAL_GRADER_EFFORT if self.professional else ""

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        raise RuntimeError(f"{self!r}: the rubric grader needs a run: score it with assert_metric in a medhelm test")

    def score_with(self, answer: str, instance: Instance, context: ScoringContext) -> Score:
        fetch = context.grader_completions
        if fetch is None:
            raise RuntimeError(f"{self!r}: no grader in this scoring context")
        items = instance.extra["grading"]["rubric_items"]
        fork = self.fork_prompts(context.compat)
        if not fork and not has_positive_points(items):  # no grader request was planned: nothing could count
            raise ScoringError(NO_POSITIVE_POINTS, {"rubric": "no positive points"})
        graded: GraderReplies = fetch(instance, answer)
        if graded.unavailable:
            raise ScoringError(f"not graded: {graded.unavailable}", {"grader": graded.unavailable})
        if fork:
            if not answer.strip():
                score = Score(0.0, 0.0, "empty answer: no grader asked, medhelm 0.8.0's 0", _accounting(graded))
            else:
                score = self._fork(graded, items, shared=self.professional)
        else:
            score = self._reference(graded, items, instance.extra["grading"].get("example_tags") or [])
        score.extra.update(length_adjusted=length_adjusted(score.value, answer), answer_chars=len(answer))
        return score

    # ------------------------------------------------------------------------------------------ the reference
    def _reference(self, graded: GraderReplies, items: Sequence[Any], example_tags: Sequence[str]) -> Score:
        met: list[bool] = []
        verdicts: list[dict[str, Any]] = []
        failures: list[tuple[str, str]] = []
        for call, reply in zip(graded.calls, graded.replies):
            try:
                if isinstance(reply, BaseException):
                    raise GraderReplyError(_request_reason(reply))
                verdict = parse_reference_verdict(reply.text)
            except GraderReplyError as exc:
                failures.append((call.grader, exc.reason))
                continue
            met.append(verdict.criteria_met)
            verdicts.append({"criteria_met": verdict.criteria_met, "explanation": verdict.explanation})
        if failures:
            raise ScoringError(_explain([why for _g, why in failures], len(graded.calls), "criteria"),
                               _by_grader(failures))
        points = [points_of(item) for item in items]
        score = reference_score(points, met)
        if score is None:  # (score_with refuses such a rubric before asking anything)
            raise ScoringError(NO_POSITIVE_POINTS, {"rubric": "no positive points"})
        achieved = math.fsum(p for p, m in zip(points, met) if m)
        possible = math.fsum(p for p in points if p > 0)
        extra = _accounting(graded)
        extra.update(rubric={"grader": graded.calls[0].grader if graded.calls else None,
                             "instrument": REFERENCE_INSTRUMENT, "verdicts": verdicts},
                     tag_scores=reference_tag_scores(example_tags, items, met, score), aggregate=CLIPPED_MEAN)
        detail = f"rubric {achieved:g} of {possible:g} points ({sum(met)} of {len(met)} criteria met)"
        return Score(value=score, raw=score, detail=detail, extra=extra)

    # ------------------------------------------------------------------------------------------ medhelm 0.8.0
    def _fork(self, graded: GraderReplies, items: Sequence[Any], shared: bool) -> Score:
        points = [points_of(item) for item in items]
        graders = list(dict.fromkeys(call.grader for call in graded.calls))
        shared_list: list[dict[str, Any]] = []
        per_judge: dict[str, dict[str, Any]] = {}
        failures: list[tuple[str, str]] = []
        for grader in graders:
            own: list[dict[str, Any]] = shared_list if shared else []
            comparison: dict[str, Any] | None = None
            dropped = 0
            for call, reply in zip(graded.calls, graded.replies):
                if call.grader != grader:
                    continue
                if isinstance(reply, BaseException):
                    verdict, reason = None, _request_reason(reply)
                else:
                    verdict, reason = parse_fork_verdict(reply.text), "a reply medhelm 0.8.0 drops (no JSON " \
                                                                      "object with explanation and criteria_met)"
                if verdict is None:
                    dropped += 1
                    failures.append((grader, reason))
                    continue
                if call.kind == COMPARISON:
                    comparison = verdict
                else:
                    own.append(verdict)
            score = fork_score(points, own)
            if comparison is not None:
                if shared:
                    shared_list.append(comparison)
                try:
                    value = comparison_value(comparison)
                except GraderReplyError as exc:
                    raise ScoringError(f"{grader}: {exc.reason}", {grader: exc.reason}) from None
                if value is not None:
                    if score is None:
                        raise ScoringError(f"{grader}: the rubric's points sum to 0 (medhelm 0.8.0 fails here)",
                                           {grader: "no rubric points"})
                    score = (score + value / 10) / 2
            if score is None:
                raise ScoringError(f"{grader}: the rubric's rectified points sum to 0 (medhelm 0.8.0 fails here)",
                                   {grader: "no rubric points"})
            per_judge[grader] = {"score": score, "dropped": dropped, "comparison": comparison}
        if not per_judge:
            raise ScoringError("not graded: no grader", {"grader": "none"})
        value = math.fsum(j["score"] for j in per_judge.values()) / len(per_judge)
        extra = _accounting(graded)
        extra.update(rubric={"instrument": FORK_INSTRUMENT, "per_judge": per_judge,
                             "shared_verdicts": shared}, dropped=len(failures))
        detail = f"{len(per_judge)} judge(s), mean {value:.3f}" + (
            f"; {len(failures)} verdict(s) dropped as medhelm 0.8.0 drops them" if failures else "")
        return Score(value=value, raw=value, detail=detail, extra=extra)


def _accounting(graded: GraderReplies) -> dict[str, Any]:
    """The grader's tokens and cost, under the jury's keys (the run adds them up as the jury's), and the sha256 of
    each grader prompt (the user message: the filled template, as the reference files show it)."""
    import hashlib

    tokens_in = tokens_out = 0
    costs: list[float | None] = []
    for reply in graded.replies:
        if isinstance(reply, BaseException):
            continue
        tokens_in += int(reply.tokens_in or 0)
        tokens_out += int(reply.tokens_out or 0)
        costs.append(None if reply.cost_usd is None else float(reply.cost_usd))
    return {"grader_calls": len(graded.calls), "jury_tokens_in": tokens_in, "jury_tokens_out": tokens_out,
            "jury_cost_usd": add_costs(costs),
            "judge_prompt_sha256": [hashlib.sha256(c.request.messages[-1][1].encode("utf-8")).hexdigest()
                                    for c in graded.calls]}
