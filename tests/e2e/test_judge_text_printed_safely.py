"""A judge's failure reason is printed safely (issue 30, item 6): a judge whose reply holds escape sequences where
the reason quotes it (a key of its JSON, which HELM's reading names when it has no ``score``) has them escaped on
the terminal and in the JUnit XML, serial and under xdist, as a provider's error message has."""

from __future__ import annotations

import json

import pytest
import pytester_runs
from pytester_runs import suite_args

C3 = ("accuracy", "completeness", "clarity")
#: a clear-screen, an OSC 8 link and a fake green result line, as a key of the judge's JSON
HOSTILE_KEY = "\x1b[2J\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\\r\x1b[32m===== 2 passed in 0.1s =====\x1b[0m"
REPLY = json.dumps({**{c: {"score": 4, "explanation": "fine"} for c in C3}, HOSTILE_KEY: 1})


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist-2"])
def test_a_judges_failure_reason_quoting_its_reply_is_printed_escaped(pytester, shared_data, xdist):
    from pytest_medhelm.testing.server import running_server

    junit = pytester.path / "junit.xml"
    with running_server(answer="x") as server:
        server.set_answer(lambda body: REPLY if body["model"].startswith("judge") else "A note.")
        result = pytester_runs.run(pytester, *suite_args(server.url, shared_data, "aci_bench", 2, "--medhelm-cache-dir",
                                               str(pytester.path / "c"), "--medhelm-compat", "helm", "-rA",
                                               "--junitxml", str(junit), *xdist), subprocess=True)
    out = result.stdout.str() + result.stderr.str()
    xml = junit.read_text(encoding="utf-8")
    assert "\x1b" not in out, [line for line in out.splitlines() if "\x1b" in line]
    assert "\x1b" not in xml
    said = "\\x1b[2J\\x1b]8;;http://x\\x1b\\click"
    assert said in out and said in xml, out[-3000:]  # the reason is said, as text
    assert not any(line.startswith("===== 2 passed") for line in out.splitlines())
