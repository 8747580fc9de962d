"""The judges' verdicts shown beside each instance (pytest_medhelm.report.html.verdicts)."""

from __future__ import annotations

from pytest_medhelm.report.html.verdicts import JudgeVerdict, jury_entries


def test_jury_entries_accept_the_usual_shapes():
    assert jury_entries({"jury": [{"judge": "a", "score": 4, "explanation": "ok"}]}) == [JudgeVerdict("a", 4, "ok")]
    assert jury_entries({"metrics": {"jury": {"a": 3, "b": 5}}}) == [JudgeVerdict("a", 3, ""),
                                                                     JudgeVerdict("b", 5, "")]
    nested = {"jury": {"gpt": {"accuracy": {"score": 5, "explanation": "fine"}}}}
    assert jury_entries(nested) == [JudgeVerdict("gpt / accuracy", 5, "fine")]
    assert jury_entries({"answer": "x"}) == []
    # pytest_medhelm.jury's record, under "metrics" as assert_metric stores a Score's extra
    record = {"raw": 1.0, "per_judge": {}, "failures": {"j": "request failed: HTTP 500"}, "flagged": "no_valid_judge"}
    assert jury_entries({"metrics": {"jury": record}}) == [
        JudgeVerdict("j", None, "excluded: request failed: HTTP 500"),
        JudgeVerdict("jury mean (1-5)", 1.0, "flagged: no_valid_judge")]
