"""The shared answer cache on Redis (``--medhelm-cache-url``, issue 22), against a real ``redis-server`` that these
tests start on a free loopback port: two runs with different local caches share their answers; the values are the
local cache's JSON and are validated when read; a Redis that cannot be reached is said once and the run goes on."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from pytest_medhelm.testing.server import running_server

MODES = pytest.mark.parametrize("mode", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist-2"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A redis-server of our own on 127.0.0.1 (no persistence), for this module's tests."""
    binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists()
                                               else None)
    if binary is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
    pytest.importorskip("redis", reason="the redis client (pip install 'pytest-medhelm[redis]')")
    port = _free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def redis_db(redis_url):
    """The module's Redis, emptied before the test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


def toy_args(server, data: Path, cache: Path, *extra: str) -> list[str]:
    return ["-p", "no:randomly", "-p", "no:cacheprovider", "--medhelm-model", "openai/toy-model",
            "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache),
            *extra]


@MODES
def test_a_second_runner_with_an_empty_local_cache_sends_nothing(pytester, toy, redis_url, redis_db, mode):
    data = toy(6)
    with running_server(answer="A") as server:
        first = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "runner-1",
                                                        "--medhelm-cache-url", redis_url, *mode))
        assert first.ret == 0, first.stdout.str()
        assert server.count == 6
        first.stdout.fnmatch_lines([f"medhelm shared cache: {redis_url} (answers and judgements read there after a "
                                    "local miss, written to both)"])
        server.reset()
        out = pytester.path / "r.json"
        second = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "runner-2",
                                                         "--medhelm-cache-url", redis_url, "--medhelm-json", str(out),
                                                         *mode))
        assert second.ret == 0, second.stdout.str()
        assert server.count == 0  # every answer came from Redis
        keys = redis_db.keys("medhelm:answer:*")
        assert len(keys) == 6
        entry = json.loads(redis_db.get(keys[0]))
        # and the second runner's local cache was filled: without Redis it still sends nothing
        redis_db.flushdb()
        third = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "runner-2", *mode))
        assert third.ret == 0 and server.count == 0
    report = json.loads(out.read_text())
    assert [i["cached"] for i in report["instances"]] == [True] * 6
    assert report["benchmarks"][0]["n"] == 6
    # the same JSON values as the local cache, under our prefix
    assert entry["completion"]["text"] == "A" and entry["request"]["model"].startswith("openai/toy-model@")


def test_a_value_planted_in_redis_is_validated_and_asked_again(pytester, toy, redis_url, redis_db):
    data = toy(3)
    with running_server(answer="A") as server:
        assert pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "one",
                                                       "--medhelm-cache-url", redis_url, "-p", "no:xdist")).ret == 0
        keys = sorted(redis_db.keys("medhelm:answer:*"))
        assert len(keys) == 3
        # someone with access to the Redis writes what is not an answer of ours
        redis_db.set(keys[0], b"\x80\x04\x95 a pickle, say")
        redis_db.set(keys[1], json.dumps({"completion": {"text": ["a", "list"]}}))
        redis_db.set(keys[2], "[" * 200_000)
        server.reset()
        result = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "two",
                                                         "--medhelm-cache-url", redis_url, "-p", "no:xdist"))
        assert result.ret == 0, result.stdout.str()
        assert server.count == 3  # none believed: each asked again, and the good answer written back
    assert all(json.loads(redis_db.get(k))["completion"]["text"] == "A" for k in keys)


@MODES
def test_an_unreachable_redis_is_said_once_and_the_local_cache_carries_on(pytester, toy, mode):
    data = toy(4)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    cache = pytester.path / "cache"
    with running_server(answer="A") as server:
        result = pytester.runpytest_subprocess(*toy_args(server, data, cache, "--medhelm-cache-url", dead, *mode))
        assert result.ret == 0, result.stdout.str()
        assert server.count == 4
        said = [line for line in result.stdout.lines if "cannot be reached" in line]
        assert len(said) == 1 and said[0].startswith(f"medhelm: the shared cache {dead} cannot be reached ("), said
        assert said[0].endswith("this run uses the local cache only")
        server.reset()
        again = pytester.runpytest_subprocess(*toy_args(server, data, cache, "--medhelm-cache-url", dead, *mode))
        assert again.ret == 0 and server.count == 0  # the local cache kept every answer


@pytest.mark.parametrize("url, expected", [
    ("http://localhost:6379", "expected redis://HOST:PORT/DB"),
    ("redis://localhost:6379/zero", "the database 'zero' is not a number"),
    ("redis://:s3cret@localhost:notaport/0", "the port is not a number"),
])
def test_a_cache_url_that_is_not_redis_is_a_usage_error(pytester, toy, url, expected):
    data = toy(1)
    result = pytester.runpytest_subprocess("--medhelm-model", "openai/toy-model", "--medhelm-data-dir", str(data),
                                           "--medhelm-cache-url", url, "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--medhelm-cache-url*{expected}*"])
    assert "s3cret" not in result.stderr.str()  # a password in the URL is never echoed


def test_the_ini_key_sets_the_shared_cache(pytester, toy, redis_url, redis_db):
    data = toy(2)
    pytester.makeini(f"[pytest]\nmedhelm_cache_url = {redis_url}\n")
    with running_server(answer="A") as server:
        result = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "c", "-p", "no:xdist"))
        assert result.ret == 0, result.stdout.str()
    assert len(redis_db.keys("medhelm:answer:*")) == 2


def test_a_child_process_sender_writes_to_redis_too(pytester, toy, redis_url, redis_db, monkeypatch):
    from pytest_medhelm.models.background import SENDER_ENV

    monkeypatch.setenv(SENDER_ENV, "process")  # the child process that sends the answers of large runs
    data = toy(3)
    with running_server(answer="A") as server:
        result = pytester.runpytest_subprocess(*toy_args(server, data, pytester.path / "c",
                                                         "--medhelm-cache-url", redis_url, "-p", "no:xdist"))
        assert result.ret == 0, result.stdout.str()
        assert server.count == 3
    assert len(redis_db.keys("medhelm:answer:*")) == 3
