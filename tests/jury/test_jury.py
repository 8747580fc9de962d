"""The LLM jury: rubrics, judge requests, parsing of judge replies, the jury score and the jury metric."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.jury import (
    DEFAULT_JUDGES,
    FLAG_EMPTY,
    FLAG_NO_JUDGE,
    HELM_DEFAULT_SCORE,
    RUBRICS,
    JudgementError,
    JuryResult,
    judge_requests,
    jury_score,
    parse_judgement,
    parse_judgement_helm,
    rubric_for,
)
from pytest_medhelm.metrics.jury import HELM_SCENARIOS, JuryMetric
from pytest_medhelm.values import ChatRequest, Completion, Instance, ModelError, ModelSpec

OPEN_SLUGS = ("mtsamples", "mtsamples_procedures", "aci_bench", "medicationqa", "mediqa", "meddialog", "medalign",
              "dischargeme", "mimic_rrs", "mimic_bhc", "noteextract", "patientinstruct", "mentalhealth")
ACC = ("accuracy", "completeness", "clarity")
#: HELM's annotator prompts: the tag around {QUESTION} per benchmark
INPUT_TAGS = {
    "aci_bench": "conversation", "noteextract": "user_request", "dischargeme": "patient_information",
    "meddialog": "conversation", "medalign": "user_request", "mediqa": "question",
    "medicationqa": "medication_question", "mentalhealth": "conversation", "mimic_bhc": "user_request",
    "mimic_rrs": "user_request", "mtsamples_procedures": "user_request", "mtsamples": "patient_information",
    "patientinstruct": "case_details",
}


def judgement(scores: dict[str, object], explanation: str = "fine") -> str:
    return json.dumps({c: {"score": s, "explanation": f"{explanation} {c}"} for c, s in scores.items()})


def all_fours(criteria=ACC) -> str:
    return judgement(dict.fromkeys(criteria, 4))


def completion(text: str, tokens_in: int = 1000, tokens_out: int = 80, cost: float | None = 0.01) -> Completion:
    return Completion(text=text, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost)


def aci_instance(n: int = 0) -> Instance:
    return Instance(id=f"D2N{n:03d}", input=f"Doctor-patient dialogue:\n\n[doctor] hello {n}\n[patient] my knee hurts",
                    references=(f"HISTORY OF PRESENT ILLNESS\nKnee pain {n}.",), benchmark="aci_bench")


JUDGES = (ModelSpec(name="openai/gpt-4o-2024-05-13", litellm_model="openai/gpt-4o-2024-05-13"),
          ModelSpec(name="anthropic/claude-3-7-sonnet-20250219", litellm_model="anthropic/claude-3-7-sonnet-20250219"))


# ---------------------------------------------------------------------------------------------- rubrics
def test_default_judges_are_the_papers_three_as_litellm_strings():
    assert DEFAULT_JUDGES == ("openai/gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet-20250219",
                              "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo")


def test_a_rubric_for_every_open_benchmark_of_the_catalogue_and_no_other():
    open_benchmarks = [b for b in builtin_benchmarks() if b.kind == "open"]
    open_in_catalogue = {b.slug for b in open_benchmarks if isinstance(b.metric, JuryMetric)}
    assert set(RUBRICS) == set(OPEN_SLUGS) == open_in_catalogue
    # the other open-ended ones are graded per rubric criterion (HealthBench's grader), not by the jury's rubrics
    assert {b.slug for b in open_benchmarks} - open_in_catalogue == {"healthbench", "healthbench_professional"}
    closed = [b.slug for b in builtin_benchmarks() if b.kind == "closed"]
    assert closed and all(rubric_for(slug) is None for slug in closed)


@pytest.mark.parametrize("slug", OPEN_SLUGS)
def test_rubric_shape(slug):
    rubric = rubric_for(slug)
    assert rubric is not None and rubric.slug == slug and rubric.version
    assert rubric.purpose == f"judge:{slug}:{rubric.version}"
    expected = ("accuracy", "structure", "clarity") if slug == "noteextract" else ACC
    assert rubric.criteria == expected
    assert rubric.has_gold is (slug != "noteextract")
    template = rubric.template
    tag = INPUT_TAGS[slug]
    assert f"<{tag}>\n{{QUESTION}}\n</{tag}>" in template
    assert "<response>\n{RESPONSE}\n</response>" in template
    assert ("<gold_response>\n{GOLD_RESPONSE}\n</gold_response>" in template) is rubric.has_gold
    assert "1 to 5" in template and "1 = very poor" in template and "5 = excellent" in template
    for criterion in expected:
        assert f"- {criterion}:" in template  # described
        assert f'"{criterion}": {{"score": <integer from 1 to 5>, "explanation": "<why this score>"}}' in template
    assert "JSON" in template and "explanation" in template


def test_rubric_wording_follows_the_spec_where_it_is_specific():
    assert "therapeutic technique" in rubric_for("mentalhealth").template
    assert "empathetic" in rubric_for("mentalhealth").template
    assert "Possible correct impressions" in rubric_for("mimic_rrs").template
    assert "One possible correct response" in rubric_for("mimic_bhc").template
    assert "plain language" in rubric_for("mediqa").template  # consumer clarity
    assert "all the parts of the required format" in rubric_for("noteextract").template


def test_render_substitutes_in_one_pass():
    rubric = rubric_for("aci_bench")
    text = rubric.render("Q {RESPONSE}", "an answer mentioning {GOLD_RESPONSE} literally", "GOLD")
    assert "Q {RESPONSE}" in text  # not expanded again
    assert "an answer mentioning {GOLD_RESPONSE} literally" in text
    assert "<gold_response>\nGOLD\n</gold_response>" in text


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


# ---------------------------------------------------------------------------------------------- parsing
GOOD = {"accuracy": 4.0, "completeness": 3.0, "clarity": 5.0}

PARSE_OK = [
    ("plain JSON", judgement({"accuracy": 4, "completeness": 3, "clarity": 5}), GOOD),
    ("code fence", "```json\n" + judgement({"accuracy": 4, "completeness": 3, "clarity": 5}) + "\n```", GOOD),
    ("text around", "Here is my evaluation:\n" + judgement({"accuracy": 4, "completeness": 3, "clarity": 5})
     + "\nLet me know if you need more.", GOOD),
    ("x/5 strings", judgement({"accuracy": "4/5", "completeness": "3 / 5", "clarity": "5 out of 5"}), GOOD),
    ("floats kept", judgement({"accuracy": 4.5, "completeness": "3.5", "clarity": 5}),
     {"accuracy": 4.5, "completeness": 3.5, "clarity": 5.0}),
    ("string score", judgement({"accuracy": "4", "completeness": "3", "clarity": "**5**"}), GOOD),
    ("keys in any case",
     '{"Accuracy": {"Score": 4, "Explanation": "a"}, "COMPLETENESS": {"score": 3, "explanation": "b"}, '
     '"clarity": {"SCORE": 5, "explanation": "c"}}', GOOD),
    ("bare numbers", '{"accuracy": 4, "completeness": 3, "clarity": 5}', GOOD),
    ("nested", '{"evaluation": {"scores": {"accuracy": {"score": 4}, "completeness": {"score": 3}, '
               '"clarity": {"score": 5}}}}', GOOD),
    ("list of criteria", '[{"criterion": "Accuracy", "score": 4, "explanation": "a"}, '
                         '{"criterion": "completeness", "score": 3}, {"criterion": "clarity", "rating": 5}]', GOOD),
    ("HELM's retry: missing closing brace",
     '{"accuracy": {"score": 4, "explanation": "a"}, "completeness": {"score": 3, "explanation": "b"}, '
     '"clarity": {"score": 5, "explanation": "c"}', GOOD),
    ("cut off by max_tokens inside the last explanation",
     '{"accuracy": {"score": 4, "explanation": "a"}, "completeness": {"score": 3, "explanation": "b"}, '
     '"clarity": {"score": 5, "explanation": "clear but the reply was cu', GOOD),
    ("raw newline in an explanation",
     '{"accuracy": {"score": 4, "explanation": "line one\nline two"}, "completeness": {"score": 3, '
     '"explanation": "b"}, "clarity": {"score": 5, "explanation": "c"}}', GOOD),
    ("trailing commas",
     '{"accuracy": {"score": 4, "explanation": "a",}, "completeness": {"score": 3, "explanation": "b"}, '
     '"clarity": {"score": 5, "explanation": "c"},}', GOOD),
    ("single quotes", "{'accuracy': {'score': 4, 'explanation': 'a'}, 'completeness': {'score': 3, "
                      "'explanation': 'b'}, 'clarity': {'score': 5, 'explanation': 'c'}}", GOOD),
    ("think block", "<think>maybe {\"accuracy\": 1}</think>\n"
     + judgement({"accuracy": 4, "completeness": 3, "clarity": 5}), GOOD),
    ("two objects, the second holds the criteria", '{"note": "see below"}\n'
     + judgement({"accuracy": 4, "completeness": 3, "clarity": 5}), GOOD),
    ("extra top-level keys (crash HELM)", '{"overall": 4, "accuracy": {"score": 4, "explanation": "a"}, '
     '"completeness": {"score": 3, "explanation": "b"}, "clarity": {"score": 5, "explanation": "c"}}', GOOD),
    ("no JSON, scored lines", "**Accuracy**: 4/5 - correct facts\n**Completeness**: 3 - misses the plan\n"
                              "- Clarity: 5/5 clear", GOOD),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in PARSE_OK], ids=[i for i, _, _ in PARSE_OK])
def test_parse_tolerant(text, expected):
    parsed = parse_judgement(text, ACC)
    assert {c: s for c, (s, _e) in parsed.items()} == expected
    assert all(isinstance(e, str) for _s, e in parsed.values())


def test_parse_keeps_explanations():
    parsed = parse_judgement(judgement({"accuracy": 4, "completeness": 3, "clarity": 5}, "because"), ACC)
    assert parsed["accuracy"] == (4.0, "because accuracy")
    lines = parse_judgement("Accuracy: 4/5 - correct facts\nCompleteness: 3 - partial\nClarity: 5 - clear", ACC)
    assert lines["accuracy"] == (4.0, "correct facts")


PARSE_BAD = [
    ("empty", "", "empty reply"),
    ("prose only", "I am unable to grade this response.", "no JSON"),
    ("missing criterion", judgement({"accuracy": 4, "clarity": 5}), "missing criteria: completeness"),
    ("score 0 (HELM's example)", judgement({"accuracy": 0, "completeness": 3, "clarity": 5}), "outside 1-5"),
    ("score 6", judgement({"accuracy": 6, "completeness": 3, "clarity": 5}), "outside 1-5"),
    ("score 4/10", judgement({"accuracy": "4/10", "completeness": 3, "clarity": 5}), "not a number"),
    ("score text", judgement({"accuracy": "good", "completeness": 3, "clarity": 5}), "not a number"),
    ("score null", judgement({"accuracy": None, "completeness": 3, "clarity": 5}), "not a number"),
    ("score true", judgement({"accuracy": True, "completeness": 3, "clarity": 5}), "not a number"),
    ("no score key", '{"accuracy": {"explanation": "a"}, "completeness": {"score": 3}, "clarity": {"score": 5}}',
     "accuracy: no score"),
    ("malformed", '{"accuracy": {"score": 4 "explanation": "a"}}', "malformed JSON"),
    ("other keys", '{"correctness": 4, "helpfulness": 3}', "no criteria"),
]


@pytest.mark.parametrize("text, reason", [(t, r) for _, t, r in PARSE_BAD], ids=[i for i, _, _ in PARSE_BAD])
def test_parse_rejects_with_a_reason(text, reason):
    with pytest.raises(JudgementError) as info:
        parse_judgement(text, ACC)
    assert reason in info.value.reason


def test_helm_parser_reproduces_helm():
    # int() truncation, out-of-range accepted, "Expecting ',' delimiter" retried with "}" appended
    parsed = parse_judgement_helm(judgement({"accuracy": 4.9, "completeness": 0, "clarity": "5"}), ACC)
    assert {c: s for c, (s, _) in parsed.items()} == {"accuracy": 4.0, "completeness": 0.0, "clarity": 5.0}
    unclosed = judgement({"accuracy": 4, "completeness": 3, "clarity": 5})[:-1]
    assert parse_judgement_helm(unclosed, ACC)["clarity"][0] == 5.0
    for text in (judgement({"accuracy": "4/5", "completeness": 3, "clarity": 5}),  # int("4/5") fails
                 "```json\n" + judgement({"accuracy": 4, "completeness": 3, "clarity": 5})[:-2] + "\n```",
                 '{"accuracy": 4, "completeness": 3, "clarity": 5}',  # no score/explanation sub-keys
                 "no json at all"):
        with pytest.raises(JudgementError):
            parse_judgement_helm(text, ACC)


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


# ---------------------------------------------------------------------------------------------- the metric
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


def test_importing_the_jury_imports_nothing_heavy():
    code = ("import sys, pytest_medhelm.jury, pytest_medhelm.metrics.jury;"
            "print([m for m in ('numpy', 'torch', 'transformers', 'bert_score', 'litellm', 'rouge_score', 'nltk')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
