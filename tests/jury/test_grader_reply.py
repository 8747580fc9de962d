"""A grader's reply to HealthBench's rubric grader (jury/grader_reply.py): read, fuzzed, or refused with its error."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from fuzzing import fuzz
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from terminal_lines import figures_reported

from pytest_medhelm.jury.grader_reply import (
    MAX_REPLY_CHARS,
    GraderReplyError,
    comparison_value,
    fork_met,
    parse_fork_verdict,
    parse_reference_verdict,
)

FIGURES: Counter = Counter()


_report_figures = figures_reported(FIGURES, lambda f: (
    f"\ngrader-reply fuzzing (measured): {f['reference']} inputs through the reference parser, {f['fork']} through "
    f"medhelm 0.8.0's, {f['comparison']} comparison verdicts"))


# ---------------------------------------------------------------------------------------------- reply parsing
def test_the_reference_parser_reads_a_fenced_verdict_and_requires_a_boolean():
    verdict = parse_reference_verdict('```json\n{"explanation": "fine", "criteria_met": true}\n```')
    assert verdict.criteria_met is True and verdict.explanation == "fine"
    assert parse_reference_verdict('Here it is: {"criteria_met": false}').criteria_met is False
    for reply, why in (('{"criteria_met": "true"}', "not true or false"), ('{"explanation": "x"}', "no \"criteria"),
                       ("I cannot decide", "not a JSON object"), ("[true]", "not an object"),
                       ('{"criteria_met": 1}', "not true or false")):
        with pytest.raises(GraderReplyError, match=why):
            parse_reference_verdict(reply)


VERDICT = '{"explanation": "asks about red flags", "criteria_met": true}'


@pytest.mark.parametrize("reply", [
    f"```json\n{VERDICT}\n```",  # the shape GRADER_TEMPLATE asks for (simple-evals strips exactly this)
    f"```\n{VERDICT}\n```",  # unlabelled: simple-evals reads no verdict (and asks again); inspect_evals' fix
    f"```JSON\n{VERDICT}\n```",  # a label in capitals
    f"```json{VERDICT}```",  # on one line
    f"```{VERDICT}```",  # unlabelled, on one line
    f"Here is my grading:\n\n```json\n{VERDICT}\n```",  # text before the fence
    f"```\n{VERDICT}\n```\n\nNote: criterion {{3}} was read literally.",  # text after it, braces included
    f"Sure.\n```json\n{VERDICT}\n```\nDone. {{}}",  # text on both sides
    f"```json\n{VERDICT}",  # a fence never closed (a reply cut short)
    f"  {VERDICT}  ",  # no fence at all
], ids=["labelled", "unlabelled", "capitals", "one-line", "one-line-unlabelled", "text-before", "text-after",
        "text-around", "unclosed", "bare"])
def test_a_fenced_verdict_is_read_in_every_shape(reply):
    verdict = parse_reference_verdict(reply)
    assert verdict.criteria_met is True and verdict.explanation == "asks about red flags"


def test_a_fence_holding_no_verdict_is_still_no_verdict():
    for reply, why in (("```\nI cannot grade this.\n```", "not a JSON object"),
                       ('```json\n{"criteria_met": "yes"}\n```', "not true or false"),
                       ("```\n```", "not a JSON object")):
        with pytest.raises(GraderReplyError, match=why):
            parse_reference_verdict(reply)


def test_medhelms_parser_accepts_what_the_fork_accepts_and_drops_the_rest():
    assert parse_fork_verdict('x {"explanation": "e", "criteria_met": "TRUE"} y') == {"explanation": "e",
                                                                                     "criteria_met": "TRUE"}
    # the fork's one repair: a missing closing brace after "Expecting ',' delimiter"
    assert parse_fork_verdict('{"explanation": "e", "criteria_met": {"a": 1}') is not None
    assert parse_fork_verdict('{"criteria_met": true}') is None  # no explanation: dropped
    assert parse_fork_verdict("no json") is None
    assert fork_met({"criteria_met": "TRUE"}) and fork_met({"criteria_met": True})
    assert not fork_met({"criteria_met": 1}) and not fork_met({"criteria_met": None}) and not fork_met({})
    assert comparison_value({"criteria_met": 7}) == 7.0 and comparison_value({"criteria_met": True}) == 1.0
    assert comparison_value({"criteria_met": None}) is None
    # our default scoring: only 1-10 (a 1e6 from one grader would put the item's score far outside [0, 1])
    assert comparison_value({"criteria_met": 10}, in_range=True) == 10.0
    for out_of_scale in (1e6, 0, -3, 10.5, True):
        with pytest.raises(GraderReplyError):
            comparison_value({"criteria_met": out_of_scale}, in_range=True)
    assert comparison_value({"criteria_met": 1e6}) == 1e6  # medhelm 0.8.0 takes it as it comes
    with pytest.raises(GraderReplyError, match="not a number"):
        comparison_value({"criteria_met": "7"})


def test_pathological_replies_are_errors_not_crashes():
    for reply in ("[" * 200_000, "{" * 100_000 + "}" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        with pytest.raises(GraderReplyError):
            parse_reference_verdict(reply)
        assert parse_fork_verdict(reply) is None
    with pytest.raises(GraderReplyError, match="characters long"):
        parse_reference_verdict(" " * (MAX_REPLY_CHARS + 1))


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                     max_size=4), max_leaves=12)


_REPLIES = st.one_of(
    st.text(max_size=400),
    st.text(alphabet='{}[]",:`json truefalse\n\\0123456789', max_size=300),
    _JSONISH.map(json.dumps),
    st.builds(lambda a, obj, b: f"{a}```json\n{json.dumps(obj)}\n```{b}", st.text(max_size=30),
              st.dictionaries(st.sampled_from(["explanation", "criteria_met", "x"]), _JSONISH, max_size=3),
              st.text(max_size=30)),
)


@fuzz(1500, suppress_health_check=[HealthCheck.too_slow])
@given(_REPLIES)
def test_fuzz_the_reference_parser_only_ever_gives_a_verdict_or_its_error(reply):
    FIGURES["reference"] += 1
    try:
        verdict = parse_reference_verdict(reply)
    except GraderReplyError as exc:
        assert exc.reason and len(exc.reason) < 200
    else:
        assert isinstance(verdict.criteria_met, bool) and isinstance(verdict.explanation, str)


@fuzz(1500, suppress_health_check=[HealthCheck.too_slow])
@given(_REPLIES)
def test_fuzz_medhelms_parser_only_ever_gives_an_object_or_none(reply):
    FIGURES["fork"] += 1
    verdict = parse_fork_verdict(reply)
    assert verdict is None or ("explanation" in verdict and "criteria_met" in verdict)
    if verdict is not None:
        assert isinstance(fork_met(verdict), bool)


@fuzz(500)
@given(st.dictionaries(st.sampled_from(["criteria_met", "explanation"]), _JSONISH, max_size=2))
def test_fuzz_comparison_values_are_numbers_or_said_errors(verdict):
    FIGURES["comparison"] += 1
    try:
        value = comparison_value(verdict)
    except GraderReplyError:
        assert not isinstance(verdict.get("criteria_met"), bool)
    else:
        assert value is None or isinstance(value, float)
