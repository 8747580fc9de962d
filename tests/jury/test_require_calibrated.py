"""``--medhelm-require-calibrated``: a gate on a judged benchmark (HealthBench, graded by our test server as the rubric
grader) is not evaluated, and fails the run, until a calibration record of that exact grader and grader prompt
shows it agreeing with physicians at least as well as they agree with each other; a healthbench_meta run in the same
project writes that record, and then the gate is evaluated. Records of another grader or another prompt hash, below
the physicians, or not records at all do not count."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import SUITE
from test_healthbench_meta_benchmark import GRADER, grader_server, make_data, reply

from pytest_medhelm.jury.calibration import CALIBRATION_DIR, CalibrationRecord, read_all, write_record

HB_FILE = "2025-05-07-06-14-12_oss_eval.jsonl"
EXAMPLE = {"example_tags": ["theme:hedging"], "prompt": [{"content": "SYNTHETIC: a rash", "role": "user"}],
           "prompt_id": "syn-0", "rubrics": [{"criterion": "VERDICT-yes Suggests an emollient.", "points": 3,
                                              "tags": ["axis:accuracy"]},
                                             {"criterion": "VERDICT-no Suggests a biopsy.", "points": 3,
                                              "tags": ["axis:accuracy"]}]}
GATE = "healthbench>=0.4"


def answer(body: dict) -> str:
    return "Use an emollient twice a day." if body["model"] == "writer" else reply(body)


@pytest.fixture
def server():
    yield from grader_server()


@pytest.fixture
def hb_data(tmp_path: Path) -> Path:
    data = make_data(tmp_path)
    (data / "healthbench").mkdir()
    (data / "healthbench" / HB_FILE).write_text(json.dumps(EXAMPLE) + "\n", encoding="utf-8")
    return data


def template_sha(data: Path) -> str:
    from pytest_medhelm.jury.rubric_grader import read_string_constants

    path = data / "healthbench_reference" / "healthbench_eval.py"
    return hashlib.sha256(read_string_constants(path, ("GRADER_TEMPLATE",))["GRADER_TEMPLATE"].encode()).hexdigest()


def gated_run(pytester, server, data, *extra, ret):
    server.set_answer(answer)
    out = pytester.path / "gated.json"
    result = pytester_runs.run(
        pytester, str(SUITE), "--rootdir", str(pytester.path), "--medhelm-model", "openai/writer",
        "--medhelm-api-base", server.url,
        "--medhelm-endpoint", f"{GRADER}={server.url}", "--medhelm-grader", GRADER, "--medhelm-benchmark",
        "healthbench", "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(pytester.path / "cache"),
        "--medhelm-threshold", GATE, "--medhelm-require-calibrated", "--medhelm-json", str(out), *extra)
    assert result.ret == ret, result.stdout.str()[-3000:]
    (gate,) = json.loads(out.read_text())["gates"]
    return gate, result.stdout.str()


def record(data: Path, **change) -> CalibrationRecord:
    fields = {"rater": GRADER, "prompt_sha256": template_sha(data), "statistic": "macro_f1", "value": 0.7,
              "human": 0.65, "n": 100, "source": "test"}
    return CalibrationRecord(**{**fields, **change})


@pytest.mark.parametrize("dist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_without_a_record_the_gate_is_not_evaluated_and_a_meta_run_calibrates_it(pytester, server, hb_data,
                                                                                 dist):
    gate, stdout = gated_run(pytester, server, hb_data, *dist, ret=1)
    sha = template_sha(hb_data)
    assert gate["passed"] is False and gate["status"] == "not evaluated"
    assert f"no calibration record for the grader {GRADER} with prompt sha256 {sha}" in gate["reason"]
    assert gate["calibration"] == [{"benchmark": "healthbench", "rater": GRADER, "prompt_sha256": sha,
                                    "record": None, "calibrated": False}]
    assert "NOT EVALUATED, failing the run: healthbench>=0.4" in stdout
    # the grader measured against physicians: 0.600 against their own 0.583, a record written beside the runs
    meta = pytester_runs.run(pytester, str(SUITE), "--rootdir", str(pytester.path), *dist,
                             "--medhelm-endpoint", f"{GRADER}={server.url}",
                             "--medhelm-grader", GRADER, "--medhelm-benchmark", "healthbench_meta",
                             "--medhelm-data-dir", str(hb_data), "--medhelm-cache-dir", str(pytester.path / "cache"))
    assert meta.ret == 0, meta.stdout.str()[-2000:]
    meta.stdout.fnmatch_lines(["medhelm: calibration record .medhelm/calibration/*: grader openai/grader, macro-F1 "
                               "0.600 against humans' own 0.583 on 5 *: calibrated"])
    (written,), problems = read_all(pytester.path)
    assert problems == [] and written.prompt_sha256 == sha and written.calibrated
    gate, stdout = gated_run(pytester, server, hb_data, *dist, ret=0)
    assert gate["passed"] is True and gate["status"] == "passed" and gate["value"] == 0.5
    assert gate["calibration"][0]["calibrated"] is True and gate["calibration"][0]["record"] == written.path.name


def test_records_of_another_grader_or_prompt_or_below_physicians_do_not_count(pytester, server, hb_data):
    write_record(record(hb_data, rater="openai/other-grader"), pytester.path)
    write_record(record(hb_data, prompt_sha256="0" * 64), pytester.path)
    (pytester.path / CALIBRATION_DIR / "junk.json").write_text('{"format": "pytest-medhelm calibration"')
    gate, _ = gated_run(pytester, server, hb_data, "-p", "no:xdist", ret=1)
    assert gate["status"] == "not evaluated" and "no calibration record for the grader" in gate["reason"]
    assert "1 file(s) of .medhelm/calibration/ are not records" in gate["reason"]
    # the newest record of the exact grader and prompt decides: below the physicians' own agreement
    write_record(record(hb_data, created="2026-01-01T00:00:00+00:00"), pytester.path)
    write_record(record(hb_data, value=0.5, created="2026-02-01T00:00:00+00:00"), pytester.path)
    gate, _ = gated_run(pytester, server, hb_data, "-p", "no:xdist", ret=1)
    assert "is below the humans' own agreement: macro-F1 0.500 against humans' own 0.650" in gate["reason"]
    write_record(record(hb_data, created="2026-03-01T00:00:00+00:00"), pytester.path)
    gate, _ = gated_run(pytester, server, hb_data, "-p", "no:xdist", ret=0)
    assert gate["passed"] is True


def test_without_the_option_nothing_is_required(pytester, server, hb_data):
    server.set_answer(answer)
    out = pytester.path / "r.json"
    result = pytester_runs.run(
        pytester, str(SUITE), "--rootdir", str(pytester.path), "-p", "no:xdist", "--medhelm-model", "openai/writer",
        "--medhelm-api-base", server.url,
        "--medhelm-endpoint", f"{GRADER}={server.url}", "--medhelm-grader", GRADER, "--medhelm-benchmark",
        "healthbench", "--medhelm-data-dir", str(hb_data), "--medhelm-cache-dir", str(pytester.path / "cache"),
        "--medhelm-threshold", GATE, "--medhelm-json", str(out))
    assert result.ret == 0
    (gate,) = json.loads(out.read_text())["gates"]
    assert gate["passed"] is True and "calibration" not in gate


VERDICT = json.dumps({axis: {"score": 4, "explanation": "fine"} for axis in ("accuracy", "completeness", "clarity")})
JUDGES = ("openai/judge-b", "openai/judge-a")
#: clinicians c1 and c2 swap neighbours; the jury rates as their mean does: it agrees with them better than they do
RATINGS = "instance_id,rater,score\n" + "".join(
    f"i{i},{rater},{score}\n" for i, (a, b) in enumerate([(1, 2), (2, 1), (3, 4), (4, 3), (5, 6), (6, 5)])
    for rater, score in (("c1", a), ("c2", b), ("jury", (a + b) / 2 + (i % 2) * 0.1)))


def jury_run(pytester, server, shared, ret):
    server.set_answer(lambda body: VERDICT if body["model"].startswith("judge") else "ASSESSMENT: rest.")
    out = pytester.path / "jury.json"
    result = pytester_runs.run(
        pytester, str(SUITE), "--rootdir", str(pytester.path), "-p", "no:xdist", "--medhelm-model", "openai/writer",
        "--medhelm-api-base", server.url, *(a for j in JUDGES for a in ("--medhelm-jury", j)),
        "--medhelm-jury-api-base", server.url, "--medhelm-benchmark", "aci_bench", "--medhelm-max-instances", "2",
        "--medhelm-data-dir", str(shared), "--medhelm-cache-dir", str(pytester.path / "cache"),
        "--medhelm-bertscore-model", "off", "--medhelm-threshold", "aci_bench>=0.5", "--medhelm-require-calibrated",
        "--medhelm-json", str(out))
    assert result.ret == ret, result.stdout.str()[-3000:]
    (gate,) = json.loads(out.read_text())["gates"]
    return gate


def test_a_jury_is_calibrated_by_the_icc_tool_for_its_judges_and_judge_prompt(pytester, server, shared_data, capsys):
    from pytest_medhelm.cli import main
    from pytest_medhelm.jury.instrument import annotator_file, read_helm_constants

    gate = jury_run(pytester, server, shared_data, ret=1)
    template, _criteria = read_helm_constants(shared_data / "helm_jury" / annotator_file("aci_bench"))
    sha = hashlib.sha256(template.encode()).hexdigest()
    assert gate["status"] == "not evaluated"
    assert (f"no calibration record for the jury openai/judge-a + openai/judge-b with prompt sha256 {sha}"
            in gate["reason"])
    ratings = pytester.path / "ratings.csv"
    ratings.write_text(RATINGS)
    # the jury of one judge only is another rater: its record does not count for the two
    assert main(["agreement", str(ratings), "--jury-rater", "jury", "--calibration-judge", "openai/judge-a",
                 "--calibration-prompt-sha256", sha, "--rootdir", str(pytester.path), "--bootstrap", "0"]) == 0
    assert jury_run(pytester, server, shared_data, ret=1)["status"] == "not evaluated"
    assert main(["agreement", str(ratings), "--jury-rater", "jury", *(a for j in JUDGES for a in
                                                                      ("--calibration-judge", j)),
                 "--calibration-prompt-sha256", sha, "--rootdir", str(pytester.path), "--bootstrap", "0"]) == 0
    assert "jury openai/judge-a + openai/judge-b: calibrated" in capsys.readouterr().out
    gate = jury_run(pytester, server, shared_data, ret=0)
    assert gate["passed"] is True and gate["calibration"][0]["rater"] == "openai/judge-a + openai/judge-b"


def test_the_icc_tool_refuses_a_prompt_hash_that_is_not_one(tmp_path, capsys):
    from pytest_medhelm.cli import main

    ratings = tmp_path / "ratings.csv"
    ratings.write_text(RATINGS)
    assert main(["agreement", str(ratings), "--jury-rater", "jury", "--calibration-judge", "m",
                 "--calibration-prompt-sha256", "abc", "--rootdir", str(tmp_path), "--bootstrap", "0"]) == 4
    assert "64 lowercase hex digits" in capsys.readouterr().err and not (tmp_path / CALIBRATION_DIR).exists()
    assert main(["agreement", str(ratings), "--jury-rater", "jury", "--calibration-judge", "m",
                 "--rootdir", str(tmp_path)]) == 4


def test_the_ini_key_requires_it_too(pytester, server, hb_data):
    server.set_answer(answer)
    out = pytester.path / "r.json"
    result = pytester_runs.run(
        pytester, str(SUITE), "--rootdir", str(pytester.path), "-p", "no:xdist", "--medhelm-model", "openai/writer",
        "--medhelm-api-base", server.url, "--medhelm-endpoint", f"{GRADER}={server.url}", "--medhelm-grader", GRADER,
        "--medhelm-benchmark", "healthbench", "--medhelm-data-dir", str(hb_data), "--medhelm-cache-dir",
        str(pytester.path / "cache"), "--medhelm-threshold", GATE, "-o", "medhelm_require_calibrated=true",
        "--medhelm-json", str(out))
    assert result.ret == 1
    (gate,) = json.loads(out.read_text())["gates"]
    assert gate["status"] == "not evaluated" and "--medhelm-require-calibrated" in gate["reason"]
