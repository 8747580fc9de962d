"""MedCalc-Bench accuracy (metrics/medcalc.py) by hand: every category, the weeks-and-days dates, inclusive limits,
the corrected lab/dosage categories against HELM's mode, and the one-line details a person reads."""

from __future__ import annotations

import pytest

from pytest_medhelm.metrics.medcalc import MEDCALC_ACCURACY, MedCalcAccuracy
from pytest_medhelm.values import Instance

BOTH = ("default", "helm")


def item(category: str, gold: str, lower: str = "", upper: str = "") -> Instance:
    return Instance(id="m", input="?", references=(gold,),
                    extra={"category": category, "lower_limit": lower, "upper_limit": upper})


def score(answer: str, instance: Instance, compat: str = "default"):
    return MEDCALC_ACCURACY.score(answer, instance, compat)


def test_metric_identity():
    assert (MedCalcAccuracy.name, MedCalcAccuracy.binary, MedCalcAccuracy.pass_mark) == (
        "medcalc_bench_accuracy", True, 1.0)
    assert isinstance(MEDCALC_ACCURACY, MedCalcAccuracy)


@pytest.mark.parametrize("compat", BOTH)
@pytest.mark.parametrize("category", ["risk", "severity", "diagnosis"])
def test_exact_categories_compare_strings(category, compat):
    instance = item(category, "4", "3", "5")
    right = score("  4\n", instance, compat)
    assert (right.value, right.extra) == (1.0, {"category": category})
    assert right.detail == f"expected '4' exactly ({category}), got '4'"
    assert score("4.0", instance, compat).value == 0.0  # strict string equality, no range
    assert score("3", instance, compat).value == 0.0


@pytest.mark.parametrize("compat", BOTH)
@pytest.mark.parametrize("category", ["physical", "dosage conversion"])
def test_range_categories_are_inclusive(category, compat):
    instance = item(category, "25.2", "24", "26")
    for answer, expected in [("24", 1.0), ("26", 1.0), ("25.2", 1.0), ("23.999", 0.0), ("26.001", 0.0),
                             (" 26.0 ", 1.0)]:
        result = score(answer, instance, compat)
        assert result.value == expected, answer
        assert result.extra == {"category": category}
    assert score("25", instance, compat).detail == f"expected '25.2', within [24, 26] ({category}), got '25'"
    bad = score("12 mg", instance, compat)
    assert (bad.value, bad.detail) == (0.0, f"cannot score ({category}): '12 mg' is not a number")


def test_lab_and_dosage_are_range_checked_by_default_and_zero_under_helm():
    for category in ("lab", "lab test", "dosage"):
        instance = item(category, "7", "6.5", "7.5")
        assert score("7.5", instance).value == 1.0 and score("7.6", instance).value == 0.0
        helm = score("7", instance, "helm")
        assert helm.value == 0.0 and helm.extra == {"category": category}
        assert helm.detail == (f"category {category!r} scores 0: HELM's metric does not support this category "
                               "(--medhelm-compat helm); got '7'")


@pytest.mark.parametrize("compat", BOTH)
def test_unknown_category_scores_zero_with_the_reason(compat):
    result = score("7", item("astrology", "7", "6", "8"), compat)
    assert (result.value, result.extra) == (0.0, {"category": "astrology"})
    assert result.detail == "category 'astrology' scores 0: unknown category; got '7'"
    missing = MEDCALC_ACCURACY.score("7", Instance(id="x", input="?", references=("7",)), compat)
    assert missing.detail == "category '' scores 0: unknown category; got '7'"


@pytest.mark.parametrize("compat", BOTH)
def test_dates(compat):
    instance = item("date", "09/23/2014", "09/22/2014", "09/24/2014")
    assert score("09/23/2014", instance, compat).value == 1.0
    assert score("09/22/2014", instance, compat).value == 1.0 and score("09/24/2014", instance, compat).value == 1.0
    assert score("09/25/2014", instance, compat).value == 0.0 and score("09/21/2014", instance, compat).value == 0.0
    assert score("2014-09-23", instance, compat).detail == (
        "cannot score (date): '2014-09-23' is not a date in the form MM/DD/YYYY")
    assert score("09/23/2014", instance, compat).detail == (
        "expected '09/23/2014', within [09/22/2014, 09/24/2014] (date), got '09/23/2014'")


@pytest.mark.parametrize("compat", BOTH)
def test_gestational_age_in_weeks_and_days_is_compared_in_days(compat):
    gold = "('14 weeks', '2 days')"  # 100 days
    instance = item("date", gold, gold, gold)
    assert score(gold, instance, compat).value == 1.0
    # another way of writing the same 100 days: 13 weeks and 9 days (a week is 7 days, not 8 or 6)
    assert score("('13 weeks', '9 days')", instance, compat).value == 1.0
    assert score("('14 weeks', '3 days')", instance, compat).value == 0.0
    assert score("('14 weeks', '1 days')", instance, compat).value == 0.0
    ranged = item("date", gold, "('14 weeks', '0 days')", "('15 weeks', '0 days')")  # 98 ... 105 days
    assert score("('15 weeks', '0 days')", ranged, compat).value == 1.0
    assert score("('13 weeks', '6 days')", ranged, compat).value == 0.0
    assert score("('14 weeks', '0 days') and more", ranged, compat).value == 1.0  # anchored at the start only
    bad = score("14 weeks and 2 days", instance, compat)
    assert bad.value == 0.0
    assert bad.detail == "cannot score (date): '14 weeks and 2 days' is not in the form ('X weeks', 'Y days')"


def test_long_answers_are_shortened_in_the_detail():
    answer = "x" * 80
    detail = score(answer, item("risk", "4")).detail
    assert detail == "expected '4' exactly (risk), got '" + "x" * 59 + "…'"
    assert score("y" * 60, item("risk", "4")).detail.endswith("'" + "y" * 60 + "'")
    assert score("y" * 61, item("risk", "4")).detail.endswith("'" + "y" * 59 + "…'")


def test_no_reference_means_an_empty_ground_truth():
    result = MEDCALC_ACCURACY.score("", Instance(id="x", input="?", extra={"category": "risk"}))
    assert result.value == 1.0 and result.detail == "expected '' exactly (risk), got ''"


def test_missing_limits_are_named_in_the_detail():
    no_limits = Instance(id="x", input="?", references=("7",), extra={"category": "physical"})
    result = MEDCALC_ACCURACY.score("7", no_limits)
    assert (result.value, result.extra) == (0.0, {"category": "physical"})
    assert result.detail == "cannot score (physical): '' is not a number"
    only_lower = Instance(id="x", input="?", references=("7",), extra={"category": "physical", "lower_limit": "6"})
    assert MEDCALC_ACCURACY.score("7", only_lower).detail == "cannot score (physical): '' is not a number"
    bad_date = MEDCALC_ACCURACY.score("x", item("date", "01/01/2020", "01/01/2020", "01/02/2020"))
    assert bad_date.extra == {"category": "date"}


def calc(category: str, gold: str, lower: str, upper: str) -> Instance:
    return Instance(
        id="c", input="?", references=(gold,),
        extra={"category": category, "lower_limit": lower, "upper_limit": upper},
    )


@pytest.mark.parametrize("compat", ["default", "helm"])
@pytest.mark.parametrize(
    ("instance", "answer", "expected"),
    [
        (calc("risk", "4", "4", "4"), "4", 1.0),
        (calc("risk", "4", "4", "4"), " 4\n", 1.0),
        (calc("severity", "4", "4", "4"), "4.0", 0.0),  # strict string equality, no numeric normalisation
        (calc("diagnosis", "3", "3", "3"), "three", 0.0),
        (calc("physical", "100", "95", "105"), "95", 1.0),  # inclusive
        (calc("physical", "100", "95", "105"), "105", 1.0),
        (calc("physical", "100", "95", "105"), "105.01", 0.0),
        (calc("physical", "100", "95", "105"), "100 mmHg", 0.0),  # no unit stripping
        (calc("physical", "100", "95", "105"), "", 0.0),
        (calc("dosage conversion", "53.093", "50.4", "55.7"), "53", 1.0),
        (calc("date", "09/23/2014", "09/23/2014", "09/23/2014"), "09/23/2014", 1.0),
        (calc("date", "09/23/2014", "09/23/2014", "09/23/2014"), "9/23/2014", 1.0),
        (calc("date", "09/23/2014", "09/23/2014", "09/23/2014"), "09/24/2014", 0.0),
        (calc("date", "09/23/2014", "09/23/2014", "09/23/2014"), "2014-09-23", 0.0),
        (calc("date", "('4 weeks', '2 days')", "('4 weeks', '1 days')", "('4 weeks', '3 days')"),
         "('4 weeks', '3 days')", 1.0),
        (calc("date", "('4 weeks', '2 days')", "('4 weeks', '1 days')", "('4 weeks', '3 days')"),
         "('4 weeks', '4 days')", 0.0),
        (calc("date", "('4 weeks', '2 days')", "('4 weeks', '2 days')", "('4 weeks', '2 days')"),
         "4 weeks, 2 days", 0.0),
        (calc("unknown", "1", "1", "1"), "1", 0.0),
    ],
)
def test_medcalc_accuracy_same_in_both_modes(instance: Instance, answer: str, expected: float, compat: str) -> None:
    assert MedCalcAccuracy().score(answer, instance, compat=compat).value == expected


@pytest.mark.parametrize("category", ["lab", "dosage"])
def test_medcalc_lab_and_dosage_are_range_checked_by_default_and_zero_in_helm(category: str) -> None:
    instance = calc(category, "5", "4.66", "5.15")
    metric = MedCalcAccuracy()
    assert metric.score("5", instance).value == 1.0
    assert metric.score("5.2", instance).value == 0.0
    helm = metric.score("5", instance, compat="helm")
    assert helm.value == 0.0
    assert category in helm.detail and "HELM" in helm.detail


def test_medcalc_parse_failure_detail() -> None:
    score = MedCalcAccuracy().score("about 12 mg", calc("physical", "12", "11", "13"))
    assert score.value == 0.0 and "not a number" in score.detail
