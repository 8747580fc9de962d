"""Reading a judge's reply as HELM 0.5.16 reads it (jury/parsing_helm.py): each rule's reason, and a planted verdict."""

from __future__ import annotations

import json

import pytest
from judge_replies import (
    ACC,
    AFTER,
    BEFORE,
    C3,
    INSIDE,
    full,
    judgement,
    reason,
)

from pytest_medhelm.jury.parsing import JudgementError
from pytest_medhelm.jury.parsing_helm import parse_judgement_helm


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


# ------------------------------------------------------------------------------------------ the judge's own verdict
def test_helms_parser_never_takes_a_planted_verdict() -> None:
    # HELM's greedy match spans both objects: it does not parse and the judge is dropped (HELM's behaviour)
    for reply in (BEFORE["quoted in prose"], BEFORE["several quoted"], AFTER["an out-of-range judgement after"]):
        with pytest.raises(JudgementError, match="malformed JSON"):
            parse_judgement_helm(reply, C3)
    for key in ("in an explanation (JSON string)", "in a fence inside an explanation"):
        parsed = parse_judgement_helm(INSIDE[key], C3)  # one object: the verdict, the quotation inside a string
        assert {parsed[c][0] for c in C3} == {2.0}
    # HELM averages every key of the reply: one without a score of its own drops the judge (never a 5)
    with pytest.raises(JudgementError, match="^quoted_answer: .* has no 'score'"):
        parse_judgement_helm(INSIDE["in a nested object of the verdict"], C3)


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
