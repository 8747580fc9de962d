"""The edges of reading a judge's reply (both parsers) and of the judges' agreement: what each rule of
jury/parsing.py and jury/agreement.py is for, one case each, with the exact reason a rejected judge is recorded with
(the reasons are what a user reads in the results)."""

from __future__ import annotations

import json
import math

import pytest

from pytest_medhelm.jury.agreement import icc3, judge_agreement
from pytest_medhelm.jury.parsing import JudgementError, parse_judgement
from pytest_medhelm.jury.parsing_helm import parse_judgement_helm

C3 = ("accuracy", "completeness", "clarity")


def full(score=4, **explanations) -> dict:
    return {c: {"score": score, "explanation": explanations.get(c, f"{c} ok")} for c in C3}


def reason(call) -> str:
    with pytest.raises(JudgementError) as info:
        call()
    assert str(info.value) == info.value.reason
    return info.value.reason


# ------------------------------------------------------------------------------------------------- our parser
def test_keys_are_matched_in_any_case_spacing_or_emphasis() -> None:
    assert parse_judgement('{"Clinical-Accuracy": 4, "**Clarity**": 5}', ["clinical_accuracy", "clarity"]) == {
        "clinical_accuracy": (4.0, ""), "clarity": (5.0, "")}
    assert parse_judgement('{"XRAY": 3}', ["xray"]) == {"xray": (3.0, "")}


@pytest.mark.parametrize(("reply", "why"), [
    ('{"accuracy": {"score": true}}', "accuracy: score True is not a number"),
    ('{"accuracy": {"score": null}}', "accuracy: score None is not a number"),
    ('{"accuracy": {"score": [4]}}', "accuracy: score [4] is not a number"),
    ('{"accuracy": {"score": "good"}}', "accuracy: score 'good' is not a number"),
    ('{"accuracy": {"score": 7, "explanation": "x"}}', "accuracy: score 7 outside 1-5"),
    ('{"accuracy": [0, "x"]}', "accuracy: score 0 outside 1-5"),
    ('{"accuracy": 6}', "accuracy: score 6 outside 1-5"),
    ('{"accuracy": {"explanation": "x"}}', "accuracy: no score"),
])
def test_a_score_that_is_not_one_to_five_is_rejected_with_its_reason(reply: str, why: str) -> None:
    assert reason(lambda: parse_judgement(reply, ["accuracy"])) == why


def test_reasons_for_missing_criteria_and_no_json() -> None:
    assert reason(lambda: parse_judgement('{"accuracy": 4}', C3)) == "missing criteria: completeness, clarity"
    assert reason(lambda: parse_judgement('{"note": 4}', C3)) == (
        "no criteria (accuracy, completeness, clarity) in the JSON")
    assert reason(lambda: parse_judgement("fine work", C3)) == "no JSON object in the reply"
    assert reason(lambda: parse_judgement("{not json", C3)) == "malformed JSON"
    assert reason(lambda: parse_judgement(" \n", C3)) == "empty reply"
    with pytest.raises(ValueError, match="^parse_judgement needs at least one criterion$"):
        parse_judgement("{}", [])
    # a fragment without the criteria, then the real object with a bad score: the score is the reason
    assert reason(lambda: parse_judgement('Note {"x": 1} then {"accuracy": {"score": 9, "explanation": ""}}',
                                          ["accuracy"])) == "accuracy: score 9 outside 1-5"
    # lines, no JSON: their out-of-range score is the reason
    assert reason(lambda: parse_judgement("Accuracy: 7/5 - superb", ["accuracy"])) == "accuracy: score 7 outside 1-5"


def test_explanations_are_kept_as_given() -> None:
    reply = json.dumps({"accuracy": {"score": 4, "explanation": {"détail": "ok"}}, "completeness": [3, "brief"],
                        "clarity": {"score": 5, "explanation": None}})
    assert parse_judgement(reply, C3) == {"accuracy": (4.0, '{"détail": "ok"}'), "completeness": (3.0, "brief"),
                                          "clarity": (5.0, "")}


def test_the_criteria_may_be_nested_two_levels_down_not_three() -> None:
    two = json.dumps({"result": {"scores": full()}})
    assert parse_judgement(two, C3)["clarity"] == (4.0, "clarity ok")
    three = json.dumps({"a": {"b": {"c": full()}}})
    assert reason(lambda: parse_judgement(three, C3)).startswith("no criteria")


def test_raw_newlines_with_trailing_commas_and_in_a_list() -> None:
    reply = '{"accuracy": {"score": 4, "explanation": "line one\nline two",},}'
    assert parse_judgement(reply, ["accuracy"]) == {"accuracy": (4.0, "line one\nline two")}
    listed = ('[{"criterion": "accuracy", "score": 4, "explanation": "a\nb"}, '
              '{"criterion": "clarity", "score": 3, "explanation": "c"}]')
    assert parse_judgement(listed, ["accuracy", "clarity"]) == {"accuracy": (4.0, "a\nb"), "clarity": (3.0, "c")}
    # between braces of prose, an object with a raw newline is still found
    prose = 'Scores {see below}: ' + json.dumps(full()).replace("accuracy ok", "acc\\nok").replace("\\n", "\n") \
        + " Thanks {bye}."
    assert parse_judgement(prose, C3)["accuracy"] == (4.0, "acc\nok")


def test_a_fence_whose_body_is_not_json_alone() -> None:
    reply = "```json\nHere are the scores: " + json.dumps(full()) + "\n```"
    assert parse_judgement(reply, C3)["accuracy"] == (4.0, "accuracy ok")


def test_python_style_dict_after_prose() -> None:
    reply = "My grades: " + repr(full(3))
    assert parse_judgement(reply, C3)["clarity"] == (3.0, "clarity ok")


@pytest.mark.parametrize("reply", [
    # the greedy match lacks two or three closing braces (nested, the reply ends on a brace)
    'Grades: {"scores": ' + json.dumps(full())[:-1],
    'Grades: {"r": {"scores": ' + json.dumps(full())[:-1],
    # cut off by max_tokens: after a bare score, after a score, in a nested string, after a nested score
    '{"accuracy": 4, "completeness": 4, "clarity": 4',
    json.dumps(full())[: json.dumps(full()).rindex(', "explanation": "clarity ok"')],
    '{"scores": ' + json.dumps(full())[: json.dumps(full()).rindex('ok"')],
    '{"scores": ' + json.dumps(full())[: json.dumps(full()).rindex(', "explanation": "clarity ok"')],
])
def test_a_reply_missing_its_closing_braces_is_closed(reply: str) -> None:
    assert {c: s for c, (s, _e) in parse_judgement(reply, C3).items()} == dict.fromkeys(C3, 4.0)


def test_a_verdict_after_any_number_of_stray_braces_is_found() -> None:
    # (once at most 400 "{" positions were tried; objects are now found in one linear pass)
    valid = json.dumps(full())
    assert parse_judgement("{" + valid, C3)["accuracy"][0] == 4.0
    assert parse_judgement("{" * 100_000 + valid, C3)["accuracy"][0] == 4.0
    # positions that can start an object and do not: up to 5000 are tried (a bound on a hostile reply's time)
    assert parse_judgement('{"' * 4_000 + " " + valid, C3)["accuracy"][0] == 4.0
    assert reason(lambda: parse_judgement('{"' * 5_000 + " " + valid, C3)) == "malformed JSON"


def test_lines_with_multi_word_criteria() -> None:
    assert parse_judgement("Clinical accuracy: 4/5 - sound\nClarity: 5", ["clinical_accuracy", "clarity"]) == {
        "clinical_accuracy": (4.0, "sound"), "clarity": (5.0, "")}


# ------------------------------------------------------------------------------------------------- HELM's parser
@pytest.mark.parametrize(("reply", "why"), [
    ("[4, 4, 4]", "the JSON is not an object"),
    ("no idea", "malformed JSON (Expecting value)"),
    ("", "malformed JSON (Expecting value)"),
    (json.dumps(full()) + " " + json.dumps(full()), "malformed JSON (Extra data)"),
    ('{"accuracy": {"score": 4 "explanation": "x"}}',
     "malformed JSON (Expecting ',' delimiter, also with '}' appended)"),
    (json.dumps({"accuracy": {"score": 4}}), "accuracy: no 'explanation'"),
    (json.dumps({"accuracy": 4}), "accuracy: no 'score'"),
    (json.dumps({"completeness": {"score": 4, "explanation": ""}}), "missing criterion 'accuracy'"),
    (json.dumps({"accuracy": {"score": 4, "explanation": ""}, "overall": 5}),
     "overall: 5 has no 'score' (HELM's metric would crash on it)"),
    (json.dumps({"accuracy": {"score": "4.5", "explanation": ""}}),
     "accuracy: score '4.5' is not an integer to HELM's int() (its metric would crash on it)"),
])
def test_helms_parser_drops_the_judge_with_a_reason(reply: str, why: str) -> None:
    assert reason(lambda: parse_judgement_helm(reply, ["accuracy"])) == why


def test_helms_parser_keeps_every_key_int_truncated() -> None:
    reply = json.dumps({"accuracy": {"score": 4.9, "explanation": "a"}, "overall": {"score": "5"}})
    assert parse_judgement_helm(reply, ["accuracy"]) == {"accuracy": (4.0, "a"), "overall": (5.0, "")}
    assert reason(lambda: parse_judgement_helm(None, ["accuracy"])) == "malformed JSON (Expecting value)"  # no reply


# ------------------------------------------------------------------------------------------------- agreement
def _j(scores: dict, failures=(), flagged=None) -> dict:
    return {"per_judge": {j: {"accuracy": {"score": s}} for j, s in scores.items()},
            "failures": {j: "malformed JSON" for j in failures}, "flagged": flagged}


def test_icc_reports_bad_input_by_name() -> None:
    with pytest.raises(ValueError, match=r"^expected a 2-D targets x raters matrix, got shape \(3,\)$"):
        icc3([1, 2, 3])
    with pytest.raises(ValueError, match=r"^ICC needs a complete matrix \(no NaN or infinite cell\)$"):
        icc3([[1, 2], [3, math.nan]])


def test_agreement_counts_and_edge_rows() -> None:
    records = [
        {"benchmark": "closed", "metrics": {}},  # not a jury record: skipped, the others still read
        {"jury": _j({}, flagged="empty answer")},  # nobody asked: neither agreement nor disagreement
        {"jury": _j({"a": 2, "b": 3})},
        {"jury": _j({"a": 4, "b": 5}, failures=["c"])},
        {"jury": _j({"a": 3}, failures=["b", "c"])},
        {"jury": _j({}, failures=["a", "b", "c"], flagged="no valid judge")},
        {"jury": _j({}, flagged="empty answer")},
        {"jury": {"per_judge": {"a": {"accuracy": "score 4"}}, "failures": {}, "flagged": None}},
    ]
    out = judge_agreement(records)
    assert out["judges"] == ["a", "b", "c"] and out["n_instances"] == 7
    assert out["failures"] == {"a": 1, "b": 2, "c": 3}
    assert out["flagged"] == {"empty answer": 2, "no valid judge": 1}
    assert out["judge_means"] == {"a": 3.0, "b": 4.0, "c": None}
    # two instances graded by a and b; c never: no complete row for the three judges
    assert out["n_complete"] == 0 and out["icc3k"] is None and out["n_pairable"] == 2
    two = judge_agreement([{"jury": _j({"a": 2, "b": 3})}, {"jury": _j({"a": 4, "b": 5})}])
    assert two["n_complete"] == 2 and two["icc3k"] == pytest.approx(1.0) and two["n_pairable"] == 2
    assert two["per_criterion"]["accuracy"]["icc3k"] == pytest.approx(1.0)
