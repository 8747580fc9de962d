"""MIMIC-IV billing codes (metrics/icd10.py): both extractions of ICD-10 codes, and the F1 metric, by hand."""

from __future__ import annotations

import pytest

from pytest_medhelm.metrics.icd10 import MimicBillingCodeF1, extract, helm_extract
from pytest_medhelm.values import Instance


@pytest.mark.parametrize(
    ("text", "helm", "ours"),
    [
        ("I10, E78.5", ["I10", "E78.5"], ["I10", "E78.5"]),
        ("J45.909.", ["J45.909"], ["J45.909"]),
        ("I10.", ["I10"], ["I10"]),  # medical-coding-reproducibility writes 3-character codes with a dot
        ("**J18.9**", ["J18.9"], ["J18.9"]),
        # HELM's misses: a letter after the first character
        ("S72.001A", ["S72"], ["S72.001A"]),  # 7th character: truncated to the category
        ("T84.52XA", ["T84"], ["T84.52XA"]),  # placeholder X
        ("W19.XXXA", ["W19"], ["W19.XXXA"]),
        ("M1A.0", [], ["M1A.0"]),  # letter in 3rd position: nothing at all
        ("C7A.010", [], ["C7A.010"]),
        ("Z3A.20", [], ["Z3A.20"]),
        # undotted codes
        ("E785", ["E785"], ["E78.5"]),  # found, but never equal to E78.5
        ("E1165", [], ["E11.65"]),  # 5+ characters: nothing
        ("I2510", [], ["I25.10"]),
        # not codes
        ("A1", ["A1"], []),
        ("HbA1c and T2DM", [], []),
        ("0DTJ4ZZ", [], []),  # ICD-10-PCS starting with a digit: ignored by both
        ("ICD10 code", [], []),
    ],
)
def test_icd10_extraction(text: str, helm: list[str], ours: list[str]) -> None:
    assert helm_extract(text) == helm
    assert extract(text) == ours


def billing(reference: str) -> Instance:
    return Instance(id="b", input="note", references=(reference,))


@pytest.mark.parametrize(
    ("reference", "answer", "compat", "expected"),
    [
        ("I10.,E78.5", "I10, E78.5", "default", (1.0, 1.0, 1.0)),
        ("I10.,E78.5", "I10, E78.5", "helm", (1.0, 1.0, 1.0)),
        ("I10.,E78.5,E11.9", "I10, N18.3", "default", (0.5, 1 / 3, 0.4)),
        ("I10.,E78.5", "I10 I10 I10", "helm", (1.0, 0.5, 2 / 3)),  # de-duplicated
        ("I10.,E78.5", "", "default", (0.0, 0.0, 0.0)),
        ("I10.,E78.5", "No codes apply.", "helm", (0.0, 0.0, 0.0)),
        ("", "", "default", (0.0, 0.0, 0.0)),  # nothing on either side: 0, as sklearn with zero_division=0
        ("E78.5", "E785", "helm", (0.0, 0.0, 0.0)),  # undotted: HELM's E785 != E78.5
        ("E78.5", "E785", "default", (1.0, 1.0, 1.0)),
        ("S72.001A", "S72.009A", "helm", (1.0, 1.0, 1.0)),  # two fractures read as S72
        ("S72.001A", "S72.009A", "default", (0.0, 0.0, 0.0)),
        ("M1A.0,I10.", "M1A.0, I10", "helm", (1.0, 1.0, 1.0)),  # M1A.0 is lost on both sides
        ("M1A.0,I10.", "I10", "helm", (1.0, 1.0, 1.0)),
        ("M1A.0,I10.", "I10", "default", (1.0, 0.5, 2 / 3)),
    ],
)
def test_icd10_metric_by_hand(reference: str, answer: str, compat: str, expected: tuple) -> None:
    result = MimicBillingCodeF1().score(answer, billing(reference), compat)
    precision, recall, f1 = expected
    assert result.value == pytest.approx(f1) and result.raw == pytest.approx(f1)
    assert result.extra["mimiciv_billing_code_precision"] == pytest.approx(precision)
    assert result.extra["mimiciv_billing_code_recall"] == pytest.approx(recall)


def test_icd10_metric_detail_and_kind() -> None:
    metric = MimicBillingCodeF1()
    assert (metric.name, metric.binary, metric.pass_mark) == ("mimiciv_billing_code_f1", False, 0.5)
    detail = metric.score("I10, N18.3", billing("I10.,E78.5")).detail
    assert detail == "F1 0.500: 1 of 2 reference codes found (E78.5 missing), 1 extra (N18.3)"


def test_icd10_details_list_at_most_eight_codes_and_both_extractions_read_the_whole_text() -> None:
    metric = MimicBillingCodeF1()
    gold = ",".join(f"A{i:02d}.1" for i in range(10))  # ten reference codes, none answered
    detail = metric.score("Z99.9", billing(gold)).detail
    shown = ", ".join(f"A{i:02d}.1" for i in range(8))
    assert detail == f"F1 0.000: 0 of 10 reference codes found ({shown}, … (10 in all) missing), 1 extra (Z99.9)"
    eight = ",".join(f"B{i:02d}" for i in range(8))
    assert metric.score("", billing(eight)).detail == (
        f"F1 0.000: 0 of 8 reference codes found ({eight.replace(',', ', ')} missing), 0 extra (none)")
    # HELM removes bold markers before matching; a code after them is found
    assert helm_extract("**I10** and **E78.5.**") == ["I10", "E78.5"]
    assert helm_extract("") == [] and extract("") == []
    # every reference counts, and the answer is stripped first
    two_refs = Instance(id="b", input="note", references=("I10.", "E78.5"))
    for compat in ("default", "helm"):
        result = metric.score("  I10 E78.5  ", two_refs, compat)
        assert result.value == 1.0, compat
    assert metric.score("I10", two_refs, "helm").detail == (
        "F1 0.667: 1 of 2 reference codes found (E78.5 missing), 0 extra (none)")
