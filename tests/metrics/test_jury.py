"""The jury metric (metrics/jury.py): HELM's names, judges from the scoring context, ROUGE beside the jury, misses."""

from __future__ import annotations

import json

import pytest
from judge_replies import (
    ACC,
    JUDGES,
    OPEN_SLUGS,
    aci_instance,
    all_fours,
    completion,
    judgement,
)

from pytest_medhelm.metrics.jury import HELM_SCENARIOS, JuryMetric
from pytest_medhelm.values import Instance


@pytest.fixture
def no_bertscore(monkeypatch):
    """BERTScore reported unavailable (test_bertscore.py runs the real one)."""
    from pytest_medhelm.metrics import bertscore

    monkeypatch.setattr(bertscore, "unavailable_reason", lambda: "BERTScore unavailable: torch not installed (test)")
    monkeypatch.setattr(bertscore, "_FAILED", {})


def test_metric_names_follow_helm():
    assert JuryMetric("aci_bench").name == "aci_bench_accuracy"
    assert JuryMetric("noteextract").name == "chw_care_plan_accuracy"
    assert JuryMetric("mtsamples").name == "mtsamples_replicate_accuracy"
    assert JuryMetric("patientinstruct").name == "starr_patient_instructions_accuracy"
    assert set(HELM_SCENARIOS) == set(OPEN_SLUGS)
    metric = JuryMetric("mediqa")
    assert metric.binary is False and metric.pass_mark == 0.5
    with pytest.raises(ValueError):
        JuryMetric("pubmedqa")


def test_aci_bench_on_five_instances_with_two_judges_answering_four(no_bertscore):
    from pytest_medhelm.metrics.base import ScoringContext

    calls = []

    def fake_judge_completions(instance, answer_text):
        calls.append((instance.id, answer_text))
        return {j.name: completion(all_fours(), 1500, 120, 0.01) for j in JUDGES}

    # as the run scores it: the judges come with the scoring context
    context = ScoringContext(judge_completions=fake_judge_completions)
    metric = JuryMetric("aci_bench")
    scores = [metric.score_with(f"HISTORY OF PRESENT ILLNESS\nKnee pain {n}.", aci_instance(n), context)
              for n in range(5)]
    assert len(calls) == 5
    assert [s.raw for s in scores] == [4.0] * 5 and [s.value for s in scores] == [0.75] * 5
    assert sum(s.raw for s in scores) / 5 == 4.0 and sum(s.value for s in scores) / 5 == 0.75
    extra = scores[0].extra
    assert (extra["jury_tokens_in"], extra["jury_tokens_out"]) == (3000, 240)
    assert extra["jury_cost_usd"] == pytest.approx(0.02)
    assert extra["jury"]["per_judge"][JUDGES[1].name]["completeness"]["score"] == 4.0
    assert extra["jury"]["flagged"] is None
    assert scores[0].detail == "jury 4.00/5 (2 judges)"
    # secondary metrics against the gold note: ROUGE (identical text here) and BERTScore reported unavailable
    assert extra["rouge_l"] == pytest.approx(1.0) and {"rouge_1", "rouge_2"} <= set(extra)
    assert extra["bertscore_unavailable"].startswith("BERTScore unavailable")
    json.dumps(extra)


def test_metric_empty_answer_asks_no_judge(monkeypatch, no_bertscore):
    def never(instance, answer_text):  # pragma: no cover - must not be called
        raise AssertionError("a judge was asked about an empty answer")

    score = JuryMetric("aci_bench", judge_completions=never).score("  ", aci_instance())
    assert (score.value, score.raw) == (0.0, 1.0)
    assert score.extra["jury"]["flagged"] == "empty answer" and score.extra["jury_tokens_in"] == 0


def test_metric_noteextract_has_no_rouge_by_default_but_helm_reports_it(no_bertscore):
    note = "dull low back pain since Monday"
    inst = Instance(id="row2", input=f"Clinical Note:\n{note}\n", references=(note,), benchmark="noteextract")
    crit = ("accuracy", "structure", "clarity")

    def fake(instance, answer):
        return {"j": completion(judgement(dict.fromkeys(crit, 5)))}

    default = JuryMetric("noteextract", judge_completions=fake).score("Chief Complaint: back pain", inst)
    assert default.value == 1.0 and "rouge_l" not in default.extra and "bertscore_f" not in default.extra
    helm = JuryMetric("noteextract", judge_completions=fake).score("Chief Complaint: back pain", inst, "helm")
    assert "rouge_l" in helm.extra and "bertscore_unavailable" in helm.extra


def test_metric_miss_below_three(no_bertscore):
    from pytest_medhelm.assertions import assert_metric
    from pytest_medhelm.item_api import Missed

    def fake(instance, answer):
        return {"j": completion(judgement(dict.fromkeys(ACC, 2)))}

    metric = JuryMetric("mediqa", judge_completions=fake)
    inst = Instance(id="1", input="q", references=("gold",), benchmark="mediqa")
    with pytest.raises(Missed, match=r"jury 2.00/5"):
        assert_metric("an answer", inst, metric=metric)
