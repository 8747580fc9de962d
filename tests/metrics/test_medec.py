"""MEDEC's error-flag accuracy (metrics/medec.py) by hand, in both modes, and its detail."""

from __future__ import annotations

import pytest

from pytest_medhelm.metrics.medec import MedecErrorFlagAccuracy
from pytest_medhelm.values import Instance


def medec_instance(reference: str, sentence_id: int | None) -> Instance:
    return Instance(id="m", input="0 x", references=(reference,), extra={"error_sentence_id": sentence_id})


@pytest.mark.parametrize(
    ("reference", "sentence_id", "answer", "helm", "default"),
    [
        # (flag accuracy, sentence accuracy) under compat helm, then by default
        ("CORRECT", None, "CORRECT", (1, 1), (1, 1)),
        ("CORRECT", None, " CORRECT \n", (1, 1), (1, 1)),
        ("CORRECT", None, "CORRECT.", (0, 0), (1, 1)),  # HELM keeps the period: an error flag
        ("CORRECT", None, "correct", (0, 0), (1, 1)),
        ("CORRECT", None, "**CORRECT**", (0, 0), (1, 1)),
        ("CORRECT", None, "CORRECT. The note is fine.", (0, 0), (0, 0)),
        ("CORRECT", None, "3 Given heparin.", (0, 0), (0, 0)),
        ("3 Given heparin.", 3, "3 Given heparin.", (1, 0), (1, 1)),  # HELM's gold id is -1: never matches
        ("3 Given heparin.", 3, "3", (1, 0), (1, 1)),
        ("3 Given heparin.", 3, "4 Given heparin.", (1, 0), (1, 0)),
        ("3 Given heparin.", 3, "Sentence 3 is wrong", (1, 0), (1, 0)),  # no leading id: id -2
        ("3 Given heparin.", 3, "CORRECT", (0, 0), (0, 0)),
        ("12.", 12, "12 fixed", (1, 1), (1, 1)),  # HELM's int() works once the periods are gone
    ],
)
def test_medec_metric(reference: str, sentence_id, answer: str, helm: tuple, default: tuple) -> None:
    metric = MedecErrorFlagAccuracy()
    instance = medec_instance(reference, sentence_id)
    for compat, expected in (("helm", helm), ("default", default)):
        score = metric.score(answer, instance, compat=compat)
        assert (score.value, score.extra["medec_error_sentence_accuracy"]) == expected, compat


def test_medec_detail() -> None:
    score = MedecErrorFlagAccuracy().score("CORRECT", medec_instance("3 Given heparin.", 3))
    assert score.detail == "expected error in sentence 3, got 'CORRECT' (read as CORRECT)"
