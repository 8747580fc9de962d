"""Secrets: an API key planted in the environment never appears in any artifact of a run.

The key is really used (the test server requires it, so every answered request proves it was sent), one request
fails with a provider error message that echoes the key (as some providers do), and the run writes everything it
can: JSON, Markdown and HTML reports, the cache, verbose terminal output with every report section (``-rA``) and
DEBUG logs on the terminal. Then every byte of every file in the project directory (cache SQLite database
included) and the terminal output are scanned for the key.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import pytester_runs

from pytest_medhelm.testing.server import running_server


def scan(root: Path, secrets: list[str]) -> list[str]:
    """Every file under root that holds one of the secrets (as UTF-8, UTF-16 or in SQLite's pages)."""
    needles = [s.encode(enc) for s in secrets for enc in ("utf-8", "utf-16-le")]
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            raw = path.read_bytes()
            if any(n in raw for n in needles):
                found.append(str(path.relative_to(root)))
    return found


@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_a_planted_api_key_is_nowhere(pytester, toy, monkeypatch, xdist):
    key = f"sk-MEDHELM-SECRET-{uuid.uuid4().hex}"
    other = f"sk-OPENAI-SECRET-{uuid.uuid4().hex}"
    monkeypatch.setenv("MEDHELM_TEST_ENDPOINT_KEY", key)  # named with --medhelm-api-key-env: sent to that endpoint
    monkeypatch.setenv("OPENAI_API_KEY", other)  # OpenAI's: never sent to someone else's endpoint
    data = toy(6)
    out = pytester.path / "reports"
    options = ["--medhelm-json", str(out / "r.json"), "--medhelm-markdown", str(out / "r.md")]
    from pytest_medhelm.options import OPTIONS

    if any(o.name == "html" for o in OPTIONS):
        options += ["--medhelm-html", str(out / "r.html")]
    echo = ("status", 400, {}, f"Invalid request: the key {key} is not allowed to use this model")
    with running_server(answer="A", api_key=key, fail_matching={"question 3?": echo}) as srv:
        result = pytester_runs.run(pytester, "-v", "-rA", "-o", "log_cli=true", "--log-cli-level=DEBUG",
                                   "--log-level=DEBUG", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                                   srv.url, "--medhelm-api-key-env", "MEDHELM_TEST_ENDPOINT_KEY", "--medhelm-data-dir",
                                   str(data), "--medhelm-cache-dir", str(pytester.path / "cache"), "--medhelm-retries",
                                   "0", *options, *xdist)
        requests = srv.requests
    # the key was used: the server (which requires it) answered, and it never logs credentials itself
    assert requests and all(r["had_auth"] for r in requests)
    assert sum(r["status"] == 200 for r in requests) == 5
    assert result.ret == 1  # question 3 failed with the echoing error
    text = result.stdout.str() + result.stderr.str()
    assert "is not allowed to use this model" in text  # the provider's message is shown ...
    assert key not in text and other not in text  # ... without the key
    assert (out / "r.json").is_file() and (out / "r.md").is_file()
    report = json.loads((out / "r.json").read_text())
    [error] = [i["error"] for i in report["instances"] if i["error"]]
    assert "***" in error and key not in error
    assert scan(pytester.path, [key, other]) == []
    # the results name the variable, never hold its value
    assert report["run"]["options"]["api_key_env"] == "MEDHELM_TEST_ENDPOINT_KEY"
    assert any((pytester.path / "cache").rglob("cache.db"))  # the cache was written, and scanned
