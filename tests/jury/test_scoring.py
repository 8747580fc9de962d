"""The jury's score (jury/scoring.py): the judges' requests, the jury's score, and one judge's reply in both modes,
on a table of malformed replies built from HELM 0.5.16's rules (``LLMAsJuryAnnotator._annotate_with_model``,
``LLMJuryMetric``):

* default: our tolerant parser, scores range-checked 1-5, the mean over the benchmark's criteria;
* ``compat="helm"``: the greedy ``\\{.*\\}``, one retry with ``}`` appended on "Expecting ',' delimiter", a judge
  missing a criterion or its ``score``/``explanation`` dropped, every key of the reply averaged (extra keys too),
  ``int()`` on each score.
"""

from __future__ import annotations

import json

import pytest
from judge_replies import (
    CRITERIA,
    FOURS,
    JUDGES,
    TABLE,
    aci_instance,
    all_fours,
    completion,
    judgement,
    obj,
)

from pytest_medhelm.jury import FLAG_EMPTY, FLAG_NO_JUDGE, HELM_DEFAULT_SCORE, JuryResult, judge_requests, jury_score
from pytest_medhelm.values import ChatRequest, Completion, Instance, ModelError


@pytest.mark.parametrize("compat", ["default", "helm"])
@pytest.mark.parametrize(("reply", "default", "helm"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_one_judges_reply(reply: str, default: float | None, helm: float | None, compat: str) -> None:
    expected = default if compat == "default" else helm
    result = jury_score("aci_bench", {"judge": Completion(text=reply)}, CRITERIA, answer="a note", compat=compat)
    if expected is None:
        assert result.flagged == FLAG_NO_JUDGE and result.raw == 1.0 and "judge" in result.failures
        assert result.per_judge == {}
    else:
        assert result.flagged is None and result.failures == {}
        assert result.raw == pytest.approx(expected)


def test_helm_mean_is_over_every_judge_and_every_key_of_the_kept_judges() -> None:
    replies = {
        "a": Completion(text=obj(FOURS)),
        "b": Completion(text=obj({**FOURS, "clarity": 2.9}, overall={"score": "5", "explanation": "x"})),
        "c": Completion(text=obj({"accuracy": 5, "completeness": 5})),  # missing clarity: dropped
        "d": RuntimeError("HTTP 500"),  # failed request: dropped
    }
    helm = jury_score("aci_bench", replies, CRITERIA, answer="x", compat="helm")
    assert helm.raw == pytest.approx((4 * 3 + 4 + 4 + 2 + 5) / 7)
    assert set(helm.per_judge) == {"a", "b"} and set(helm.failures) == {"c", "d"}
    assert helm.per_judge["b"]["overall"] == {"score": 5.0, "explanation": "x"}
    default = jury_score("aci_bench", replies, CRITERIA, answer="x")
    assert default.raw == pytest.approx((4 * 3 + 4 + 4 + 2.9) / 6)


def test_an_empty_answer_scores_helms_default_without_a_judge() -> None:
    for compat in ("default", "helm"):
        result = jury_score("aci_bench", {}, CRITERIA, answer=" \n", compat=compat)
        assert result.raw == 1.0 and result.normalized == 0.0 and result.flagged == "empty answer"


# ---------------------------------------------------------------------------------------------- requests
def test_judge_requests_content_for_aci_bench():
    inst = aci_instance(7)
    answer = "HPI: knee pain since Monday."
    requests = judge_requests("aci_bench", inst, answer, JUDGES)
    assert [name for name, _ in requests] == [j.name for j in JUDGES]
    keys = set()
    for (_name, req), judge in zip(requests, JUDGES):
        assert isinstance(req, ChatRequest)
        assert req.model == judge.cache_identity
        assert req.temperature == 0.0 and req.max_tokens == 4096 and req.stop == ()
        assert req.purpose == "judge:aci_bench:1"
        assert len(req.messages) == 1 and req.messages[0][0] == "user"
        prompt = req.prompt_text
        assert f"<conversation>\n{inst.input}\n</conversation>" in prompt
        assert f"<response>\n{answer}\n</response>" in prompt
        assert f"<gold_response>\n{inst.references[0]}\n</gold_response>" in prompt
        # the judges see the scenario input only, never the adapter's instructions (as HELM's annotators)
        assert "Summarize the conversation to generate a clinical note" not in prompt
        keys.add(req.cache_key())
    assert len(keys) == 2
    # the same request built twice gives the same cache key; another rubric version would not
    again = judge_requests("aci_bench", inst, answer, JUDGES)
    assert [r.cache_key() for _, r in again] == [r.cache_key() for _, r in requests]


def test_judge_requests_for_noteextract_have_no_gold_and_a_structure_axis():
    note = "Synthetic note: dull low back pain since Monday, worse lifting, 6/10."
    inst = Instance(id="row2", input=f"\nYou are provided with a clinical note ...\nClinical Note:\n{note}\n",
                    references=(note,), benchmark="noteextract")
    [(_name, req)] = judge_requests("noteextract", inst, "Chief Complaint\nBack pain", JUDGES[:1])
    prompt = req.prompt_text
    assert "<user_request>" in prompt and "</user_request>" in prompt
    assert "<gold_response>" not in prompt and "{GOLD_RESPONSE}" not in prompt
    assert '"structure": {"score"' in prompt and '"completeness"' not in prompt
    assert req.purpose == "judge:noteextract:1"


@pytest.mark.parametrize("answer", ["", "   ", "\n\t"])
def test_no_judge_request_for_an_empty_answer(answer):
    assert judge_requests("aci_bench", aci_instance(), answer, JUDGES) == []


def test_no_judge_request_for_a_closed_benchmark():
    assert judge_requests("pubmedqa", aci_instance(), "yes", JUDGES) == []


def test_an_instance_without_reference_gets_an_empty_gold():
    inst = Instance(id="x", input="question", benchmark="mediqa")
    [(_n, req)] = judge_requests("mediqa", inst, "answer", JUDGES[:1])
    assert "<gold_response>\n\n</gold_response>" in req.prompt_text


# ---------------------------------------------------------------------------------------------- jury score
def test_two_judges_answering_four_everywhere():
    result = jury_score("aci_bench", {j.name: completion(all_fours(), 1200, 90, 0.02) for j in JUDGES})
    assert isinstance(result, JuryResult)
    assert result.raw == 4.0 and result.normalized == 0.75
    assert result.flagged is None and result.failures == {}
    assert result.n_judges == 2 and result.n_scores == 6
    assert result.per_judge[JUDGES[0].name]["accuracy"] == {"score": 4.0, "explanation": "fine accuracy"}
    assert (result.tokens_in, result.tokens_out) == (2400, 180)
    assert result.cost_usd == pytest.approx(0.04)
    assert result.detail() == "jury 4.00/5 (2 judges)"


def test_mean_over_every_valid_judge_and_criterion():
    replies = {"a": completion(judgement({"accuracy": 5, "completeness": 4, "clarity": 3})),
               "b": completion(judgement({"accuracy": 2, "completeness": 2.5, "clarity": 5}))}
    result = jury_score("aci_bench", replies)
    assert result.raw == pytest.approx((5 + 4 + 3 + 2 + 2.5 + 5) / 6)
    assert result.normalized == pytest.approx((result.raw - 1) / 4)
    helm = jury_score("aci_bench", replies, compat="helm")  # int(2.5) == 2
    assert helm.raw == pytest.approx((5 + 4 + 3 + 2 + 2 + 5) / 6)


def test_a_malformed_judge_is_excluded_counted_and_the_rest_scores():
    replies = {"openai/gpt-4o": completion(all_fours(), 1000, 50, 0.01),
               "anthropic/claude": completion('{"accuracy": {"score": 4 "explanation": "x"}', 900, 40, 0.02),
               "together_ai/llama": ModelError("together_ai/llama", "rate limited", status=429)}
    result = jury_score("aci_bench", replies)
    assert result.raw == 4.0 and result.normalized == 0.75 and result.flagged is None
    assert set(result.per_judge) == {"openai/gpt-4o"}
    assert result.failures["anthropic/claude"] == "malformed JSON"
    assert result.failures["together_ai/llama"].startswith("request failed: together_ai/llama (HTTP 429)")
    # the malformed reply still cost tokens; the failed request none
    assert (result.tokens_in, result.tokens_out) == (1900, 90)
    assert result.cost_usd == pytest.approx(0.03)
    assert result.detail().startswith("jury 4.00/5 (1 judge; claude: malformed JSON; llama: request failed")


def test_no_valid_judge_gets_helms_default_flagged():
    result = jury_score("aci_bench", {"a": completion("no idea"), "b": RuntimeError("boom")})
    assert result.raw == HELM_DEFAULT_SCORE == 1.0 and result.normalized == 0.0
    assert result.flagged == FLAG_NO_JUDGE == "no valid judge"
    assert set(result.failures) == {"a", "b"}


def test_empty_answer_gets_helms_default_flagged():
    result = jury_score("aci_bench", {}, answer="  ")
    assert (result.raw, result.normalized, result.flagged) == (1.0, 0.0, FLAG_EMPTY)
    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (0, 0, 0.0)
    assert "empty answer" in result.detail()


def test_unknown_cost_makes_the_jury_cost_unknown():
    result = jury_score("aci_bench", {"a": completion(all_fours(), cost=0.01), "b": completion(all_fours(), cost=None)})
    assert result.cost_usd is None


def test_noteextract_criteria_come_from_its_rubric():
    crit = ("accuracy", "structure", "clarity")
    result = jury_score("noteextract", {"a": completion(judgement(dict.fromkeys(crit, 3)))})
    assert result.raw == 3.0 and result.normalized == 0.5
    bad = jury_score("noteextract", {"a": completion(all_fours())})  # completeness instead of structure
    assert bad.flagged == FLAG_NO_JUDGE and "structure" in bad.failures["a"]
    with pytest.raises(ValueError):
        jury_score("pubmedqa", {})


def test_record_is_json_serializable():
    result = jury_score("aci_bench", {"a": completion(all_fours()), "b": completion("nope")})
    record = json.loads(json.dumps(result.to_record()))
    assert set(record) == {"raw", "per_judge", "failures", "flagged"}
    assert record["per_judge"]["a"]["clarity"]["score"] == 4.0


def test_scores_whose_sum_overflows_a_float_are_averaged_not_raised():
    """Under --medhelm-compat medhelm a judge's score may be any finite number: two judges stating 9e307 for every
    criterion sum past the largest float, and the jury's mean is still their mean (found by a property test)."""
    criteria = ["accuracy", "completeness", "clarity"]
    reply = json.dumps({c: {"score": 9e307, "explanation": "x"} for c in criteria})
    result = jury_score("aci_bench", {"a": Completion(text=reply), "b": Completion(text=reply)}, criteria,
                        answer="x", compat="medhelm")
    assert result.raw == 9e307 and result.failures == {} and result.normalized == 1.0
