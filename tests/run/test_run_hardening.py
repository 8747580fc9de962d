"""The run's smaller defences of issue 20 (points 7 and 10): unpinned downloads recorded as unverified, a dead sender
child failing nobody's item, a key given as a variable name not echoed, credentials in a URL never stored, reports
with patient text private, and a judge's provider key sent to a URL said at start-up."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest
import pytester_runs
from catalogue_helpers import medqa_zip
from pytester_runs import SUITE

from pytest_medhelm.testing.server import running_server

XDIST = pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                          pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])


@XDIST
def test_a_public_download_without_a_pin_is_recorded_as_unverified(pytester: pytest.Pytester, server,
                                                                    xdist: list[str]) -> None:
    data = pytester.path / "data"
    archive = medqa_zip(data / "medqa" / "data_clean.zip")
    out = pytester.path / "results.json"
    run = pytester_runs.run(pytester, str(SUITE), "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                            "--medhelm-data-dir", str(data), "--medhelm-benchmark", "medqa", "--medhelm-cache", "off",
                            "--medhelm-json", str(out), *xdist)
    assert run.ret == 0, run.stdout.str()[-3000:]
    recorded = json.loads(out.read_text())["run"]["data_unverified"]
    assert recorded == {"medqa": {"data_clean.zip": {
        "expected": None, "actual": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "reason": "no sha256 is pinned for this public file: it was used unverified"}}}


SENDER_BUG = """
from pytest_medhelm.sending import background

_on_done = background.BackgroundSender._on_done


def _a_bug(self, job, result):  # the first answer's bookkeeping raises: the sender's loop ends with this error
    background.BackgroundSender._on_done = _on_done
    raise RuntimeError("a bug in the sender")


def pytest_configure(config):
    # the run's sender only (the serial process, or xdist's controller): an xdist worker's first own question would
    # otherwise meet the bug in a sender of its own, which is not the fault this test plants
    if not hasattr(config, "workerinput"):
        background.BackgroundSender._on_done = _a_bug
"""


@pytest.mark.e2e
@XDIST
def test_a_sender_that_dies_fails_no_item(pytester: pytest.Pytester, toy, xdist: list[str]) -> None:
    """The background sender dies (a bug) at its first answer: the items waiting for its answers ask for their own,
    and the run ends without an error, saying what happened."""
    data = toy(12)
    pytester.makepyfile(sender_bug=SENDER_BUG)  # (a plugin of its own: the toy benchmark's conftest stays)
    pytester.syspathinsert()
    with running_server(answer="A", latency=0.05) as server:
        run = pytester_runs.run(pytester, "-p", "sender_bug", "--medhelm-model", "openai/x", "--medhelm-api-base",
                                server.url, "--medhelm-data-dir", str(data), "--medhelm-cache-dir",
                                str(pytester.path / "the-cache"), "--medhelm-retries", "0", *xdist, subprocess=True)
    text = run.stdout.str()
    assert run.ret == 0, text[-3000:]
    assert "the background sender stopped" in text and "asked for their own answers" in text
    assert "RuntimeError" in text and "a bug in the sender" in text
    assert "error" not in text.splitlines()[-1].lower()


def test_a_key_given_as_the_variable_name_is_not_repeated(pytester: pytest.Pytester, toy) -> None:
    data = toy(2)
    key = "hf_" + "Zq8" * 10  # letters, digits and _: it passes for a variable name
    run = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", "http://127.0.0.1:9/v1",
                            "--medhelm-api-key-env", key, "--medhelm-data-dir", str(data))
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    text = run.stdout.str() + run.stderr.str()
    assert key not in text and key[:12] not in text
    assert "looks like an API key rather than the NAME of the variable" in text
    named = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", "http://127.0.0.1:9/v1",
                              "--medhelm-api-key-env", "MY_GATEWAY_KEY", "--medhelm-data-dir", str(data))
    assert "the environment variable MY_GATEWAY_KEY is not set" in named.stderr.str()  # a real name still is


@XDIST
def test_credentials_in_an_api_base_are_never_stored(pytester: pytest.Pytester, toy, server,
                                                     xdist: list[str]) -> None:
    data = toy(3)
    secret = "s3cret-" + os.urandom(6).hex()
    with_credentials = server.url.replace("http://", f"http://gateway-user:{secret}@")
    out, html, cache = pytester.path / "r.json", pytester.path / "r.html", pytester.path / "cache"
    run = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", with_credentials,
                            "--medhelm-endpoint", f"openai/x={with_credentials}", "--medhelm-data-dir", str(data),
                            "--medhelm-cache-dir", str(cache), "--medhelm-retries", "0", "--medhelm-json", str(out),
                            "--medhelm-html", str(html), *xdist)
    assert out.exists(), run.stdout.str()[-3000:]
    assert secret not in run.stdout.str() + run.stderr.str()
    options = json.loads(out.read_text())["run"]["options"]
    assert options["api_base"] == server.url.replace("http://", "http://***@")
    assert options["endpoints"] == [["openai/x", options["api_base"]]]
    written = [out, html, *(p for p in cache.rglob("*") if p.is_file())]
    assert [str(p) for p in written if secret.encode() in p.read_bytes()] == []


@pytest.mark.parametrize("report_text", [True, False], ids=["with-texts", "without"])
def test_reports_with_patient_text_are_private(pytester: pytest.Pytester, toy, server, report_text: bool) -> None:
    data = toy(2)
    out, html = pytester.path / "r.json", pytester.path / "r.html"
    os.umask(umask := os.umask(0o022))  # (read the umask: the reports without texts keep its permissions)
    run = pytester_runs.run(pytester, "--medhelm-model", "openai/x", "--medhelm-api-base", server.url,
                            "--medhelm-data-dir", str(data), "--medhelm-cache", "off", "--medhelm-json", str(out),
                            "--medhelm-html", str(html), *(["--medhelm-report-text"] if report_text else []))
    assert run.ret == 0, run.stdout.str()[-2000:]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (out, html)}
    expected = 0o600 if report_text else 0o666 & ~umask
    assert modes == {"r.json": expected, "r.html": expected}
    assert ("question" in json.loads(out.read_text())["instances"][0]) is report_text


