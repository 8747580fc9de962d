"""ProxySender (``shc_proxy_med``) under ``--medhelm-compat medhelm``: medhelm 0.8.0's three-class question.

The expected medhelm prompt is the reference file ``prompts/medhelm08_shc_proxy_med_template.txt`` (the fork's
scenario code rendered with the placeholders ``{question}`` and ``{context}``, in the multiple-choice layout), with
this row's question and context put in; the default and helm prompts are HELM 0.5.16's, written out here. The run
goes through the plugin as users run it, against our test server.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import BENCHMARKS, load
from pytester_runs import SHARED_DATA, SUITE

REFERENCE = SHARED_DATA.parent / "reference" / "prompts" / "medhelm08_shc_proxy_med_template.txt"
FILE = "medhelm-PROXY-dataset_filtered.csv"
ROWS = [
    ("Who wrote this message?", "Synthetic: my daughter still has a fever, should we come in?", "B"),
    ("Who wrote this message?", "Synthetic: I need a refill of my inhaler, thanks.", "A"),
    ("Who wrote this message?", "Synthetic: please call back about the appointment", "C"),
]


def helm_prompt(question: str, context: str) -> str:
    """HELM 0.5.16's ``SHCPROXYMedScenario`` text in its multiple-choice layout (instructions, ``": "``, options)."""
    return ("Answer A, B, or C.\n\n: You are reviewing a clinical messages in order to determine if they have been "
            f"sent by a proxy user. Please determine the following: {question} with the following context: {context}"
            " , Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional details or "
            "response, just a simple A or B response.\nA. A\nB. B\nC. C\n:")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def medhelm_template() -> str:
    if not REFERENCE.is_file():
        pytest.skip("../shared/reference is absent (medhelm 0.8.0's shc_proxy_med template)")
    return REFERENCE.read_text(encoding="utf-8")


def medhelm_prompt(template: str, question: str, context: str) -> str:
    return template.replace("{question}", question).replace("{context}", context)


def write_csv(data: Path) -> None:
    folder = data / "proxysender"
    folder.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["prompt", "context", "label"])
    writer.writerows(ROWS)
    (folder / FILE).write_text(text.getvalue(), encoding="utf-8")


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_proxysender_prompt_per_mode(pytester: pytest.Pytester, medhelm_template: str, xdist: list[str]) -> None:
    from pytest_medhelm.testing.server import running_server

    data = pytester.path / "data"
    write_csv(data)
    expected = {
        "default": [helm_prompt(q, c) for q, c, _ in ROWS],
        "helm": [helm_prompt(q, c) for q, c, _ in ROWS],
        "medhelm": [medhelm_prompt(medhelm_template, q, c) for q, c, _ in ROWS],
    }
    # under xdist, medhelm's mode alone: the option reaches the workers, which collect its instances as the
    # controller does (every mode's prompts: the serial variant)
    if pytester_runs.starts_xdist(xdist):
        expected = {"medhelm": expected["medhelm"]}
    for compat, prompts in expected.items():
        out = pytester.path / f"{compat}.json"
        with running_server(answer="A") as server:
            run = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/x", "--medhelm-api-base",
                                    server.url, "--medhelm-data-dir", str(data), "--medhelm-benchmark", "proxysender",
                                    "--medhelm-cache", "off", "--medhelm-compat", compat, "--medhelm-json", str(out),
                                    *xdist)
            assert run.ret == 0, run.stdout.str()[-3000:]
            sent = sorted(r["json"]["messages"][0]["content"] for r in server.requests)
        assert sent == sorted(prompts), compat
        report = json.loads(out.read_text())
        by_id = {r["instance_id"]: r for r in report["instances"]}
        assert [by_id[f"row{n}"]["prompt_sha256"] for n in (1, 2, 3)] == [sha(p) for p in prompts]
        # the choices, the gold letters and the metric are the same in every mode: "A" is right on row 2 only
        assert [by_id[f"row{n}"]["score"] for n in (1, 2, 3)] == [0.0, 1.0, 0.0]
        assert report["run"]["compat"] == compat


def test_only_medhelm_changes_the_instances(tmp_path: Path, medhelm_template: str) -> None:
    write_csv(tmp_path)
    bench = BENCHMARKS["proxysender"]
    files = {FILE: tmp_path / "proxysender" / FILE}
    default = load("proxysender", tmp_path)
    assert bench.instance_builder("helm")(files) == default == bench.instance_builder("default")(files)
    fork = bench.instance_builder("medhelm")(files)
    assert [(i.id, i.references, i.choices, i.correct) for i in fork] == [
        (i.id, i.references, i.choices, i.correct) for i in default]
    assert [bench.render_prompt(i, "medhelm") for i in fork] == [
        medhelm_prompt(medhelm_template, q, c) for q, c, _ in ROWS]
    assert [bench.render_prompt(i) for i in default] == [helm_prompt(q, c) for q, c, _ in ROWS]
