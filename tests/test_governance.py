"""Patient data: ``--medhelm-local-only`` and the privacy of the cache directory.

* ``is_private_network_endpoint`` / ``private_network_violations`` (pytest_medhelm.governance), unit tests;
* whole runs: with ``--medhelm-local-only`` a gated benchmark and a model or judge endpoint off the network is a
  usage error (exit 4) naming the benchmark and the endpoint, before any request. The endpoints used are in
  TEST-NET-3 (``203.0.113.0/24``, RFC 5737: reserved for documentation, never routed) and are never contacted.
  A public benchmark's data may go anywhere: the run goes on and the model is asked;
* the cache directory is created 0700 and every file in it is 0600, xdist plans included; entries larger than
  diskcache's threshold for files of their own (32 KiB) stay inside the 0600 SQLite file.
"""

from __future__ import annotations

import os
import stat
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows, write_toy_data

from pytest_medhelm.governance import (
    is_private_network_address,
    is_private_network_endpoint,
    private_network_message,
    private_network_violations,
)
from pytest_medhelm.values import ModelSpec

OFF_NETWORK = "http://203.0.113.10/v1"  # TEST-NET-3: documentation only, never contacted


# ----------------------------------------------------------------------------------------------------------------
# is_private_network_endpoint


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/v1", "http://127.8.9.10/v1", "http://localhost:11434", "http://LOCALHOST./v1",
    "http://[::1]:8000/v1", "http://10.0.0.5/v1", "https://10.255.255.255", "http://172.16.0.1:8000",
    "http://172.31.255.254", "http://192.168.1.20:8080/v1", "http://[fd12:3456:789a::1]/v1", "http://[fc00::1]",
    "http://[::ffff:10.1.2.3]/v1", "http://[::ffff:127.0.0.1]", "10.0.0.5:8000/v1", "http://user:pw@10.0.0.5/v1",
])
def test_loopback_and_private_networks_are_local(url):
    assert is_private_network_endpoint(url)


@pytest.mark.parametrize("url", [
    OFF_NETWORK, "https://api.openai.com/v1", "http://8.8.8.8", "http://172.15.255.255", "http://172.32.0.1",
    "http://192.169.0.1", "http://11.0.0.1",
    # host names are never resolved (a DNS query is a request; its answer can change before the connection)
    "http://llm.hospital.internal:8000/v1", "http://localhost.example.com", "http://my-localhost",
    "http://127.0.0.1.nip.io/v1",
    # userinfo and fragments cannot smuggle a local-looking host in
    "http://127.0.0.1@evil.example/v1", "http://evil.example#@127.0.0.1", "http://evil.example/127.0.0.1",
    # link-local (cloud metadata lives there), CGNAT, unspecified, documentation ranges Python calls "private"
    "http://169.254.169.254/latest", "http://[fe80::1%25eth0]/v1", "http://100.64.0.1", "http://0.0.0.0:8000",
    "http://[::]:8000", "http://192.0.2.1", "http://198.18.0.1", "http://198.51.100.7", "http://[2001:db8::1]",
    "http://224.0.0.1",
    # malformed or absent
    "http://[::1", "", None, "http://", "not a url at all",
])
def test_everything_else_is_not_local(url):
    assert not is_private_network_endpoint(url)


def test_is_private_network_address_takes_bare_hosts():
    assert all(is_private_network_address(host) for host in ("127.0.0.1", "::1", "localhost"))
    assert not is_private_network_address("example.org") and not is_private_network_address("203.0.113.10")


def test_no_network_access_is_made(monkeypatch):
    import socket

    def forbidden(*args, **kwargs):
        raise AssertionError("governance must decide without the network")

    monkeypatch.setattr(socket, "getaddrinfo", forbidden)
    monkeypatch.setattr(socket, "gethostbyname", forbidden)
    monkeypatch.setattr(socket, "create_connection", forbidden)
    assert not is_private_network_endpoint("http://llm.hospital.internal/v1")
    assert is_private_network_endpoint("http://localhost/v1")
    assert private_network_violations([("openai/m", "http://llm.hospital.internal/v1")], [], [("x", "private")])


# ----------------------------------------------------------------------------------------------------------------
# private_network_violations


@dataclass
class Bench:
    slug: str
    access: str
    kind: str


def test_gated_and_private_benchmarks_times_endpoints_off_the_private_network():
    models = [ModelSpec("openai/gpt-4o", "openai/gpt-4o"),  # no api base: the provider's cloud
              ModelSpec("local/smollm2", "openai/smollm2"),  # our llama.cpp server on loopback
              ModelSpec("openai/ft", "openai/ft", "http://10.1.2.3:8000/v1"),
              ModelSpec("hosted_vllm/x", "hosted_vllm/x", OFF_NETWORK)]
    judges = [("anthropic/claude-3-7-sonnet", None), ("openai/judge", "http://127.0.0.1:9000/v1")]
    benchmarks = [("pubmedqa", "public", "closed"), ("mimic_billing", "gated", "closed"),
                  Bench("noteextract", "private", "open")]
    violations = private_network_violations(models, judges, benchmarks)
    assert violations == [
        "mimic_billing (gated) -> model openai/gpt-4o (no API base: litellm sends it to the provider's cloud API)",
        f"mimic_billing (gated) -> model hosted_vllm/x at {OFF_NETWORK} (not a loopback or private-network address)",
        "noteextract (private) -> model openai/gpt-4o (no API base: litellm sends it to the provider's cloud API)",
        f"noteextract (private) -> model hosted_vllm/x at {OFF_NETWORK} (not a loopback or private-network address)",
        "noteextract (private) -> judge anthropic/claude-3-7-sonnet (no API base: litellm sends it to the "
        "provider's cloud API)",
    ]
    message = private_network_message(violations)
    assert message.startswith("--medhelm-local-only: 5 benchmark/endpoint pair(s)")
    assert all(v in message for v in violations)


def test_public_data_and_private_network_endpoints_are_fine():
    local = [("openai/a", "http://127.0.0.1:8000/v1"), ("local/smollm2", None), ModelSpec("o/b", "o/b", "http://[::1]")]
    assert private_network_violations(local, local, [("mimic_bhc", "gated"), ("bmt_status", "private", "closed")]) == []
    cloud = [("openai/gpt-4o", None)]
    assert private_network_violations(cloud, cloud, [("pubmedqa", "public"), ("medqa", "public", "open")]) == []


def test_judges_are_checked_for_open_benchmarks_and_when_the_kind_is_unknown():
    judges = [("openai/gpt-4o", None)]
    assert private_network_violations([], judges, [("mimic_billing", "gated", "closed")]) == []
    assert len(private_network_violations([], judges, [("mimic_bhc", "gated", "open")])) == 1
    assert len(private_network_violations([], judges, [("mimic_bhc", "gated")])) == 1  # unknown kind: checked


def test_a_host_name_violation_says_why():
    [violation] = private_network_violations([("openai/m", "http://llm.hospital.internal:8000/v1")], [],
                                        [("bmt_status", "private")])
    assert "host names are not resolved" in violation and "llm.hospital.internal" in violation


def test_the_shared_cache_is_held_to_the_same_rule():
    """Issue 30, item 3: --medhelm-cache-url gets every prompt of the run: off the network, it is a violation."""
    local = [("openai/m", "http://127.0.0.1:8000/v1")]
    gated = [("mimic_bhc", "gated", "open")]
    for url in ("redis://127.0.0.1:6379/0", "redis://10.1.2.3:6379/0", "rediss://[fd00::5]:6380/1",
                "unix:///run/redis.sock", "redis://localhost:6379/0", None):
        assert private_network_violations(local, [], gated, cache_url=url) == [], url
    [violation] = private_network_violations(local, [], gated, cache_url="redis://:s3cret@198.51.100.7:6379/0")
    assert violation.startswith("mimic_bhc (gated) -> shared cache --medhelm-cache-url redis://***@198.51.100.7:6379/0")
    assert "not a loopback or private-network address" in violation and "s3cret" not in violation
    [named] = private_network_violations(local, [], gated, cache_url="redis://cache.example.org:6379/0")
    assert "host names are not resolved" in named
    assert private_network_violations(local, [], [("pubmedqa", "public")], cache_url="redis://198.51.100.7/0") == []


def test_every_shipped_gated_or_private_benchmark_is_protected():
    from pytest_medhelm.catalogue import builtin_benchmarks

    protected = [b for b in builtin_benchmarks() if b.access in ("gated", "private")]
    assert protected  # the catalogue has them
    violations = private_network_violations([("openai/gpt-4o", None)], [], protected)
    assert {v.split(" ", 1)[0] for v in violations} == {b.slug for b in protected}


# ----------------------------------------------------------------------------------------------------------------
# whole runs

GATED_CONFTEST = TOY_CONFTEST.replace('access="public"', 'access="gated"')
OPEN_GATED_CONFTEST = GATED_CONFTEST.replace('kind="closed"', 'kind="open"')


def gated_project(pytester: pytest.Pytester, conftest: str = GATED_CONFTEST) -> Path:
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_toy=TOY_TEST)
    return write_toy_data(pytester.path, toy_rows(4))


def run(pytester, *args):
    # bounded, in case a request went out after all: TEST-NET never answers
    return pytester_runs.run(pytester, "--medhelm-timeout", "1", "--medhelm-retries", "0", *args)


def test_local_only_refuses_a_gated_benchmark_on_an_off_network_model(pytester, server):
    data = gated_project(pytester)
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                 OFF_NETWORK, "--medhelm-data-dir", str(data))
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    assert "toy (gated)" in err and "203.0.113.10" in err and "local-only" in err
    assert "medhelm answers" not in result.stdout.str()  # refused before the answers-ahead phase
    assert server.count == 0


def test_local_only_refuses_a_cloud_model(pytester, server):
    data = gated_project(pytester)
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/gpt-4o", "--medhelm-data-dir", str(data))
    assert result.ret == 4
    assert "toy (gated) -> model openai/gpt-4o" in result.stderr.str()


def test_local_only_refuses_an_off_network_judge_and_sends_nothing_to_the_local_model(pytester, server):
    data = gated_project(pytester, OPEN_GATED_CONFTEST)
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                 server.url, "--medhelm-jury", "openai/judge", "--medhelm-jury-api-base", OFF_NETWORK,
                 "--medhelm-data-dir", str(data))
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert "toy (gated) -> judge openai/judge at http://203.0.113.10/v1" in result.stderr.str()
    assert server.count == 0  # the (local) model was not asked either: the refusal comes before any request


def test_local_only_refuses_a_shared_cache_off_the_network_before_anything_is_sent(pytester, server):
    data = gated_project(pytester)
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                 server.url, "--medhelm-cache-url", "redis://203.0.113.10:6379/0", "--medhelm-data-dir", str(data),
                 "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["*toy (gated) -> shared cache --medhelm-cache-url redis://203.0.113.10:6379/0 (not "
                                 "a loopback or private-network address)*"])
    assert server.count == 0


def test_local_only_lets_public_data_go_anywhere(pytester, server):
    """Public data under --medhelm-local-only: no refusal, the items are collected and the model is asked. (The
    model here is on loopback: a public benchmark is never refused, wherever its endpoint is; the off-network
    endpoint is checked by the collect-only run, which sends nothing to TEST-NET.)"""
    pytester.makeconftest(TOY_CONFTEST)  # public
    pytester.makepyfile(test_toy=TOY_TEST)
    data = write_toy_data(pytester.path, toy_rows(4))
    collected = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                    OFF_NETWORK, "--medhelm-data-dir", str(data), "--collect-only", "-q")
    assert collected.ret == 0, collected.stdout.str() + collected.stderr.str()
    assert "4 tests collected" in collected.stdout.str()
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                 server.url, "--medhelm-data-dir", str(data))
    assert result.ret == 0, result.stdout.str()
    assert server.count == 4


def test_local_only_runs_a_gated_benchmark_on_a_loopback_model(pytester, server):
    data = gated_project(pytester)
    result = run(pytester, "--medhelm-local-only", "--medhelm-model", "openai/toy-model", "--medhelm-api-base",
                 server.url, "--medhelm-data-dir", str(data))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert server.count == 4


# ----------------------------------------------------------------------------------------------------------------
# the cache directory: 0700, files 0600


MODES_TEST = textwrap.dedent('''
    import os, stat
    from pathlib import Path

    def test_zz_cache_modes_while_running():
        # runs inside the session (in an xdist worker under -n), while plans and entries exist
        root = Path(os.environ["MEDHELM_TEST_CACHE"])
        bad = []
        for path in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode & 0o077:  # group or others may read: directories must be 0700, files 0600
                bad.append(f"{oct(mode)} {path.relative_to(root)}")
        assert not bad, bad
''')


def modes(root: Path) -> list[str]:
    """Every path under root that others could read (group or world permission bits), with its mode."""
    return [f"{oct(stat.S_IMODE(p.stat().st_mode))} {p.relative_to(root)}" for p in [root, *root.rglob("*")]
            if stat.S_IMODE(p.stat().st_mode) & 0o077]


def test_cache_directory_is_created_0700_whatever_the_umask(pytester, server):

    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(test_toy=TOY_TEST)
    data = write_toy_data(pytester.path, [{"id": "q0", "q": "x?", "correct": 0}])
    cache = pytester.path / "a" / "new" / "cache"
    old = os.umask(0o002)
    try:
        result = pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                                   "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache))
    finally:
        os.umask(old)
    assert result.ret == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "cache.db").stat().st_mode) == 0o600


@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_cache_directory_is_0700_and_its_files_0600(pytester, server, monkeypatch, xdist):
    import json

    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(test_toy=TOY_TEST, test_zz_modes=MODES_TEST)
    # long questions (clinical notes are long): each entry (answer and request) is over 64 KiB, above diskcache's
    # default threshold (32 KiB) for storing a value as a file of its own
    rows = [{"id": f"q{i}", "q": f"note {i}: " + "synthetic clinical text. " * 3000, "correct": 0} for i in range(3)]
    data = write_toy_data(pytester.path, rows)
    cache = pytester.path / "private-cache"
    monkeypatch.setenv("MEDHELM_TEST_CACHE", str(cache))
    old = os.umask(0o022)  # the usual umask: files 0644 unless the plugin makes them private
    try:
        result = pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                                   "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache), *xdist)
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert result.ret == 0 or "test_zz_cache_modes_while_running" in result.stdout.str(), result.stdout.str()
    assert modes(cache) == [], "cache paths readable by others after the run"
    result.assert_outcomes(passed=4)  # 3 toy items and the check made while the run was going
    # the large entries are in the SQLite file: no value file of diskcache's (<hex>/<hex>/<name>.val) exists
    assert [p.relative_to(cache) for p in cache.rglob("*.val")] == []
    import diskcache

    from pytest_medhelm.cache.disk import JSONDisk

    with diskcache.Cache(str(cache), disk=JSONDisk) as stored:  # entries are JSON text (issue 20)
        sizes = [len(json.dumps(stored[key])) for key in stored if isinstance(stored[key], dict)]
    assert len(sizes) == 3 and min(sizes) > 64 * 1024, sizes  # what would have gone to files of their own
