"""``pytest-medhelm agreement --healthbench-meta``: a HealthBench grader's macro-F1 against physicians, beside
physician-physician agreement, on synthetic labels whose figures are computed by hand below (the pairwise
precision / recall / F1 of simple-evals' meta-evaluation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_medhelm.cli import main

T, F = True, False
#: (category, [(physician, label), ...], grader verdict)
ROWS = [
    ("c1", [("p1", T), ("p2", T)], T),
    ("c1", [("p1", T), ("p2", F)], F),
    ("c2", [("p1", F), ("p3", F)], F),
    ("c2", [("p2", T), ("p3", F), ("p1", T)], T),
]


def write(tmp_path: Path, rows=ROWS, grader=True) -> tuple[Path, Path]:
    meta = tmp_path / "meta.jsonl"
    lines = []
    for category, labels, _ in rows:
        lines.append(json.dumps({"prompt": [{"role": "user", "content": "synthetic question"}],
                                 "completion": "synthetic answer", "rubric": "[5] Says something synthetic",
                                 "category": category, "binary_labels": [label for _, label in labels],
                                 "anonymized_physician_ids": [pid for pid, _ in labels]}))
    meta.write_text("\n".join(lines) + "\n", encoding="utf-8")
    verdicts = tmp_path / "grader.jsonl"
    verdicts.write_text("".join(json.dumps({"row": n, "criteria_met": v}) + "\n"
                                for n, (_, _, v) in enumerate(rows, start=1)) if grader else "", encoding="utf-8")
    return meta, verdicts


# By hand. The grader's pairs (own, other physician): row 1 (T,T)(T,T); row 2 (F,T)(F,F); row 3 (F,F)(F,F);
# row 4 (T,T)(T,F)(T,T). Precision met: 4 of the 5 pairs where it said met agree = 0.8; not met: 3/4 = 0.75.
# Recall met: 4 of the 5 pairs where the physician said met = 0.8; not met: 3/4. F1 met 0.8, not met 0.75.
GRADER = {"precision_pos": 0.8, "precision_neg": 0.75, "recall_pos": 0.8, "recall_neg": 0.75,
          "f1_pos": 0.8, "f1_neg": 0.75, "f1_balanced": 0.775, "n_pairs": 9}
# Category c1 (rows 1-2): precision met 2/2, not met 1/2; recall met 2/3, not met 1/1; F1 met 0.8, not met 2/3.
GRADER_C1 = (0.8 + 2 / 3) / 2
# p1: pairs (T,T) (T,F) (F,F) (T,T) (T,F): P met 2/4, P not met 1/1, R met 2/2, R not met 1/3; F1 2/3 and 1/2.
# p2: pairs (T,T) (F,T) (T,F) (T,T): P met 2/3, P not met 0/1, R met 2/3, R not met 0/1; F1 2/3 and 0 (P = R = 0).
# p3: pairs (F,F) (F,T) (F,T): never said met, so precision met is undefined: no F1.
PHYSICIANS = {"p1": (2 / 3 + 1 / 2) / 2, "p2": (2 / 3 + 0) / 2, "p3": None}


def test_grader_and_physicians_by_hand(tmp_path: Path, capsys) -> None:
    meta, verdicts = write(tmp_path)
    out = tmp_path / "agreement.json"
    status = main(["agreement", "--healthbench-meta", str(meta), "--grader-labels", str(verdicts), "--json", str(out)])
    assert status == 0
    result = json.loads(out.read_text())
    assert {k: result["model"][k] for k in GRADER} == pytest.approx(GRADER)
    assert result["pairwise_model_f1_balanced"] == pytest.approx(0.775)
    assert result["model"]["by_category"]["c1"]["f1_balanced"] == pytest.approx(GRADER_C1)
    assert {p: v["f1_balanced"] for p, v in result["physicians"].items()} == pytest.approx(PHYSICIANS)
    assert result["physician_f1_balanced_mean"] == pytest.approx((PHYSICIANS["p1"] + PHYSICIANS["p2"]) / 2)
    assert (result["n_rows"], result["n_rows_graded"], result["n_physicians"], result["n_physicians_defined"]) == (
        4, 4, 3, 2)
    text = capsys.readouterr().out
    assert "grader vs physicians: macro-F1 0.775" in text and "physician vs physicians: macro-F1 0.458" in text


def test_rows_without_a_verdict_are_left_out_of_the_graders_figures(tmp_path: Path) -> None:
    meta, verdicts = write(tmp_path)
    verdicts.write_text("".join(verdicts.read_text().splitlines(keepends=True)[:2]), encoding="utf-8")
    out = tmp_path / "a.json"
    assert main(["agreement", "--healthbench-meta", str(meta), "--grader-labels", str(verdicts), "--json",
                 str(out)]) == 0
    result = json.loads(out.read_text())
    # rows 1-2 only: the category c1 figures
    assert result["pairwise_model_f1_balanced"] == pytest.approx(GRADER_C1) and result["n_rows_graded"] == 2


def test_without_grader_verdicts_the_grader_is_not_measured(tmp_path: Path, capsys) -> None:
    meta, _ = write(tmp_path)
    assert main(["agreement", "--healthbench-meta", str(meta)]) == 1
    text = capsys.readouterr().out
    assert "grader vs physicians: NOT MEASURED" in text and "physician vs physicians: macro-F1 0.458" in text


@pytest.mark.parametrize(("which", "line", "message"), [
    ("meta", '{"binary_labels": [true, "yes"], "anonymized_physician_ids": ["a", "b"], "category": "c"}',
     "meta.jsonl, line 2: 'binary_labels' must be a non-empty list of true/false"),
    ("meta", '{"binary_labels": [true, false], "anonymized_physician_ids": ["a"], "category": "c"}',
     "meta.jsonl, line 2: 'anonymized_physician_ids' must list one physician per label (2)"),
    ("meta", "[1, 2]", "meta.jsonl, line 2: expected a JSON object, got list"),
    ("grader", '{"row": 9, "criteria_met": true}', "grader.jsonl, line 2: 'row' must be the line of a row"),
    ("grader", '{"row": 1, "criteria_met": "true"}', "grader.jsonl, line 2: 'criteria_met' must be true or false"),
    ("grader", "{not json", "grader.jsonl, line 2: invalid JSON"),
])
def test_malformed_files_name_file_and_line(tmp_path: Path, capsys, which, line, message) -> None:
    meta, verdicts = write(tmp_path)
    path = meta if which == "meta" else verdicts
    lines = path.read_text().splitlines()
    lines[1] = line
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["agreement", "--healthbench-meta", str(meta), "--grader-labels", str(verdicts)]) == 4
    assert message in capsys.readouterr().err


def test_the_console_script_routes_the_jury_form_elsewhere(tmp_path: Path, capsys) -> None:
    # without --healthbench-meta, "agreement" is the jury's clinician agreement (its own usage)
    assert main(["agreement", "--help"]) == 0
    assert "--jury-rater" in capsys.readouterr().out
