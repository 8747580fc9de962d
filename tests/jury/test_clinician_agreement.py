"""Clinicians' ratings against the jury (jury/clinician_agreement.py, ``pytest-medhelm agreement``)."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from independent_icc import anova_icc3

from pytest_medhelm.jury.clinician_agreement import analyse, main, read_ratings


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
