"""The judges' agreement per benchmark and model, as records and as a table (pytest_medhelm.report.agreement)."""

from __future__ import annotations

from pytest_medhelm.report.agreement import NEEDS_TWO, agreement_table, jury_agreement_records


def _jury(scores: dict[str, float], failures: dict[str, str] | None = None, flagged: str | None = None) -> dict:
    return {"per_judge": {j: {"accuracy": {"score": s, "explanation": ""}, "clarity": {"score": s, "explanation": ""}}
                          for j, s in scores.items()}, "failures": failures or {}, "flagged": flagged}


def _record(i: int, jury: dict, benchmark: str = "aci_bench", model: str = "m") -> dict:
    return {"benchmark": benchmark, "model": model, "instance_id": str(i), "metrics": {"jury": jury}}


def test_agreement_records_per_benchmark_and_model() -> None:
    records = [_record(0, _jury({"a": 2, "b": 2})), _record(1, _jury({"a": 4, "b": 5})),
               _record(2, _jury({"a": 5, "b": 5})), _record(3, _jury({"a": 3}, {"b": "malformed JSON"})),
               _record(4, _jury({}, flagged="empty answer")),
               {"benchmark": "pubmedqa", "model": "m", "instance_id": "9", "metrics": {}}]
    [row] = [r.model_dump() for r in jury_agreement_records(records, ["a", "b"])]
    assert (row["benchmark"], row["model"], row["judges"]) == ("aci_bench", "m", ["a", "b"])
    assert row["n_instances"] == 5 and row["n_complete"] == 3
    assert row["failures"] == {"a": 0, "b": 1} and row["flagged"] == {"empty answer": 1}
    assert 0.9 < row["icc3k"] <= 1.0 and 0.8 < row["alpha_interval"] <= 1.0 and row["note"] is None
    header, [cells] = agreement_table({"jury_agreement": [row]})
    assert cells[:4] == ["aci_bench", "m", "2", "3/5"] and cells[-1] == "a: 0, b: 1"


def test_one_judge_says_agreement_needs_two() -> None:
    [row] = [r.model_dump() for r in jury_agreement_records([_record(0, _jury({"a": 2})), _record(1, _jury({"a": 4}))],
                                                             ["a"])]
    assert row["note"] == NEEDS_TWO and row["icc3k"] is None and row["alpha_interval"] is None
    _header, [cells] = agreement_table({"jury_agreement": [row]})
    assert NEEDS_TWO in cells
    assert jury_agreement_records([{"benchmark": "pubmedqa", "model": "m", "metrics": {}}], ["a", "b"]) == []
