"""HELM's exact-match family (metrics/exact_match.py) by hand."""

from __future__ import annotations

import pytest

from pytest_medhelm.metrics.exact_match import (
    GENERATION_EXACT_MATCH,
    MULTIPLE_CHOICE_EXACT_MATCH,
    GenerationExactMatch,
    MultipleChoiceExactMatch,
    exact_match,
    normalize_text,
    quasi_exact_match,
)
from pytest_medhelm.values import Instance


def mc(choices: tuple[str, ...], correct: int | None) -> Instance:
    return Instance(id="q", input="?", choices=choices, correct=correct)


def test_identities():
    for metric in (MultipleChoiceExactMatch, GenerationExactMatch):
        assert (metric.name, metric.binary, metric.pass_mark) == ("exact_match", True, 1.0)
    assert isinstance(MULTIPLE_CHOICE_EXACT_MATCH, MultipleChoiceExactMatch)
    assert isinstance(GENERATION_EXACT_MATCH, GenerationExactMatch)


@pytest.mark.parametrize("text, normalized", [
    ("The Answer, is: A!", "answer is"),
    ("an apple and the pear", "apple and pear"),
    ("  many   spaces\there ", "many spaces here"),
    ("thea anna", "thea anna"),  # articles only as whole words
    ("A-B", "ab"),
    ("", ""),
])
def test_normalize_text(text, normalized):
    assert normalize_text(text) == normalized


def test_exact_match_strips_both_sides_and_needs_a_prediction():
    assert exact_match(" yes\n", "yes ") == 1.0
    assert exact_match("yes", "Yes") == 0.0
    assert exact_match("", "") == 0.0 and exact_match("yes", None) == 0.0
    assert quasi_exact_match("", "") == 0.0 and quasi_exact_match("The", "the") == 1.0


def test_multiple_choice_letters_map_only_to_existing_options():
    instance = mc(("yes", "no", "maybe"), 2)
    assert MULTIPLE_CHOICE_EXACT_MATCH.score("C", instance).value == 1.0  # the last option
    assert MULTIPLE_CHOICE_EXACT_MATCH.score("D", instance).value == 0.0
    assert MULTIPLE_CHOICE_EXACT_MATCH.score("CC", instance).value == 0.0
    first = mc(("yes", "no"), 0)
    assert MULTIPLE_CHOICE_EXACT_MATCH.score("A", first).value == 1.0
    result = MULTIPLE_CHOICE_EXACT_MATCH.score(" A ", first)
    assert (result.value, result.extra, result.detail) == (1.0, {"quasi_exact_match": 1.0},
                                                           "expected 'A' (yes), got ' A '")


def test_multiple_choice_quasi_match_of_the_mapped_option_text():
    # the mapped option text "The yes." normalizes to the gold "yes": quasi 1 while exact 0
    instance = mc(("yes", "The yes."), 0)
    result = MULTIPLE_CHOICE_EXACT_MATCH.score("B", instance)
    assert (result.value, result.extra["quasi_exact_match"]) == (0.0, 1.0)


@pytest.mark.parametrize("correct", [None, -1, 2, 5])
def test_multiple_choice_needs_a_valid_correct_choice(correct):
    with pytest.raises(ValueError, match="instance 'q' has no valid correct choice"):
        MULTIPLE_CHOICE_EXACT_MATCH.score("A", mc(("yes", "no"), correct))


def test_multiple_choice_detail_shortens_long_answers():
    answer = "because " * 20
    detail = MULTIPLE_CHOICE_EXACT_MATCH.score(answer, mc(("yes", "no"), 1)).detail
    assert detail == "expected 'B' (no), got " + repr(answer[:59] + "…")
    exact = "z" * 60
    assert MULTIPLE_CHOICE_EXACT_MATCH.score(exact, mc(("yes", "no"), 1)).detail.endswith(repr(exact))


def test_generation_exact_match_details_and_references():
    instance = Instance(id="g", input="?", references=(" 0 ", "zero"))
    result = GENERATION_EXACT_MATCH.score("zero", instance)
    assert (result.value, result.extra) == (1.0, {"quasi_exact_match": 1.0})
    assert result.detail == "expected '0', got 'zero'"
    miss = GENERATION_EXACT_MATCH.score("  one  ", instance)
    assert (miss.value, miss.extra, miss.detail) == (0.0, {"quasi_exact_match": 0.0}, "expected '0', got 'one'")
    long_ref = Instance(id="g", input="?", references=("r" * 70,))
    assert GENERATION_EXACT_MATCH.score("x", long_ref).detail == "expected " + repr("r" * 59 + "…") + ", got 'x'"
    with pytest.raises(ValueError, match="instance 'none' has no reference answer"):
        GENERATION_EXACT_MATCH.score("x", Instance(id="none", input="?"))


def mc_with_reference(choices: tuple[str, ...], correct: int) -> Instance:
    return Instance(id="q", input="?", choices=choices, correct=correct, references=(choices[correct],))


@pytest.mark.parametrize("compat", ["default", "helm"])
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("B", 1.0),
        (" B\n", 1.0),  # the completion is stripped
        ("B.", 0.0),  # anything but the bare letter maps to no option
        ("b", 0.0),
        ("**B**", 0.0),
        ("B) no", 0.0),
        ("A", 0.0),
        ("D", 0.0),  # not an option of a three-option question
        ("", 0.0),
    ],
)
def test_multiple_choice_exact_match(answer: str, expected: float, compat: str) -> None:
    score = MultipleChoiceExactMatch().score(answer, mc_with_reference(("yes", "no", "maybe"), 1), compat=compat)
    assert score.value == expected
    assert score.extra["quasi_exact_match"] == expected


def test_multiple_choice_compares_option_texts() -> None:
    # HELM maps the letter to its text: with two identical options, either letter is right
    instance = mc_with_reference(("Aspirin", "Heparin", "Aspirin"), 0)
    metric = MultipleChoiceExactMatch()
    assert metric.score("C", instance).value == 1.0
    assert metric.score("A", instance).value == 1.0
    assert metric.score("B", instance).value == 0.0


def test_multiple_choice_detail() -> None:
    score = MultipleChoiceExactMatch().score("B.", mc_with_reference(("yes", "no"), 0))
    assert score.detail == "expected 'A' (yes), got 'B.'"
    assert (MultipleChoiceExactMatch.name, MultipleChoiceExactMatch.binary) == ("exact_match", True)


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ("The answer!", "answer", 1.0),
        ("an Apple", "apple.", 1.0),
        ("Heart  failure", "heart failure", 1.0),
        ("theory", "ory", 0.0),  # only whole-word articles go
        ("a b", "ab", 0.0),
        ("yes", "", 0.0),
        ("yes", None, 0.0),
    ],
)
def test_quasi_exact_match(gold: str, pred: str | None, expected: float) -> None:
    assert quasi_exact_match(gold, pred) == expected


def test_generation_exact_match() -> None:
    instance = Instance(id="g", input="?", references=("0", "zero"))
    metric = GenerationExactMatch()
    assert metric.score(" 0 \n", instance).value == 1.0
    assert metric.score("zero", instance).value == 1.0
    dotted = metric.score("Zero.", instance)
    assert dotted.value == 0.0 and dotted.extra["quasi_exact_match"] == 1.0
    assert metric.score("", instance).value == 0.0
