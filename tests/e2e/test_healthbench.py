"""HealthBench and HealthBench Professional end to end: the suite as users run it, our test server as the model
under test, the grader and the judges, on synthetic examples written here in the upstream JSONL formats.

Every prompt is checked against one rendered here independently of the plugin: the model's as the compact JSON of
the conversation's messages (medhelm 0.8.0's chat request), the grader's from the template read with :mod:`ast`
from the pinned files, filled as simple-evals (``[points] criterion``) or medhelm 0.8.0 (``str(rubric dict)``) fill
it. The grader's verdicts are written into each criterion's text (``MET-yes`` / ``MET-no`` / ``GARBAGE``), so every
score below is worked out by hand.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import SHARED_DATA, SUITE

HB_FILE = "2025-05-07-06-14-12_oss_eval.jsonl"
HARD_FILE = "hard_2025-05-08-21-00-10.jsonl"
ANSWER = "Rest, ice, and see a clinician if you cannot bear weight."
SYSTEM = "You are a helpful assistant."

#: three synthetic examples: per criterion its points, whether the grader says it is met, its tags
EXAMPLES = [
    {"example_tags": ["theme:emergency_referrals"], "ideal_completions_data": None,
     "prompt": [{"content": "SYNTHETIC: I twisted my ankle an hour ago. Should I go to A&E?", "role": "user"}],
     "prompt_id": "syn-0",
     "rubrics": [{"criterion": "MET-yes Advises urgent care if unable to bear weight.", "points": 5,
                  "tags": ["level:example", "axis:completeness"]},
                 {"criterion": "MET-no Recommends an opioid dose.", "points": -6, "tags": ["axis:accuracy"]},
                 {"criterion": "MET-yes Mentions ice.", "points": 2, "tags": ["axis:completeness"]}]},
    {"example_tags": ["theme:hedging"], "ideal_completions_data": None,
     "prompt": [{"content": "SYNTHETIC: headache", "role": "user"}, {"content": "For how long?", "role": "assistant"},
                {"content": "Two days, \u00e9tourdi", "role": "user"}],
     "prompt_id": "syn-1",
     "rubrics": [{"criterion": "MET-yes Gives a dangerous dose.", "points": -8, "tags": ["axis:accuracy"]},
                 {"criterion": "MET-no Asks about red flags.", "points": 4, "tags": ["axis:completeness"]}]},
    {"example_tags": ["theme:hedging"], "ideal_completions_data": None,
     "prompt": [{"content": "SYNTHETIC: a rash", "role": "user"}], "prompt_id": "syn-2",
     "rubrics": [{"criterion": "MET-yes Suggests an emollient.", "points": 3, "tags": ["axis:accuracy"]},
                 {"criterion": "MET-no Suggests a biopsy.", "points": 3, "tags": ["axis:accuracy"]}]},
]
#: the reference's example scores: (5 + 2) / 7, -8 / 4, 3 / 6
REFERENCE_SCORES = {"0": 1.0, "1": -2.0, "2": 0.5}
#: medhelm 0.8.0's (negative points p rectified to 10 + p): (5 + 2) / (5 + 4 + 2), 2 / (2 + 4), 3 / 6
FORK_SCORES = {"0": 7 / 11, "1": 2 / 6, "2": 0.5}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def template(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            value = node.value
            return ast.literal_eval(value.func.value).strip() if isinstance(value, ast.Call) \
                else ast.literal_eval(value)
    raise AssertionError(name)


def conversation(messages: list[dict], answer: str) -> str:
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in [*messages, {"role": "assistant", "content": answer}])


def verdict_for(text: str) -> str:
    """The grader's reply: what the rubric item in the prompt says (the conversation holds no marker)."""
    item = text.split("# Rubric item", 1)[-1].split("# Instructions", 1)[0]
    if "GARBAGE" in item:
        return "Sorry, I am not sure."
    met = "MET-yes" in item
    return f'```json\n{{"explanation": "as written", "criteria_met": {"true" if met else "false"}}}\n```'


def reply(body: dict) -> str:
    text = body["messages"][-1]["content"]
    if body["model"] == "writer":
        return ANSWER
    if "Physician Response:" in text:  # HealthBench Professional's comparison: 6 from judge-a, 8 from judge-b
        return json.dumps({"criteria_met": 6 if body["model"] == "judge-a" else 8, "explanation": "close"})
    if body["model"] == "judge-b" and "PRO" in text:  # on Professional, judge-b says nothing is met
        return '{"explanation": "no", "criteria_met": false}'
    return verdict_for(text)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    if not (SHARED_DATA / "healthbench_reference").is_dir() or not (SHARED_DATA / "medhelm08_templates").is_dir():
        pytest.skip("../shared/data is absent (the pinned grader prompts)")
    root = tmp_path / "data"
    for folder, name in (("healthbench_reference", "healthbench_eval.py"),
                         ("medhelm08_templates", "health_bench_annotator.py")):
        (root / folder).mkdir(parents=True)
        shutil.copy(SHARED_DATA / folder / name, root / folder / name)
    (root / "healthbench").mkdir()
    (root / "healthbench" / HB_FILE).write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES), encoding="utf-8")
    (root / "healthbench" / HARD_FILE).write_text(json.dumps(EXAMPLES[1]) + "\n", encoding="utf-8")
    return root


def run(pytester: pytest.Pytester, data: Path, benchmark: str, *extra: str, judges=("openai/judge-a",),
        ret: int = 0, answer=reply, grader: str | None = "openai/grader") -> tuple[dict, list[dict], str]:
    from pytest_medhelm.testing.server import running_server

    out = pytester.path / "r.json"
    with running_server(answer="x") as server:
        server.set_answer(answer)
        args = [str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
                server.url, "--medhelm-jury-api-base", server.url, *(("--medhelm-grader", grader) if grader else ()),
                "--medhelm-benchmark", benchmark, "--medhelm-data-dir", str(data),
                "--medhelm-cache-dir", str(pytester.path / "cache"), "--medhelm-json", str(out),
                *[a for j in judges for a in ("--medhelm-jury", j)], *extra]
        result = pytester_runs.run(pytester, *args)
        assert result.ret == ret, result.stdout.str()[-3000:]
        sent = [r["json"] for r in server.requests]
    return json.loads(out.read_text()), sent, result.stdout.str()


def by_id(report: dict) -> dict[str, dict]:
    return {r["instance_id"]: r for r in report["instances"]}


@pytest.mark.parametrize("dist", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_healthbench_is_graded_as_its_reference_grades_it(pytester, data, dist):
    html = pytester.path / "report.html"
    report, sent, stdout = run(pytester, data, "healthbench", *dist, "--medhelm-html", str(html))
    grader_template = template(data / "healthbench_reference" / "healthbench_eval.py", "GRADER_TEMPLATE")
    model_requests = [b for b in sent if b["model"] == "writer"]
    grader_requests = [b for b in sent if b["model"] == "grader"]
    # one grader call per rubric criterion, no more: 3 + 2 + 2
    assert len(model_requests) == 3 and len(grader_requests) == sum(len(e["rubrics"]) for e in EXAMPLES) == 7
    records = by_id(report)
    expected_grader_prompts = []
    for index, example in enumerate(EXAMPLES):
        rec = records[str(index)]
        messages = [{"role": m["role"], "content": m["content"]} for m in example["prompt"]]
        assert rec["prompt_sha256"] == sha(json.dumps(messages, ensure_ascii=False, separators=(",", ":")))
        prompts = [grader_template.replace("<<conversation>>", conversation(example["prompt"], ANSWER))
                   .replace("<<rubric_item>>", f"[{item['points']}] {item['criterion']}")
                   for item in example["rubrics"]]
        assert rec["judge_prompt_sha256"] == [sha(p) for p in prompts]
        expected_grader_prompts += prompts
        assert rec["score"] == pytest.approx(REFERENCE_SCORES[str(index)])  # raw: -2.0 stays -2.0
    assert sorted(b["messages"][1]["content"] for b in grader_requests) == sorted(expected_grader_prompts)
    for body in grader_requests:  # simple-evals' grader sampler: its system message, 2048 tokens
        assert body["messages"][0] == {"role": "system", "content": SYSTEM} and body["max_tokens"] == 2048
    for body in model_requests:  # the conversation as is, no system message
        assert body["messages"] in [[{"role": m["role"], "content": m["content"]} for m in e["prompt"]]
                                    for e in EXAMPLES]
    [row] = report["benchmarks"]
    # the benchmark's score is the clipped mean: (1 - 2 + 0.5) / 3 < 0 -> 0
    assert row["raw_mean"] == pytest.approx(-0.5 / 3) and row["mean"] == 0.0 and row["bootstrap_std"] > 0
    breakdown = {(r["kind"], r["tag"]): r for r in report["rubric_breakdown"]}
    # themes: the example scores, clipped mean: emergency_referrals 1.0; hedging (-2 + 0.5) / 2 -> 0
    assert breakdown[("theme", "theme:emergency_referrals")]["mean"] == 1.0
    assert breakdown[("theme", "theme:hedging")]["mean"] == 0.0 and breakdown[("theme", "theme:hedging")]["n"] == 2
    # axes: completeness 7/7, 0/4 -> 0.5; accuracy: examples 0 and 1 have no positive accuracy point, 2: 3/6
    assert breakdown[("axis", "axis:completeness")]["mean"] == 0.5
    assert breakdown[("axis", "axis:accuracy")]["n"] == 1 and breakdown[("axis", "axis:accuracy")]["mean"] == 0.5
    assert {k for k, _t in breakdown} == {"theme", "axis"}
    assert report["run"]["rubric_graders"]["healthbench"]["graders"] == ["openai/grader"]
    # no sha256 is known offline for OpenAI's dated file: the run records the one it read, as unverified
    assert report["run"]["data_unverified"]["healthbench"][HB_FILE]["expected"] is None
    assert "HealthBench themes and axes" in stdout and "emergency_referrals" in stdout
    page = html.read_text(encoding="utf-8")
    assert 'id="rubric-breakdown"' in page and "<td>emergency_referrals</td>" in page


def test_healthbench_under_medhelm_compat_is_the_forks_score_by_every_judge(pytester, data):
    report, sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist", "--medhelm-compat", "medhelm",
                          judges=("openai/judge-a", "openai/judge-b"))
    fork_template = template(data / "medhelm08_templates" / "health_bench_annotator.py", "PROMPT_TEMPLATE")
    assert not [b for b in sent if b["model"] == "grader"]  # the jury grades, not --medhelm-grader
    for judge in ("judge-a", "judge-b"):  # every judge, once per criterion, HELM's judge request
        asked = [b for b in sent if b["model"] == judge]
        assert len(asked) == 7 and all(len(b["messages"]) == 1 and b["max_tokens"] == 4096 for b in asked)
    records = by_id(report)
    for index, example in enumerate(EXAMPLES):
        rec = records[str(index)]
        prompts = [fork_template.replace("<<conversation>>", conversation(example["prompt"], ANSWER))
                   .replace("<<rubric_item>>", str(item)) for item in example["rubrics"]]
        assert rec["judge_prompt_sha256"] == [sha(p) for p in prompts] * 2
        assert rec["score"] == pytest.approx(FORK_SCORES[str(index)])
    [row] = report["benchmarks"]
    assert row["mean"] == pytest.approx(sum(FORK_SCORES.values()) / 3) and "bootstrap_std" not in row  # no clipping
    assert report.get("rubric_breakdown") == []


def test_a_dropped_verdict_shifts_under_medhelm_and_is_an_item_error_by_default(pytester, data):
    garbled = dict(EXAMPLES[0], rubrics=[dict(EXAMPLES[0]["rubrics"][0], criterion="GARBAGE first"),
                                         *EXAMPLES[0]["rubrics"][1:]])
    (data / "healthbench" / HB_FILE).write_text(json.dumps(garbled) + "\n", encoding="utf-8")
    report, _sent, stdout = run(pytester, data, "healthbench", "-p", "no:xdist", ret=1)
    [rec] = report["instances"]
    assert rec["score"] is None and "1 of 3 criteria without a verdict" in rec["error"]
    assert "not a JSON object" in rec["error"] and rec["judge_failures"] == {
        "openai/grader": "the reply is not a JSON object (Expecting value)"}
    # said once, in the run's summary, with its count
    assert stdout.count("medhelm: judge openai/grader gave no valid judgement on 1 item: the reply is not a JSON "
                        "object (Expecting value)") == 1
    report, _sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist", "--medhelm-compat", "medhelm")
    [rec] = report["instances"]
    # the fork zips the two verdicts left (not met, met) onto criteria 1 and 2: rectified 5, 4, 2 -> 4 / 11
    assert rec["score"] == pytest.approx(4 / 11) and rec["metrics"]["dropped"] == 1


def test_the_hard_subset_is_chosen_by_option(pytester, data):
    report, sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist", "--medhelm-healthbench-subset", "hard")
    assert [r["instance_id"] for r in report["instances"]] == ["0"]
    assert report["instances"][0]["score"] == pytest.approx(-2.0)
    assert len([b for b in sent if b["model"] == "grader"]) == 2


def test_the_dry_run_counts_one_grader_call_per_criterion(pytester, data):
    from pytest_medhelm.testing.server import running_server

    prices = pytester.path / "prices.toml"
    prices.write_text('["openai/writer"]\ninput_per_million = 1.0\noutput_per_million = 1.0\n'
                      '["openai/grader"]\ninput_per_million = 1000000.0\noutput_per_million = 0.0\n')
    with running_server(answer="x") as server:
        result = pytester_runs.run(
            pytester, str(SUITE), "--medhelm-model", "openai/writer", "--medhelm-api-base",
            server.url, "--medhelm-benchmark", "healthbench", "--medhelm-data-dir", str(data), "--medhelm-dry-run",
            "--medhelm-grader", "openai/grader", "--medhelm-prices", str(prices))
        assert server.count == 0
    assert result.ret == 0
    stdout = result.stdout.str()
    assert "3 requests and 0 jury calls and 7 rubric grader calls" in stdout
    header = next(line for line in stdout.splitlines() if line.startswith("benchmark "))
    row = next(line for line in stdout.splitlines() if line.startswith("healthbench "))
    cells = dict(zip([h.strip() for h in header.split("  ") if h.strip()], row.split()))
    # $1 per grader prompt token: the grader's cost in dollars is its prompt tokens (each call: the template, the
    # conversation, the criterion and the answer at its 512 tokens)
    tokens = int(cells["grader prompt tok"].replace(",", ""))
    assert cells["grader calls"] == "7" and tokens > 7 * (512 + 500)
    assert cells["grader USD"] == f"${tokens:,.2f}"


PRO_ROWS = [
    {"id": "t0", "conversation": {"messages": [{"role": "user", "content": "PRO SYNTHETIC: new AF. Anticoagulate?"}]},
     "rubric_items": [{"criterion_text": "MET-yes Offers a DOAC.", "points": 5},
                      {"criterion_text": "MET-no Suggests aspirin.", "points": -4}],
     "physician_response": "SYNTHETIC: a DOAC.", "use_case": "x", "canary_string": "SYNTHETIC"},
]


def pro_archive(data: Path, rows: list[dict]) -> None:
    (data / "healthbench_professional").mkdir()
    with zipfile.ZipFile(data / "healthbench_professional" / "assets.zip", "w") as zf:
        zf.writestr("assets/healthbench_professional_eval.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        zf.writestr("assets/README.md", "synthetic")


# (the default is HealthBench Professional's own reference since simple-evals PR #108: see the next test)
@pytest.mark.parametrize("compat", ["medhelm"])
def test_healthbench_professional_each_judge_on_its_own_verdicts_unless_medhelm(pytester, data, compat):
    pro_archive(data, PRO_ROWS)
    report, sent, _ = run(pytester, data, "healthbench_professional", "-p", "no:xdist", "--medhelm-compat", compat,
                          judges=("openai/judge-a", "openai/judge-b"))
    eval_template = template(data / "medhelm08_templates" / "health_bench_annotator.py", "EVAL_PROMPT")
    expected_eval = (eval_template.replace("<<user_message>>", conversation(PRO_ROWS[0]["conversation"]["messages"],
                                                                              ANSWER))
                     .replace("<<llm_response>>", ANSWER).replace("<<physician_response>>", "SYNTHETIC: a DOAC."))
    for judge in ("judge-a", "judge-b"):  # 2 criteria and the comparison each
        asked = [b["messages"][0]["content"] for b in sent if b["model"] == judge]
        assert len(asked) == 3 and asked.count(expected_eval) == 1
    [rec] = report["instances"]
    # rectified points 5, 6. judge-a: 5 met -> 5/11; judge-b said nothing is met -> 0. Comparisons 6 and 8.
    a = (5 / 11 + 0.6) / 2
    b_own, b_mixed = (0 + 0.8) / 2, (5 / 11 + 0.8) / 2  # medhelm 0.8.0 scores judge-b from judge-a's verdicts
    assert rec["score"] == pytest.approx((a + (b_mixed if compat == "medhelm" else b_own)) / 2)
    assert rec["metrics"]["rubric"]["shared_verdicts"] is (compat == "medhelm")
    assert report["run"]["data_unverified"]["healthbench_professional"]["assets.zip"]["expected"] is None


#: a long answer (4,500 characters) for the second task: 2,500 over the centre
LONG_ANSWER = "Anticoagulation reasoning. " * 166 + "Start a DOAC: now."
PRO_REFERENCE_ROWS = [*PRO_ROWS, {
    "id": "t1", "conversation": {"messages": [{"role": "user", "content": "PRO SYNTHETIC LONG: a discharge summary"}]},
    "rubric_items": [{"criterion_text": "MET-yes Lists the medications.", "points": 2},
                     {"criterion_text": "MET-no Gives follow-up.", "points": 6},
                     {"criterion_text": "MET-yes Uses jargon.", "points": -1}],
    "physician_response": "SYNTHETIC: a summary."}]


def pro_reply(body: dict) -> str:
    if body["model"] == "writer":
        return LONG_ANSWER if "LONG" in body["messages"][-1]["content"] else ANSWER
    return verdict_for(body["messages"][-1]["content"])


@pytest.mark.parametrize("dist", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_healthbench_professional_is_scored_by_its_authors_formula_by_default(pytester, data, dist):
    """simple-evals PR #108: the HealthBench rubric formula, graded by gpt-5.4-2026-03-05 at low reasoning effort
    (the default grader: no --medhelm-grader), no physician comparison, and the length-adjusted score beside the
    raw one in the results and every report."""
    assert len(LONG_ANSWER) == 4500
    pro_archive(data, PRO_REFERENCE_ROWS)
    md, html = pytester.path / "r.md", pytester.path / "r.html"
    report, sent, stdout = run(pytester, data, "healthbench_professional", *dist, "--medhelm-markdown", str(md),
                               "--medhelm-html", str(html), answer=pro_reply, grader=None,
                               judges=("openai/judge-a", "openai/judge-b"))
    grader_template = template(data / "healthbench_reference" / "healthbench_eval.py", "GRADER_TEMPLATE")
    graded = [b for b in sent if b["model"] == "gpt-5.4-2026-03-05"]
    assert not [b for b in sent if b["model"] in ("judge-a", "judge-b", "grader")]  # no jury, no comparison
    # one request per criterion (2 + 3), the reference's prompt alone (its Responses sampler has no system
    # message), the low effort, a reasoning model's token limit and no temperature
    expected = [grader_template.replace("<<conversation>>", conversation(row["conversation"]["messages"], answer))
                .replace("<<rubric_item>>", f"[{item['points']}] {item['criterion_text']}")
                for row, answer in zip(PRO_REFERENCE_ROWS, (ANSWER, LONG_ANSWER)) for item in row["rubric_items"]]
    assert sorted(b["messages"][0]["content"] for b in graded) == sorted(expected) and len(graded) == 5
    for body in graded:
        assert len(body["messages"]) == 1 and body["reasoning_effort"] == "low" and "temperature" not in body
        assert body["max_completion_tokens"] == 2048 + 4096
    records = by_id(report)
    # the reference's formula: t0 5 of 5 positive points; t1 (2 - 1) / 8
    assert records["0"]["score"] == pytest.approx(1.0) and records["1"]["score"] == pytest.approx(1 / 8)
    # length adjusted: score - 0.0147 * (chars - 2000) / 500; t0 57 chars (a bonus), t1 4,500 (a penalty)
    adj = {"0": 1.0 - 0.0147 * (len(ANSWER) - 2000) / 500, "1": 1 / 8 - 0.0147 * (4500 - 2000) / 500}
    assert adj == pytest.approx({"0": 1.0571242, "1": 0.0515})
    for key, value in adj.items():
        assert records[key]["metrics"]["length_adjusted"] == pytest.approx(value)
        assert records[key]["score"] == records[key]["raw_score"]  # the raw score stays the score
    assert records["0"]["metrics"]["rubric"]["grader"] == "openai/gpt-5.4-2026-03-05"
    [row] = report["benchmarks"]
    assert row["mean"] == pytest.approx(1.125 / 2) and row["raw_mean"] == pytest.approx(1.125 / 2)
    assert row["length_adjusted"] == pytest.approx((1.0571242 + 0.0515) / 2)  # beside the mean, not instead
    rule = report["run"]["length_adjustment"]
    assert rule["center_chars"] == 2000 and rule["penalty_per_500_chars"] == 0.0147
    assert rule["benchmarks"] == ["healthbench_professional"] and "PR #108" in rule["source"]
    assert report["run"]["rubric_graders"]["healthbench_professional"]["graders"] == ["openai/gpt-5.4-2026-03-05"]
    # every report: the terminal, Markdown and HTML show both numbers side by side
    shown = f"{(1.0571242 + 0.0515) / 2:.3f}"
    assert "HealthBench length-adjusted scores beside the raw ones" in stdout
    line = next(x for x in stdout.splitlines() if x.startswith("healthbench_professional") and shown in x)
    assert "0.562" in line
    assert "| healthbench_professional | openai/writer | 2   | 0.562" in md.read_text(encoding="utf-8")
    assert shown in md.read_text(encoding="utf-8")
    page = html.read_text(encoding="utf-8")
    assert 'id="length-adjusted"' in page and f"<td>{shown}</td>" in page and "<td>0.562</td>" in page


def test_an_explicit_grader_grades_healthbench_professional_at_the_run_s_effort_if_plain(pytester, data):
    """--medhelm-grader is kept: a plain grader gets the reference's Chat Completions request (system message,
    temperature 0) and no reasoning effort."""
    pro_archive(data, PRO_ROWS)
    report, sent, _ = run(pytester, data, "healthbench_professional", "-p", "no:xdist", answer=pro_reply)
    graded = [b for b in sent if b["model"] == "grader"]
    assert len(graded) == 2 and all(b["messages"][0] == {"role": "system", "content": SYSTEM} for b in graded)
    assert all("reasoning_effort" not in b and b["temperature"] == 0 for b in graded)
    assert report["instances"][0]["score"] == pytest.approx(1.0)


def test_healthbench_reports_its_length_adjusted_score_in_both_modes(pytester, data):
    """Every HealthBench variant: by the reference (the clipped mean of the adjusted scores) and under
    --medhelm-compat medhelm (the fork's plain mean, adjusted by the same rule)."""
    bonus = -0.0147 * (len(ANSWER) - 2000) / 500
    report, _sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist")
    [row] = report["benchmarks"]
    for key, value in REFERENCE_SCORES.items():
        assert by_id(report)[key]["metrics"]["length_adjusted"] == pytest.approx(value + bonus)
    # (1 - 2 + 0.5) / 3 + 0.0571 < 0: clipped to 0, as the raw mean is
    assert row["mean"] == 0.0 and row["length_adjusted"] == 0.0
    report, _sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist", "--medhelm-compat", "medhelm")
    [row] = report["benchmarks"]
    assert row["length_adjusted"] == pytest.approx(sum(FORK_SCORES.values()) / 3 + bonus)
    assert report["run"]["length_adjustment"]["benchmarks"] == ["healthbench"]


def seventeen_examples() -> list[dict]:
    """16 gradable examples (EXAMPLES over again, each its own prompt) and, 10th, one whose rubric has no positive
    points (a penalty and a zero): the reference's score cannot exist for it."""
    examples = []
    for i in range(16):
        base = EXAMPLES[i % len(EXAMPLES)]
        examples.append(dict(base, prompt=[dict(base["prompt"][0], content=f"{base['prompt'][0]['content']} #{i}"),
                                           *base["prompt"][1:]], prompt_id=f"syn-{i}"))
    unscorable = {"example_tags": ["theme:hedging"], "ideal_completions_data": None, "prompt_id": "syn-nopos",
                  "prompt": [{"content": "SYNTHETIC: can I double my dose?", "role": "user"}],
                  "rubrics": [{"criterion": "MET-yes Gives a dangerous dose.", "points": -8, "tags": []},
                              {"criterion": "MET-no Says hello.", "points": 0, "tags": []}]}
    return [*examples[:9], unscorable, *examples[9:]]


@pytest.mark.parametrize("dist", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_an_example_without_positive_points_sends_no_grader_request(pytester, data, dist):
    examples = seventeen_examples()
    (data / "healthbench" / HB_FILE).write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    report, sent, stdout = run(pytester, data, "healthbench", *dist, ret=1)
    others = [e for e in examples if e["prompt_id"] != "syn-nopos"]
    grader_requests = [b for b in sent if b["model"] == "grader"]
    # exactly the criteria of the 16 others (counted at the server), none for the 10th
    assert len(grader_requests) == sum(len(e["rubrics"]) for e in others) == 38
    assert not [b for b in grader_requests if "can I double my dose" in b["messages"][-1]["content"]]
    assert len([b for b in sent if b["model"] == "writer"]) == 17
    records = by_id(report)
    rec = records["9"]
    assert rec["score"] is None and "no rubric criterion has positive points" in rec["error"]
    assert "no grader request was sent" in rec["error"] and not rec.get("judge_prompt_sha256")
    messages = [{"role": m["role"], "content": m["content"]} for m in examples[9]["prompt"]]
    assert rec["prompt_sha256"] == sha(json.dumps(messages, ensure_ascii=False, separators=(",", ":")))
    assert rec["answer"] == ANSWER
    assert all(records[str(i)]["score"] is not None for i in range(17) if i != 9)
    [row] = report["benchmarks"]
    assert row["n"] == 16 and row["n_errors"] == 1


def test_under_medhelm_compat_such_an_example_is_graded_as_the_fork_grades_it(pytester, data):
    """medhelm 0.8.0 rectifies negative points (10 + p), so its formula scores the rubric: the fork's requests."""
    examples = seventeen_examples()[9:11]
    (data / "healthbench" / HB_FILE).write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    report, sent, _ = run(pytester, data, "healthbench", "-p", "no:xdist", "--medhelm-compat", "medhelm")
    assert len([b for b in sent if b["model"] == "judge-a"]) == sum(len(e["rubrics"]) for e in examples)
    # rectified 2 and 0; "Gives a dangerous dose" met: 2 / 2
    assert by_id(report)["0"]["score"] == pytest.approx(1.0)
