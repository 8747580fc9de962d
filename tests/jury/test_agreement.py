"""Agreement statistics (jury/agreement.py): ICC(3,1) / ICC(3,k), Krippendorff's alpha (interval), the judges'
agreement in a report. (The clinician-agreement command: test_clinician_agreement.py.)"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from independent_icc import anova_icc3

from pytest_medhelm.jury.agreement import icc3, icc3k, judge_agreement, krippendorff_alpha_interval


# ---------------------------------------------------------------------------------------------- ICC
def test_icc_hand_computed():
    # targets x raters [[1,2],[3,3],[5,4]]: grand mean 3; row means 1.5, 3, 4.5 -> SS_rows = 2*(2.25+0+2.25) = 9,
    # MS_rows = 4.5; column means 3, 3 -> SS_cols = 0; SS_total = 4+1+0+0+4+1 = 10 -> SS_err = 1, MS_err = 0.5.
    # ICC(3,1) = (4.5-0.5)/(4.5+0.5) = 0.8; ICC(3,2) = (4.5-0.5)/4.5 = 8/9
    single, average = icc3([[1, 2], [3, 3], [5, 4]])
    assert single == pytest.approx(0.8, abs=1e-12)
    assert average == pytest.approx(8 / 9, abs=1e-12)
    # a constant offset between raters changes nothing (consistency)
    assert icc3k([[1, 11], [3, 13], [5, 15]]) == pytest.approx(1.0)
    # raters ranking the targets in opposite orders: negative
    assert icc3k([[1, 4], [2, 2], [4, 1]]) < 0


def test_icc_shrout_fleiss_1979_table_2():
    # Shrout & Fleiss (1979), Psychological Bulletin 86(2), Table 2: 6 targets rated by 4 judges;
    # their Table 4 gives ICC(3,1) = .71 and ICC(3,4) = .91
    ratings = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    single, average = icc3(ratings)
    assert round(single, 2) == 0.71 and round(average, 2) == 0.91
    assert single == pytest.approx(0.7148407, abs=1e-6) and average == pytest.approx(0.9093155, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_icc_matches_an_independent_anova(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(5, 60)), int(rng.integers(2, 6))
    truth = rng.normal(size=(n, 1))
    x = truth + rng.normal(scale=rng.uniform(0.2, 2.0), size=(n, k)) + rng.normal(size=(1, k))
    expected = anova_icc3(x)
    got = icc3(x)
    assert got[0] == pytest.approx(expected[0], abs=1e-9)
    assert got[1] == pytest.approx(expected[1], abs=1e-9)


def test_icc_undefined_cases():
    assert all(math.isnan(v) for v in icc3([[3, 3], [3, 3]]))  # no variation between targets
    assert all(math.isnan(v) for v in icc3([[1, 2]]))  # one target
    with pytest.raises(ValueError):
        icc3([[1, float("nan")], [2, 3]])
    with pytest.raises(ValueError):
        icc3([1, 2, 3])


# ---------------------------------------------------------------------------------------------- alpha
def brute_force_alpha(units):
    """Krippendorff's alpha (interval) by explicit pair loops, from its definition."""
    pairable = [[float(v) for v in u if v is not None] for u in units]
    pairable = [u for u in pairable if len(u) >= 2]
    n = sum(len(u) for u in pairable)
    d_o = sum(sum((a - b) ** 2 for i, a in enumerate(u) for j, b in enumerate(u) if i != j) / (len(u) - 1)
              for u in pairable) / n
    pooled = [v for u in pairable for v in u]
    d_e = sum((a - b) ** 2 for i, a in enumerate(pooled) for j, b in enumerate(pooled) if i != j) / (n * (n - 1))
    return 1 - d_o / d_e


def test_alpha_krippendorff_published_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders x 12 units with missing values;
    # interval alpha = 0.849
    N = None
    coders = [[1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
              [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N]]
    units = list(zip(*coders))
    assert round(krippendorff_alpha_interval(units), 3) == 0.849
    assert krippendorff_alpha_interval(units) == pytest.approx(brute_force_alpha(units), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_alpha_matches_brute_force_with_missing_values(seed):
    rng = np.random.default_rng(seed)
    units = []
    for _ in range(int(rng.integers(4, 25))):
        base = rng.integers(1, 6)
        unit = [float(min(5, max(1, base + rng.integers(-1, 2)))) if rng.random() > 0.25 else None for _ in range(3)]
        units.append(unit)
    assert krippendorff_alpha_interval(units) == pytest.approx(brute_force_alpha(units), abs=1e-12)


def test_alpha_edge_cases():
    assert krippendorff_alpha_interval([[1, 1], [3, 3], [5, 5]]) == pytest.approx(1.0)
    assert math.isnan(krippendorff_alpha_interval([[4, 4], [4, 4]]))
    assert math.isnan(krippendorff_alpha_interval([[4, None], [3]]))


# ---------------------------------------------------------------------------------------------- judges
def jury_record(scores: dict[str, dict[str, float] | None], flagged=None) -> dict:
    per_judge = {j: {c: {"score": s, "explanation": "."} for c, s in crit.items()}
                 for j, crit in scores.items() if crit is not None}
    failures = {j: "malformed JSON" for j, crit in scores.items() if crit is None}
    return {"raw": 0.0, "per_judge": per_judge, "failures": failures, "flagged": flagged}


def test_judge_agreement_lenient_judge_still_consistent():
    records = []
    for quality in (1, 2, 3, 4, 2, 3):
        records.append(jury_record({"gpt": {"accuracy": quality, "clarity": quality},
                                    "claude": {"accuracy": quality + 1, "clarity": quality + 1}}))
    out = judge_agreement(records)
    assert out["judges"] == ["gpt", "claude"]
    assert out["n_instances"] == 6 and out["n_complete"] == 6
    assert out["icc3k"] == pytest.approx(1.0) and out["icc3_1"] == pytest.approx(1.0)
    assert out["alpha_interval"] < 1.0  # alpha counts the offset as disagreement, ICC(3,k) does not
    assert out["judge_means"]["claude"] == pytest.approx(out["judge_means"]["gpt"] + 1)
    assert set(out["per_criterion"]) == {"accuracy", "clarity"}
    assert out["per_criterion"]["accuracy"]["icc3k"] == pytest.approx(1.0)
    json.dumps(out)


def test_judge_agreement_counts_failures_and_flags_and_reads_nested_records():
    records = [
        {"metrics": {"jury": jury_record({"a": {"accuracy": 4}, "b": {"accuracy": 5}})}},
        {"jury": jury_record({"a": {"accuracy": 2}, "b": None})},
        jury_record({"a": {"accuracy": 3}, "b": {"accuracy": 3}}),
        jury_record({"a": {"accuracy": 1}, "b": {"accuracy": 2}}),
        jury_record({}, flagged="empty answer"),
        {"benchmark": "x"},  # a record without a jury: ignored
    ]
    out = judge_agreement(records)
    assert out["n_instances"] == 5 and out["n_complete"] == 3
    assert out["failures"] == {"a": 0, "b": 1}
    assert out["flagged"] == {"empty answer": 1}
    expected = icc3([[4, 5], [3, 3], [1, 2]])[1]
    assert out["icc3k"] == pytest.approx(expected)


def test_judge_agreement_with_one_judge_is_undefined():
    out = judge_agreement([jury_record({"a": {"accuracy": s}}) for s in (1, 3, 5)])
    assert out["icc3k"] is None and out["alpha_interval"] is None and out["judges"] == ["a"]


# ------------------------------------------------------------------------------- edges of the judges' agreement
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
