"""HealthBench's rubric grader (jury/rubric_grader.py): the loaders on files in the upstream formats, and the prompts
against medhelm 0.8.0's rendered examples (../shared/reference/prompts) and the pinned templates. (The replies:
test_grader_reply.py; the scores: test_rubric_scoring.py.)"""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path

import pytest
from pytester_runs import SHARED_DATA

from pytest_medhelm.data.errors import DataError

PROMPTS = SHARED_DATA.parent / "reference" / "prompts"


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
