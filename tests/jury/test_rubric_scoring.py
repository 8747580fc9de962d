"""HealthBench's two scoring formulas (jury/rubric_scoring.py) on criteria worked out by hand."""

from __future__ import annotations

import pytest

from pytest_medhelm.jury.rubric_scoring import (
    clipped_bootstrap_std,
    clipped_mean,
    fork_score,
    reference_score,
    reference_tag_scores,
)


# ---------------------------------------------------------------------------------------------- scores by hand
def test_the_reference_score_by_hand():
    # met: +5 and the undesirable -3; not met: +2 -> (5 - 3) / (5 + 2)
    assert reference_score([5, -3, 2], [True, True, False]) == pytest.approx(2 / 7)
    # an undesirable criterion met can take the example below 0: kept raw
    assert reference_score([-8, 4], [True, False]) == pytest.approx(-2.0)
    assert reference_score([-1], [True]) is None  # no positive points: undefined
    assert clipped_mean([1.0, -2.0]) == 0.0 and clipped_mean([0.5, 1.0]) == 0.75 and clipped_mean([2.0]) == 1.0
    assert clipped_bootstrap_std([0.5, 0.5]) == 0.0 and clipped_bootstrap_std([0.0, 1.0]) > 0


def test_the_reference_tag_scores_by_hand():
    items = [{"points": 5, "tags": ["axis:accuracy", "level:example"]}, {"points": -3, "tags": ["axis:accuracy"]},
             {"points": 2, "tags": ["axis:completeness"]}, {"points": -4, "tags": ["axis:safety"]}]
    tags = reference_tag_scores(["theme:hedging"], items, [True, True, False, True], overall=0.25)
    # accuracy: (5 - 3) / 5; completeness: 0 / 2; safety: no positive point -> left out; the theme: the example's
    assert tags == {"theme:hedging": 0.25, "axis:accuracy": pytest.approx(0.4), "level:example": 1.0,
                    "axis:completeness": 0.0}


def test_medhelms_score_by_hand_rectifies_negative_points_and_shifts_dropped_verdicts():
    yes, no = {"criteria_met": True, "explanation": ""}, {"criteria_met": False, "explanation": ""}
    # rectified: 5, 10 - 3 = 7, 2 -> meeting the undesirable criterion raises the score: (5 + 7) / 14
    assert fork_score([5, -3, 2], [yes, yes, no]) == pytest.approx(12 / 14)
    # the first verdict dropped: the remaining two are zipped onto criteria 1 and 2, criterion 3 is ungraded
    assert fork_score([5, -3, 2], [no, yes]) == pytest.approx(7 / 14)
    assert fork_score([-10], [yes]) is None
