"""The LLM-jury metric of the open-ended benchmarks (HELM ``LLMJuryMetric``), with ROUGE-1/2/L
and BERTScore P/R/F beside it.

``JuryMetric(slug).score_with(answer, instance, context)`` gets one reply per judge from the scoring context's
``judge_completions`` (the run's judges, each from the cache, where the sender put it, or asked now), and scores
them with :func:`pytest_medhelm.jury.jury_score`. Outside a run, give the metric its own ``judge_completions``
and call ``score(answer, instance, compat)``:

* ``Score.value`` is the normalized jury score ``(raw - 1) / 4`` in [0, 1], ``Score.raw`` the mean of every valid
  judge x criterion score on HELM's 1-5 scale (HELM's default 1.0, flagged, for an empty answer or when no judge
  could be read);
* ``Score.detail``: ``jury 3.67/5 (2 judges; claude-3-7-sonnet-20250219: malformed JSON)``;
* ``Score.extra``: ``jury`` (each valid judge's score and explanation per criterion, the reason each other judge
  was excluded, the flag), ``judge_prompt_sha256`` (the sha256 of each judge request's prompt, one per judge
  asked; none for an empty answer), ``jury_tokens_in``, ``jury_tokens_out``, ``jury_cost_usd`` (None when a judge's
  price is unknown), then ``rouge_1``, ``rouge_2``, ``rouge_l`` and ``bertscore_p``, ``bertscore_r``, ``bertscore_f``,
  ``bertscore_model`` (or ``bertscore_unavailable``: the reason) when the benchmark has a gold answer.

**Name.** ``name`` is HELM's main-metric name, ``<HELM scenario>_accuracy`` (``aci_bench_accuracy``,
``chw_care_plan_accuracy`` for NoteExtract, ...), as :class:`~pytest_medhelm.metrics.base.Metric` asks, so that a
result can be matched with HELM's ``stats.json`` and leaderboard. The value is a jury score, not an accuracy (HELM's
display name is "… Jury Score").

**Misses.** A continuous metric: an answer whose normalized score is below ``pass_mark`` = 0.5 (a raw jury mean
below 3, "acceptable") shows as missed.

**NoteExtract** has no gold answer: its ``instance.references`` is the source note (as in HELM's scenario), so ROUGE
and BERTScore would measure copying, not quality. They are left out by default and computed against the note
under ``compat="helm"``, as HELM reports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_medhelm.compat import reproduces_helm
from pytest_medhelm.jury import FLAG_NO_JUDGE, JuryVerdicts, jury_score, rubric_for
from pytest_medhelm.jury.instrument import HELM_SCENARIOS
from pytest_medhelm.metrics.base import JudgeCompletions, Score, ScoringContext, ScoringError
from pytest_medhelm.metrics.rouge import remove_braces, rouge_scores

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.values import Instance


class JuryMetric:
    #: scored by the LLM jury (Benchmark.is_judged): the run sends its judge requests as each answer arrives
    judged = True
    binary = False
    #: normalized 0.5 = a raw jury mean of 3 ("acceptable") on the 1-5 scale
    pass_mark = 0.5

    def __init__(self, slug: str, judge_completions: JudgeCompletions | None = None,
                 bertscore_model: str | None = None) -> None:
        rubric = rubric_for(slug)
        if rubric is None or slug not in HELM_SCENARIOS:
            raise ValueError(f"{slug!r} is not an open-ended benchmark with a jury rubric")
        self.slug = slug
        self.rubric = rubric
        self.criteria = rubric.criteria
        self.name = f"{HELM_SCENARIOS[slug]}_accuracy"
        #: for scoring outside a run (score()); in a run the scoring context brings the run's jury
        self._judge_completions = judge_completions
        #: None: the scoring context's (the run's --medhelm-bertscore-model)
        self.bertscore_model = bertscore_model

    def __repr__(self) -> str:
        return f"JuryMetric({self.slug!r})"

    def secondary_inputs(self, answer: str, instance: Instance,
                         compat: str = "default") -> tuple[str, list[str]] | None:
        """(prediction, references) as ROUGE and BERTScore see them (HELM: stripped, one leading ``{`` and one
        trailing ``}`` removed), or None when this benchmark reports no secondary metric. Give these pairs to
        :func:`pytest_medhelm.metrics.bertscore.prime` to batch BERTScore ahead of the items."""
        if not instance.references or not (self.rubric.has_gold or reproduces_helm(compat)):
            return None
        return remove_braces(answer.strip()), [remove_braces(reference) for reference in instance.references]

    def secondary(self, answer: str, instance: Instance, compat: str = "default",
                  bertscore_model: str | None = None) -> dict[str, Any]:
        """ROUGE-1/2/L and BERTScore P/R/F against the gold answer."""
        inputs = self.secondary_inputs(answer, instance, compat)
        if inputs is None:
            return {}
        from pytest_medhelm.metrics.bertscore import bertscore_metrics, model_for

        prediction, references = inputs
        out: dict[str, Any] = dict(rouge_scores(references, prediction))
        out.update(bertscore_metrics(prediction, references, model_for(self.bertscore_model, bertscore_model)))
        return out

    def score(self, answer: str, instance: Instance, compat: str = "default") -> Score:
        """Outside a run: with the ``judge_completions`` this metric was made with."""
        if self._judge_completions is None:
            raise RuntimeError(f"{self!r}: the jury needs judges: score it with assert_metric in a medhelm test, "
                               "or make the metric with JuryMetric(slug, judge_completions=...)")
        return self.score_with(answer, instance, ScoringContext(compat, self._judge_completions))

    def score_with(self, answer: str, instance: Instance, context: ScoringContext) -> Score:
        compat = context.compat
        if answer.strip():
            fetch = self._judge_completions or context.judge_completions
            if fetch is None:
                raise RuntimeError(f"{self!r}: no judges in this scoring context")
            completions = fetch(instance, answer)
        else:
            completions = {}  # HELM sends no judge request for an empty answer
        criteria = None if isinstance(completions, JuryVerdicts) else self.criteria
        result = jury_score(self.slug, completions, criteria, answer=answer, compat=compat)
        if result.flagged == FLAG_NO_JUDGE and not reproduces_helm(compat):
            # no judge could grade it: that is no measurement, not a score of 1/5 (HELM's default, kept under
            # --medhelm-compat helm)
            replies = completions.replies if isinstance(completions, JuryVerdicts) else completions
            reasons = result.failures or {name: "no reply" for name in replies}
            raise ScoringError("no valid judgement: " + "; ".join(f"{judge}: {why}" for judge, why in reasons.items()),
                               reasons)
        extra: dict[str, Any] = {
            "jury": result.to_record(),
            "judge_prompt_sha256": result.judge_prompt_sha256,
            # what the judges were asked from (under xdist each process loads it: the run says so if they differ)
            "jury_instrument": completions.instrument if isinstance(completions, JuryVerdicts) else None,
            "jury_tokens_in": result.tokens_in,
            "jury_tokens_out": result.tokens_out,
            "jury_cost_usd": result.cost_usd,
        }
        if context.prime_secondary is not None:
            context.prime_secondary(self.slug)
        extra.update(self.secondary(answer, instance, compat, context.bertscore_model))
        return Score(value=result.normalized, raw=result.raw, detail=result.detail(), extra=extra)


def jury_metric(slug: str) -> JuryMetric:
    """The jury metric of an open-ended benchmark (for a catalogue module: ``metric=jury_metric(SLUG)``)."""
    return JuryMetric(slug)
