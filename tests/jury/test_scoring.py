"""The jury's score of one judge's reply in both modes, on a table of malformed replies built from HELM 0.5.16's
rules (``LLMAsJuryAnnotator._annotate_with_model``, ``LLMJuryMetric``):

* default: our tolerant parser, scores range-checked 1-5, the mean over the benchmark's criteria;
* ``compat="helm"``: the greedy ``\\{.*\\}``, one retry with ``}`` appended on "Expecting ',' delimiter", a judge
  missing a criterion or its ``score``/``explanation`` dropped, every key of the reply averaged (extra keys too),
  ``int()`` on each score.
"""

from __future__ import annotations

import json

import pytest

from pytest_medhelm.jury import FLAG_NO_JUDGE, jury_score
from pytest_medhelm.values import Completion

CRITERIA = ("accuracy", "completeness", "clarity")


def obj(scores: dict, **extra) -> str:
    return json.dumps({**{c: {"score": s, "explanation": f"{c} ok"} for c, s in scores.items()}, **extra})


FOURS = dict.fromkeys(CRITERIA, 4)
VALID = obj(FOURS)
#: cut off by max_tokens inside the last criterion's explanation
CUT_IN_LAST = VALID[: VALID.index('"clarity ok"') + 5]
#: the outer closing brace missing: HELM's "Expecting ',' delimiter" retry mends it
NO_OUTER_BRACE = VALID[:-1]

# (id, reply, default mean or None = the judge is dropped, helm mean or None)
TABLE = [
    ("valid", VALID, 4.0, 4.0),
    ("float score truncated by int()", obj({**FOURS, "accuracy": 4.9}), 4.3, 4.0),
    ("string score", obj({**FOURS, "clarity": "2"}), 10 / 3, 10 / 3),
    ("string float score", obj({**FOURS, "clarity": "4.5"}), 12.5 / 3, None),
    ("4/5", obj({**FOURS, "clarity": "4/5"}), 4.0, None),
    ("extra criterion averaged by HELM", obj(FOURS, overall={"score": 5, "explanation": "x"}), 4.0, 4.25),
    ("extra bare number: HELM's metric would crash", obj(FOURS, overall=5), 4.0, None),
    ("missing criterion", obj({"accuracy": 4, "completeness": 4}), None, None),
    ("no explanation", json.dumps({c: {"score": 4} for c in CRITERIA}), 4.0, None),
    ("score 0 as in HELM's example", obj({**FOURS, "accuracy": 0}), None, 8 / 3),
    ("score 7", obj({**FOURS, "accuracy": 7}), None, 5.0),
    ("score exactly 1", obj({**FOURS, "accuracy": 1}), 3.0, 3.0),
    ("score exactly 5", obj({**FOURS, "accuracy": 5}), 13 / 3, 13 / 3),
    ("score true", obj({**FOURS, "accuracy": True}), None, 3.0),
    ("[score, explanation] list", json.dumps({c: [4, "ok"] for c in CRITERIA}), 4.0, None),
    ("criterion as a string naming the sub-keys", json.dumps({c: "score and explanation" for c in CRITERIA}),
     None, None),
    ("code fence", "```json\n" + VALID + "\n```", 4.0, 4.0),
    ("prose with a stray { before the JSON", "Scores {see below}:\n" + VALID, 4.0, None),
    ("two objects", VALID + "\n" + VALID, 4.0, None),
    ("outer brace missing", NO_OUTER_BRACE, 4.0, 4.0),
    ("cut in the last criterion", CUT_IN_LAST, 4.0, None),
    ("raw newline inside a string", VALID.replace("accuracy ok", "accuracy\nok"), 4.0, None),
    ("no JSON", "accuracy is fine, clarity too", None, None),
    ("empty", "", None, None),
    ("single quotes", VALID.replace('"', "'"), 4.0, None),
]


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


def test_scores_whose_sum_overflows_a_float_are_averaged_not_raised():
    """Under --medhelm-compat medhelm a judge's score may be any finite number: two judges stating 9e307 for every
    criterion sum past the largest float, and the jury's mean is still their mean (found by a property test)."""
    criteria = ["accuracy", "completeness", "clarity"]
    reply = json.dumps({c: {"score": 9e307, "explanation": "x"} for c in criteria})
    result = jury_score("aci_bench", {"a": Completion(text=reply), "b": Completion(text=reply)}, criteria,
                        answer="x", compat="medhelm")
    assert result.raw == 9e307 and result.failures == {} and result.normalized == 1.0
