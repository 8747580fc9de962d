"""Agreement statistics: ICC(3,1) / ICC(3,k), Krippendorff's alpha (interval), the judges' agreement in a report,
and the ``pytest-medhelm agreement`` clinician-agreement command."""

from __future__ import annotations

import csv
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_medhelm.jury.agreement import icc3, icc3k, judge_agreement, krippendorff_alpha_interval
from pytest_medhelm.jury.clinician_agreement import analyse, main, read_ratings


# ---------------------------------------------------------------------------------------------- independent ICC
def anova_icc3(x: np.ndarray) -> tuple[float, float]:
    """ICC(3,1), ICC(3,k) from a two-way ANOVA fitted as a linear model (target and rater dummies) by least
    squares: written independently of the package's formula-based implementation."""
    n, k = x.shape
    y = x.reshape(-1)
    targets = np.repeat(np.eye(n), k, axis=0)
    raters = np.tile(np.eye(k), (n, 1))
    full = np.hstack([targets, raters[:, 1:]])
    fitted_full = full @ np.linalg.lstsq(full, y, rcond=None)[0]
    sse = float(((y - fitted_full) ** 2).sum())
    # SS between targets: reduction in residual from a raters-only model to the full one
    raters_only = np.hstack([np.ones((n * k, 1)), raters[:, 1:]])
    fitted_r = raters_only @ np.linalg.lstsq(raters_only, y, rcond=None)[0]
    ss_targets = float(((y - fitted_r) ** 2).sum()) - sse
    msr = ss_targets / (n - 1)
    mse = sse / ((n - 1) * (k - 1))
    return (msr - mse) / (msr + (k - 1) * mse), (msr - mse) / msr


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


# ---------------------------------------------------------------------------------------------- clinicians CLI
def synthetic_ratings(seed: int = 0, n: int = 40) -> list[tuple[str, str, float]]:
    """3 clinicians (each skipping some instances, each with their own leniency and scale) and a jury."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=n)
    rows = []
    for rater, (offset, scale, noise, skip) in {"dr_a": (3.0, 0.8, 0.6, 0.1), "dr_b": (2.5, 1.2, 0.8, 0.2),
                                                 "dr_c": (3.5, 0.5, 0.5, 0.3), "jury": (3.8, 0.6, 0.5, 0.0)}.items():
        for i in range(n):
            if rng.random() < skip:
                continue
            rows.append((f"inst{i:03d}", rater, round(offset + scale * quality[i] + rng.normal(scale=noise), 4)))
    return rows


def write_csv(path: Path, header, rows) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def independent_expectation(rows, jury="jury"):
    """The paper's method written out again with scipy's z-scores and the ANOVA ICC above."""
    from scipy.stats import zscore

    by_rater: dict[str, dict[str, float]] = {}
    for instance, rater, score in rows:
        by_rater.setdefault(rater, {})[instance] = float(score)
    z = {}
    for rater, scores in by_rater.items():
        ids = sorted(scores)
        z[rater] = dict(zip(ids, zscore([scores[i] for i in ids])))
    clinicians = sorted(r for r in z if r != jury)
    ids = sorted(i for i in z[jury] if any(i in z[c] for c in clinicians))
    matrix = np.array([[np.mean([z[c][i] for c in clinicians if i in z[c]]), z[jury][i]] for i in ids])
    pair_values = []
    for a, b in itertools.combinations(clinicians, 2):
        shared = sorted(set(z[a]) & set(z[b]))
        if len(shared) >= 2:
            pair_values.append(anova_icc3(np.array([[z[a][i], z[b][i]] for i in shared]))[1])
    return anova_icc3(matrix)[1], float(np.mean(pair_values)), len(ids)


def test_cli_matches_an_independent_implementation(tmp_path, capsys):
    rows = synthetic_ratings()
    ratings = write_csv(tmp_path / "ratings.csv", ["instance_id", "rater", "score"], rows)
    out = tmp_path / "out" / "agreement.json"
    assert main([str(ratings), "--jury-rater", "jury", "--json", str(out), "--bootstrap", "300"]) == 0
    result = json.loads(out.read_text())
    jury_icc, pairwise, n = independent_expectation(rows)
    assert result["icc3k_jury_vs_clinicians"] == pytest.approx(jury_icc, abs=1e-6)
    assert result["clinician_pairwise_icc3k_mean"] == pytest.approx(pairwise, abs=1e-6)
    assert result["n_instances"] == n and result["n_raters"] == 3 and result["n_clinician_pairs"] == 3
    for key in ("ci", "ci_pairwise"):
        low, high = result[key]
        assert -1.0 <= low <= high <= 1.0
    assert result["ci"][0] <= result["icc3k_jury_vs_clinicians"] <= result["ci"][1]
    assert result["ci_pairwise"][0] <= result["clinician_pairwise_icc3k_mean"] <= result["ci_pairwise"][1]
    printed = capsys.readouterr().out
    assert "ICC(3,k) jury vs clinicians' mean (k=2)" in printed and "95% CI" in printed
    # the same seed gives the same intervals; the subcommand name in front is accepted
    again = tmp_path / "again.json"
    assert main(["agreement", str(ratings), "--jury-rater", "jury", "--json", str(again), "--bootstrap", "300"]) == 0
    assert json.loads(again.read_text()) == result


def test_cli_axis_columns_are_averaged(tmp_path):
    rows = synthetic_ratings(seed=3, n=25)
    rng = np.random.default_rng(1)
    axis_rows = []
    composite_rows = []
    for instance, rater, score in rows:
        acc, comp = score + rng.normal(scale=0.3), score + rng.normal(scale=0.3)
        clar = 3 * score - acc - comp
        axis_rows.append((instance, rater, acc, comp, clar, "free text note"))
        composite_rows.append((instance, rater, (acc + comp + clar) / 3))
    axes = write_csv(tmp_path / "axes.csv", ["instance_id", "rater", "Accuracy", "completeness", "clarity", "note"],
                     axis_rows)
    ratings = read_ratings(axes)
    assert ratings["dr_a"][rows[0][0]] == pytest.approx(rows[0][2])
    result = analyse(ratings, "jury", n_boot=0)
    assert result["icc3k_jury_vs_clinicians"] == pytest.approx(independent_expectation(composite_rows)[0], abs=1e-6)
    assert result["ci"] is None  # no bootstrap asked


@pytest.mark.parametrize("content, message", [
    ("instance_id,rater,score\n1,a,4\n2,a,five\n", "row 3: score 'five' is not a number"),
    ("instance_id,rater,score\n1,a,4\n2,,3\n", "row 3: empty rater"),
    ("instance_id,rater,score\n1,a,4\n,a,3\n", "row 3: empty instance_id"),
    ("instance_id,rater,score\n1,a,4\n1,a,3\n", "row 3: rater 'a' rated instance '1' twice"),
    ("instance_id,rater,score\n1,a,\n", "row 2: score '' is not a number"),
    ("id,rater,score\n1,a,4\n", "row 1: no column 'instance_id'"),
    ("instance_id,rater,grade\n1,a,4\n", "row 1: no 'score' column and no axis columns"),
    ("", "the file is empty"),
    ("instance_id,rater,score\n", "no ratings after the header"),
])
def test_cli_bad_csv_is_a_usage_error_naming_file_and_row(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    assert main([str(path), "--jury-rater", "jury"]) == 4
    err = capsys.readouterr().err
    assert str(path) in err and message in err


def test_cli_usage_errors(tmp_path, capsys):
    ratings = write_csv(tmp_path / "r.csv", ["instance_id", "rater", "score"], synthetic_ratings(n=10))
    assert main([str(ratings), "--jury-rater", "nobody"]) == 4
    assert "no such rater" in capsys.readouterr().err
    assert main([str(ratings)]) == 4  # --jury-rater is required
    assert "--jury-rater" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.csv"), "--jury-rater", "jury"]) == 4
    assert "missing.csv" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_cli_leaves_out_raters_that_cannot_be_z_scored(tmp_path):
    rows = synthetic_ratings(n=12) + [(f"inst{i:03d}", "dr_flat", 3.0) for i in range(12)]
    rows.append(("inst000", "dr_once", 4.0))
    result = analyse(read_ratings(write_csv(tmp_path / "r.csv", ["instance_id", "rater", "score"], rows)), "jury",
                     n_boot=50)
    assert set(result["excluded_raters"]) == {"dr_flat", "dr_once"}
    assert result["clinicians"] == ["dr_a", "dr_b", "dr_c"]


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
