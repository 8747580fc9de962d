"""The metric of ``healthbench_meta``: the rubric grader's verdict on one row against the physicians' verdicts.

The "answer" is the grader's reply, read as HealthBench's reference reads it
(:func:`~pytest_medhelm.jury.grader_reply.parse_reference_verdict`, code fences included). The item's score is the
**per-criterion agreement**: the share of the row's physicians whose verdict equals the grader's (1: all agree, 0:
none does), so a benchmark mean is the pairwise agreement rate averaged over rows. A reply without a boolean
``criteria_met`` is an item error (simple-evals asks again until it gets one; a deterministic grader would answer
the same, so nothing is measured rather than a verdict invented).

``extra["meta_eval"]`` keeps what the benchmark's macro-F1 needs (:mod:`pytest_medhelm.report.grader_agreement`):
the grader's verdict, the physicians' labels and ids, the row's category, and the grader prompt's identity (the
template's sha256 and instrument).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_medhelm.jury.grader_reply import GraderReplyError, parse_reference_verdict
from pytest_medhelm.metrics.base import Score, ScoringError

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance

#: the key of a record's ``metrics`` holding the row's verdicts
META_EVAL = "meta_eval"


class GraderAgreementMetric:
    """The grader against the physicians on one meta-evaluation row."""

    name = "grader_physician_agreement"
    binary = False
    #: its items are the rubric grader's (the run's --medhelm-grader), not the models under test's
    measures_grader = True
    #: a verdict most of the row's physicians disagree with is a miss
    pass_mark = 0.5

    def __repr__(self) -> str:
        return "GraderAgreementMetric()"

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        meta = instance.extra["meta"]
        try:
            verdict = parse_reference_verdict(answer)
        except GraderReplyError as exc:
            raise ScoringError(f"the grader gave no verdict: {exc.reason}", {"grader": exc.reason}) from None
        labels = list(meta["labels"])
        agreeing = sum(1 for label in labels if label == verdict.criteria_met)
        value = agreeing / len(labels)
        met = sum(labels)
        detail = (f"grader: {'met' if verdict.criteria_met else 'not met'}; physicians: {met} of {len(labels)} met "
                  f"({agreeing} agree)")
        extra = {META_EVAL: {"verdict": verdict.criteria_met, "labels": labels, "physicians": list(meta["physicians"]),
                             "category": meta["category"], "template_sha256": meta["template_sha256"],
                             "instrument": meta["instrument"]}}
        return Score(value=value, raw=value, detail=detail, extra=extra)
