"""HealthBench's rubric grader, piece by piece: the reply parsers (fuzzed), the two scoring formulas on criteria
worked out by hand, the loaders on files in the upstream formats, and the prompts against medhelm 0.8.0's rendered
examples (../shared/reference/prompts) and the pinned templates."""

from __future__ import annotations

import ast
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from fuzzing import fuzz
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from pytester_runs import SHARED_DATA
from terminal_lines import report_line

from pytest_medhelm.data.errors import DataError
from pytest_medhelm.jury.grader_reply import (
    MAX_REPLY_CHARS,
    GraderReplyError,
    comparison_value,
    fork_met,
    parse_fork_verdict,
    parse_reference_verdict,
)
from pytest_medhelm.jury.rubric_scoring import (
    clipped_bootstrap_std,
    clipped_mean,
    fork_score,
    reference_score,
    reference_tag_scores,
)

PROMPTS = SHARED_DATA.parent / "reference" / "prompts"
FIGURES: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_figures(request):
    yield
    if FIGURES:
        report_line(request.config, f"\ngrader-reply fuzzing (measured): {FIGURES['reference']} inputs through the "
                                    f"reference parser, {FIGURES['fork']} through medhelm 0.8.0's, "
                                    f"{FIGURES['comparison']} comparison verdicts")


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


# ---------------------------------------------------------------------------------------------- loaders
def _healthbench_line(**overrides) -> str:
    row = {"example_tags": ["theme:context_seeking"], "ideal_completions_data": None,
           "prompt": [{"content": "SYNTHETIC: a cough for 3 weeks", "role": "user"}], "prompt_id": "s-1",
           "rubrics": [{"criterion": "Asks about smoking.", "points": 4, "tags": ["axis:completeness"]}]}
    row.update(overrides)
    return json.dumps(row)


def test_the_healthbench_loader_keeps_the_file_as_it_is_and_names_bad_lines(tmp_path):
    from pytest_medhelm.catalogue.clinical_decision_support.healthbench import read_examples

    good = tmp_path / "ok.jsonl"
    good.write_text(_healthbench_line() + "\n" + _healthbench_line(prompt_id="s-2") + "\n")
    loaded = read_examples(good)
    assert [i.id for i in loaded] == ["0", "1"]
    assert list(loaded[0].extra["grading"]["messages"][0]) == ["content", "role"]  # key order kept
    for bad, why in ((_healthbench_line(prompt=[{"role": "user"}]), "prompt\\[0\\]"),
                     (_healthbench_line(rubrics=[{"criterion": "x", "points": "5", "tags": []}]), "points"),
                     (_healthbench_line(rubrics=[{"criterion": "x", "points": 1, "tags": "axis:a"}]), "tags"),
                     ("{not json", "invalid JSON")):
        path = tmp_path / "bad.jsonl"
        path.write_text(_healthbench_line() + "\n" + bad + "\n")
        with pytest.raises(DataError, match=f"bad.jsonl, line 2.*{why}"):
            read_examples(path)


def test_the_professional_loader_reads_the_member_of_the_archive_in_any_folder(tmp_path):
    from pytest_medhelm.catalogue.clinical_decision_support.healthbench_professional import build_instances

    line = json.dumps({"id": "t", "conversation": {"messages": [{"role": "user", "content": "SYNTHETIC"}]},
                       "rubric_items": [{"criterion_text": "c", "points": 2}], "physician_response": "p"})
    for layout in (["healthbench_professional_eval.jsonl"], ["assets/healthbench_professional_eval.jsonl",
                                                            "assets/other.txt"]):
        archive = tmp_path / "assets.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for name in layout:
                zf.writestr(name, line + "\n")
        [instance] = build_instances({"assets.zip": archive})
        assert instance.extra["grading"]["physician_response"] == "p"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("assets/other.jsonl", line)
    with pytest.raises(DataError, match="no member 'healthbench_professional_eval.jsonl'"):
        build_instances({"assets.zip": archive})


# ---------------------------------------------------------------------------------------------- the prompts
def _constant(path: Path, name: str) -> str:
    """A module-level string constant, read here independently of the plugin (a literal, maybe ``.strip()``-ed)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            value = node.value
            if isinstance(value, ast.Call):
                return ast.literal_eval(value.func.value).strip()  # type: ignore[attr-defined]  # "...".strip()
            return ast.literal_eval(value)
    raise AssertionError(name)


@pytest.fixture
def prompts_dir() -> Path:
    if not PROMPTS.is_dir() or not (SHARED_DATA / "medhelm08_templates").is_dir():
        pytest.skip("../shared/reference/prompts or ../shared/data is absent")
    return PROMPTS


def test_our_prompts_are_medhelms_rendered_examples(prompts_dir):
    """medhelm 0.8.0 rendered these files from synthetic inputs; ours, from the same inputs, are byte-identical."""
    from pytest_medhelm.jury.rubric_grader import (
        conversation_text,
        fill,
        fill_comparison,
        fork_rubric_item,
        load_grader_prompts,
    )
    from pytest_medhelm.prompting import messages_json

    prompts = load_grader_prompts(SHARED_DATA, download_allowed=False)
    answer = "Please see a doctor if symptoms persist."
    model = json.loads((prompts_dir / "medhelm08_health_bench.txt").read_text(encoding="utf-8"))
    assert messages_json([(m["role"], m["content"]) for m in model]) == \
        (prompts_dir / "medhelm08_health_bench.txt").read_text(encoding="utf-8")
    item = {"criterion": "R1: States a relevant, accurate point number 1 for this SYNTHETIC case.", "points": 3,
            "tags": ["level:example", "axis:completeness"]}
    assert fill(prompts.fork_rubric, conversation_text(model, answer), fork_rubric_item(item)) == \
        (prompts_dir / "medhelm08_health_bench.judge.txt").read_text(encoding="utf-8")
    pro = json.loads((prompts_dir / "medhelm08_health_bench_professional.txt").read_text(encoding="utf-8"))
    conversation = conversation_text(pro, answer)
    pro_item = {"criterion_text": "R1: Covers essential element 1 of the SYNTHETIC task.", "points": 3}
    assert fill(prompts.fork_rubric, conversation, fork_rubric_item(pro_item)) == \
        (prompts_dir / "medhelm08_health_bench_professional.judge.txt").read_text(encoding="utf-8")
    assert fill_comparison(prompts.fork_comparison, conversation, answer,
                           "SYNTHETIC physician answer 0: be systematic and safe.") == \
        (prompts_dir / "medhelm08_health_bench_professional.judge_eval.txt").read_text(encoding="utf-8")
    # the reference's template, read here on our own, is the same text as medhelm's
    assert _constant(SHARED_DATA / "healthbench_reference" / "healthbench_eval.py", "GRADER_TEMPLATE") == \
        prompts.reference == prompts.fork_rubric


def test_a_template_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    from pytest_medhelm.data.verification import DataVerification
    from pytest_medhelm.jury.rubric_grader import load_grader_prompts

    folder = tmp_path / "healthbench_reference"
    folder.mkdir()
    (folder / "healthbench_eval.py").write_text('GRADER_TEMPLATE = "score <<conversation>> on <<rubric_item>>"\n')
    prompts = load_grader_prompts(tmp_path, download_allowed=False, need_fork=False,
                                  verification=DataVerification.of(()))
    assert prompts.reference is None and "differs from the pinned" in prompts.reference_missing


def test_a_local_grader_is_constrained_to_the_verdicts_schema_and_hosted_ones_are_not():
    from pytest_medhelm.jury.rubric_grader import GraderPrompts, grading_calls
    from pytest_medhelm.values import Instance, ModelSpec

    grading = {"messages": [{"role": "user", "content": "SYNTHETIC"}], "example_tags": [],
               "rubric_items": [{"criterion": "a", "points": 1, "tags": []}, {"criterion": "b", "points": -1,
                                                                                "tags": []}]}
    instance = Instance(id="0", input="", extra={"grading": grading}, benchmark="healthbench")
    prompts = GraderPrompts(reference="<<conversation>> | <<rubric_item>>")
    local = ModelSpec(name="local/tiny", litellm_model="openai/tiny")
    hosted = ModelSpec(name="openai/gpt-4.1-2025-04-14", litellm_model="openai/gpt-4.1-2025-04-14")
    calls = grading_calls("healthbench", instance, "an answer", [local, hosted], prompts, fork=False)
    assert [(c.grader, c.index) for c in calls] == [("local/tiny", 0), ("local/tiny", 1), (hosted.name, 0),
                                                    (hosted.name, 1)]
    assert calls[0].request.messages[-1][1] == "user: SYNTHETIC\n\nassistant: an answer | [1] a"
    schema = json.loads(calls[0].request.response_format)["schema"]
    assert schema["properties"]["criteria_met"] == {"type": "boolean"} and schema["required"] == ["explanation",
                                                                                                 "criteria_met"]
    assert calls[0].request.max_tokens < 2048 and calls[2].request.response_format == ""
    assert calls[2].request.max_tokens == 2048 and calls[2].request.messages[0] == ("system",
                                                                                    "You are a helpful assistant.")
