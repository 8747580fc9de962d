"""``healthbench_meta`` as a benchmark: the rubric grader (our test server) against physicians, run as users run the
suite, serial and under xdist, cached, sampled; every figure worked out here by hand from the synthetic rows.

The grader's verdict is written into each row's rubric text (``VERDICT-yes`` / ``VERDICT-no`` / ``GARBAGE``), so the
grader's labels are known, and the physicians' labels are chosen so that the macro-F1 is easy to compute.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import pytester_runs
from pytester_runs import SHARED_DATA, SUITE

META_FILE = "2025-05-07-06-14-12_oss_meta_eval.jsonl"
SYSTEM = "You are a helpful assistant."
GRADER = "openai/grader"


def row(i: int, verdict: str, labels: list[bool], category: str = "cluster:a") -> dict:
    return {"prompt": [{"role": "user", "content": f"SYNTHETIC question {i}"}], "completion": f"answer {i}",
            "rubric": f"{verdict} criterion {i}", "category": category, "binary_labels": labels,
            "anonymized_physician_ids": [f"p{(i + j) % 3}" for j in range(len(labels))]}


#: (grader verdict, physicians' labels): per class pairs worked out in test_macro_f1_by_hand
ROWS = [row(0, "VERDICT-yes", [True, True]), row(1, "VERDICT-yes", [True, False]),
        row(2, "VERDICT-no", [False, False], "cluster:b"), row(3, "VERDICT-no", [True, False], "cluster:b"),
        row(4, "VERDICT-yes", [False, False])]


def reply(body: dict) -> str:
    text = body["messages"][-1]["content"]
    item = text.split("# Rubric item", 1)[-1].split("# Instructions", 1)[0]
    if "GARBAGE" in item:
        return "I cannot tell."
    met = "VERDICT-yes" in item
    return f'```\n{{"explanation": "as written", "criteria_met": {"true" if met else "false"}}}\n```'


def macro_f1(pairs: list[tuple[bool, bool]]) -> float:
    """simple-evals' balanced F1 of (rater, other physician) pairs, computed here independently."""
    f1 = []
    for cls in (True, False):
        said = [a == b for a, b in pairs if a == cls]
        truth = [a == b for a, b in pairs if b == cls]
        p, r = sum(said) / len(said), sum(truth) / len(truth)
        f1.append(0.0 if p + r == 0 else 2 * p * r / (p + r))
    return sum(f1) / 2


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_data(tmp_path)


def make_data(tmp_path: Path) -> Path:
    """A data folder holding the pinned grader prompt and the synthetic meta-evaluation rows."""
    if not (SHARED_DATA / "healthbench_reference").is_dir():
        pytest.skip("../shared/data is absent (the pinned grader prompt)")
    root = tmp_path / "data"
    (root / "healthbench_reference").mkdir(parents=True)
    shutil.copy(SHARED_DATA / "healthbench_reference" / "healthbench_eval.py", root / "healthbench_reference")
    (root / "healthbench_meta").mkdir()
    (root / "healthbench_meta" / META_FILE).write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return root


@pytest.fixture
def server():
    yield from grader_server()


def grader_server():
    """Our test server, answering as the grader of the rows (and of any rubric marked the same way)."""
    from pytest_medhelm.testing.server import running_server

    with running_server(answer="x") as running:
        running.set_answer(reply)
        yield running


def run(pytester: pytest.Pytester, server, data: Path, *extra: str, ret: int = 0,
        cache: str = "cache") -> tuple[dict, list[dict], str]:
    out = pytester.path / "r.json"
    before = len(server.requests)
    args = [str(SUITE), "--rootdir", str(pytester.path), "--medhelm-endpoint", f"{GRADER}={server.url}",
            "--medhelm-grader", GRADER,
            "--medhelm-benchmark", "healthbench_meta", "--medhelm-data-dir", str(data),
            "--medhelm-cache-dir", str(pytester.path / cache), "--medhelm-json", str(out), *extra]
    result = pytester_runs.run(pytester, *args)
    assert result.ret == ret, result.stdout.str()[-3000:]
    sent = [r["json"] for r in server.requests[before:]]
    return json.loads(out.read_text()), sent, result.stdout.str()


def test_macro_f1_by_hand():
    # pairs (grader, physician): row 0 (T,T)x2, row 1 (T,T),(T,F), row 2 (F,F)x2, row 3 (F,T),(F,F), row 4 (T,F)x2
    pairs = [(True, True)] * 3 + [(True, False)] * 3 + [(False, False)] * 3 + [(False, True)]
    # pos: precision 3/6, recall 3/4 -> F1 0.6; neg: precision 3/4, recall 3/6 -> F1 0.6
    assert macro_f1(pairs) == pytest.approx(0.6)


@pytest.mark.parametrize("dist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_the_grader_is_measured_against_physicians(pytester, server, data, dist):
    md, html = pytester.path / "s.md", pytester.path / "r.html"
    report, sent, stdout = run(pytester, server, data, *dist, "--medhelm-markdown", str(md),
                               "--medhelm-html", str(html))
    # one grader request per row, as the meta-evaluation sends it: system message, then the filled template
    assert len(sent) == len(ROWS) and {b["model"] for b in sent} == {"grader"}
    template_path = data / "healthbench_reference" / "healthbench_eval.py"
    from pytest_medhelm.jury.rubric_grader import read_string_constants

    template = read_string_constants(template_path, ("GRADER_TEMPLATE",))["GRADER_TEMPLATE"]
    by_text = {b["messages"][-1]["content"]: b for b in sent}
    for r in ROWS:
        convo = f"user: {r['prompt'][0]['content']}\n\nassistant: {r['completion']}"
        expected = template.replace("<<conversation>>", convo).replace("<<rubric_item>>", r["rubric"])
        body = by_text[expected]
        assert body["messages"][0] == {"role": "system", "content": SYSTEM} and body["temperature"] == 0
    records = {r["instance_id"]: r for r in report["instances"]}
    # per row, the share of physicians agreeing with the grader
    assert [records[str(i)]["score"] for i in range(5)] == [1.0, 0.5, 1.0, 0.5, 0.0]
    assert {r["model"] for r in report["instances"]} == {GRADER}
    # the grader's figure is no model's score: in no category, macro-average or win rate; its tokens are counted
    (grader_row,) = report["models"]
    assert report["categories"] == [] and grader_row["macro_avg"] is None and grader_row["tokens_in"] > 0
    (bench,) = [b for b in report["benchmarks"] if b["slug"] == "healthbench_meta"]
    assert bench["mean"] == pytest.approx(0.6)
    agreement = bench["grader_agreement"]
    assert agreement["macro_f1"] == pytest.approx(0.6)
    assert agreement["f1_met"] == pytest.approx(0.6) and agreement["f1_not_met"] == pytest.approx(0.6)
    assert agreement["n_rows"] == 5 and agreement["n_pairs"] == 10
    assert agreement["template_sha256"] == hashlib.sha256(template.encode()).hexdigest()
    assert agreement["grader"] == GRADER
    # cluster b: rows 2 and 3, pairs (F,F)x3, (F,T): pos has no prediction -> undefined
    assert agreement["by_category"]["cluster:b"]["macro_f1"] is None
    assert agreement["physician_macro_f1"] is not None
    for text in (stdout, md.read_text(), html.read_text()):
        assert "macro-F1" in text and "0.600" in text


def test_a_cached_rerun_sends_nothing_and_max_instances_samples(pytester, server, data):
    first, sent, _ = run(pytester, server, data, "-p", "no:xdist")
    assert len(sent) == 5
    again, sent, _ = run(pytester, server, data, "-p", "no:xdist")
    assert sent == [] and again["benchmarks"][0]["grader_agreement"] == first["benchmarks"][0]["grader_agreement"]
    sampled, sent, _ = run(pytester, server, data, "-p", "no:xdist", "--medhelm-max-instances", "3", cache="other")
    assert len(sent) == 3 and sampled["benchmarks"][0]["grader_agreement"]["n_rows"] == 3


def test_a_reply_without_a_verdict_is_an_error_of_its_row_only(pytester, server, data):
    rows = [*ROWS[:4], row(9, "GARBAGE", [True, False])]
    (data / "healthbench_meta" / META_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    report, _sent, stdout = run(pytester, server, data, "-p", "no:xdist", ret=1)
    records = {r["instance_id"]: r for r in report["instances"]}
    assert records["4"]["score"] is None and "no verdict" in records["4"]["error"]
    assert report["benchmarks"][0]["grader_agreement"]["n_rows"] == 4


def test_not_run_unless_named(pytester, server, data):
    result = pytester_runs.run(pytester, str(SUITE), "--rootdir", str(pytester.path), "-p", "no:xdist",
                               "--medhelm-model", "openai/m",
                               "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
                               "-k", "healthbench_meta", "--medhelm-cache-dir", str(pytester.path / "c"))
    assert server.requests == []
    assert result.ret == 5  # (every item deselected: nothing collected)
