"""HELM's exact-match family (metrics/exact_match.py) by hand: the edges the catalogue tests do not reach."""

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
