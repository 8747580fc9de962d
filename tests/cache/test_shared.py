"""The shared answer cache on Redis (``--medhelm-cache-url``, issue 22), against a real ``redis-server`` that these
tests start on a free loopback port: two runs with different local caches share their answers; the values are the
local cache's JSON and are validated when read; a Redis that cannot be reached is said once and the run goes on.

The inner runs are in-process (pytester_runs.run): nothing here needs a fresh interpreter."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from pytester_runs import run as inner

from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import Completion

MODES = pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                         pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
#: a run in this process whatever the variant: one whose mode is not what its test checks (it fills the cache the
#: checked run reads, or reads what it left), and which under xdist cost ~2 CPU-s of interpreters
SERIAL = ["-p", "no:xdist"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server of our own on a free loopback port (no persistence), answering PING; and its URL."""
    binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists()
                                               else None)
    if binary is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
    pytest.importorskip("redis", reason="the redis client (pip install 'pytest-medhelm[redis]')")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server did not start on port {port}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A redis-server of our own, for this module's tests."""
    proc, url = _start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield url
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


@pytest.mark.e2e
@MODES
def test_a_second_runner_with_an_empty_local_cache_sends_nothing(pytester, toy, redis_url, redis_db, mode):
    data = toy(6)
    said = [f"medhelm shared cache: {redis_url} (answers and judgements read there after a local miss, written to "
            "both)"]
    with running_server(answer="A") as server:
        # (the first runner fills Redis, in this process in both variants: the second runner is what is checked in
        # each mode)
        first = inner(pytester, *toy_args(server, data, pytester.path / "runner-1",
                                                        "--medhelm-cache-url", redis_url, *SERIAL))
        assert first.ret == 0, first.stdout.str()
        assert server.count == 6
        first.stdout.fnmatch_lines(said)
        server.reset()
        out = pytester.path / "r.json"
        second = inner(pytester, *toy_args(server, data, pytester.path / "runner-2",
                                                         "--medhelm-cache-url", redis_url, "--medhelm-json", str(out),
                                                         *mode))
        assert second.ret == 0, second.stdout.str()
        second.stdout.fnmatch_lines(said)  # (said in each mode: by xdist's controller too)
        assert server.count == 0  # every answer came from Redis
        keys = redis_db.keys("medhelm:answer:*")
        assert len(keys) == 6
        entry = json.loads(redis_db.get(keys[0]))
        # and the second runner's local cache was filled: without Redis it still sends nothing (in this process:
        # it reads what the second runner stored, which its own mode does not change)
        redis_db.flushdb()
        third = inner(pytester, *toy_args(server, data, pytester.path / "runner-2", *SERIAL))
        assert third.ret == 0 and server.count == 0
    report = json.loads(out.read_text())
    assert [i["cached"] for i in report["instances"]] == [True] * 6
    assert report["benchmarks"][0]["n"] == 6
    # the same JSON values as the local cache, under our prefix
    assert entry["completion"]["text"] == "A" and entry["request"]["model"].startswith("openai/toy-model@")


@pytest.mark.e2e
def test_a_value_planted_in_redis_is_validated_and_asked_again(pytester, toy, redis_url, redis_db):
    data = toy(3)
    with running_server(answer="A") as server:
        assert inner(pytester, *toy_args(server, data, pytester.path / "one",
                                                       "--medhelm-cache-url", redis_url, "-p", "no:xdist")).ret == 0
        keys = sorted(redis_db.keys("medhelm:answer:*"))
        assert len(keys) == 3
        # someone with access to the Redis writes what is not an answer of ours
        redis_db.set(keys[0], b"\x80\x04\x95 a pickle, say")
        redis_db.set(keys[1], json.dumps({"completion": {"text": ["a", "list"]}}))
        redis_db.set(keys[2], "[" * 200_000)
        server.reset()
        result = inner(pytester, *toy_args(server, data, pytester.path / "two",
                                                         "--medhelm-cache-url", redis_url, "-p", "no:xdist"))
        assert result.ret == 0, result.stdout.str()
        assert server.count == 3  # none believed: each asked again, and the good answer written back
    assert all(json.loads(redis_db.get(k))["completion"]["text"] == "A" for k in keys)


@pytest.mark.e2e
@MODES
def test_an_unreachable_redis_is_said_once_and_the_local_cache_carries_on(pytester, toy, mode):
    data = toy(4)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    cache = pytester.path / "cache"
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, cache, "--medhelm-cache-url", dead, *mode))
        assert result.ret == 0, result.stdout.str()
        assert server.count == 4
        said = [line for line in result.stdout.lines if "cannot be reached" in line]
        assert len(said) == 1 and said[0].startswith(f"medhelm: the shared cache {dead} cannot be reached ("), said
        assert said[0].endswith("this run uses the local cache only")
        server.reset()
        again = inner(pytester, *toy_args(server, data, cache, "--medhelm-cache-url", dead, *mode))
        assert again.ret == 0 and server.count == 0  # the local cache kept every answer


@pytest.mark.e2e
@pytest.mark.parametrize("url, expected", [
    ("http://localhost:6379", "expected redis://HOST:PORT/DB"),
    ("redis://localhost:6379/zero", "the database 'zero' is not a number"),
    ("redis://:s3cret@localhost:notaport/0", "the port is not a number"),
])
def test_a_cache_url_that_is_not_redis_is_a_usage_error(pytester, toy, url, expected):
    data = toy(1)
    result = inner(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-data-dir", str(data),
                                           "--medhelm-cache-url", url, "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--medhelm-cache-url*{expected}*"])
    assert "s3cret" not in result.stderr.str()  # a password in the URL is never echoed


@pytest.mark.e2e
def test_the_ini_key_sets_the_shared_cache(pytester, toy, redis_url, redis_db):
    data = toy(2)
    pytester.makeini(f"[pytest]\nmedhelm_cache_url = {redis_url}\n")
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, pytester.path / "c", "-p", "no:xdist"))
        assert result.ret == 0, result.stdout.str()
    assert len(redis_db.keys("medhelm:answer:*")) == 2


def test_a_value_over_the_size_cap_is_a_miss_and_is_not_read_whole(redis_url, redis_db, monkeypatch):
    from pytest_medhelm.cache import shared as shared_cache

    monkeypatch.setattr(shared_cache, "MAX_VALUE_BYTES", 1000)
    small = {"completion": {"text": "A"}, "run_id": "r"}
    redis_db.set(shared_cache.KEY_PREFIX + "small", json.dumps(small))
    redis_db.set(shared_cache.KEY_PREFIX + "large", json.dumps({"completion": {"text": "x" * 2_000_000}}))
    cache = shared_cache.SharedCache(redis_url)
    try:
        sent_before = redis_db.info("stats")["total_net_output_bytes"]
        assert cache.get_many(["large"]) == {}
        sent = redis_db.info("stats")["total_net_output_bytes"] - sent_before
        assert sent < 100_000, sent  # (the INFO reply itself is a few kilobytes): not the 2 MB value
        assert cache.get_many(["small", "absent"]) == {"small": small}
        assert cache.failure is None  # a value too large is a miss, not a Redis failure
    finally:
        cache.close()


def test_many_keys_are_read_as_one_by_one_in_one_round_trip_per_chunk(tmp_path, redis_url, redis_db, monkeypatch):
    from pytest_medhelm.cache import shared as shared_cache
    from pytest_medhelm.cache.store import AnswerCache

    monkeypatch.setattr(shared_cache, "MAX_VALUE_BYTES", 1000)
    good = {f"k{i}": {"completion": {"text": f"answer {i}"}, "run_id": "other"} for i in range(1200)}
    for key, entry in good.items():
        redis_db.set(shared_cache.KEY_PREFIX + key, json.dumps(entry))
    planted = {"text": b"not json", "wrong": json.dumps({"completion": {"text": 5}}).encode(),
               "large": json.dumps({"completion": {"text": "x" * 2000}}).encode(), "bytes": b"\xff\xfe"}
    for key, value in planted.items():
        redis_db.set(shared_cache.KEY_PREFIX + key, value)
    keys = [*good, *planted, "absent", "k0"]  # (a key asked twice is read once)
    import redis.client

    round_trips = []
    execute = redis.client.Pipeline.execute

    def counted(pipeline, *args, **kwargs):
        round_trips.append(len(pipeline.command_stack))
        return execute(pipeline, *args, **kwargs)

    cache = AnswerCache(tmp_path / "c", run_id="r", shared_url=redis_url)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(redis.client.Pipeline, "execute", counted)
            found = cache.get_many(keys)
        # the 1,205 keys of ours, in chunks: their lengths, then the values that fit ("large" is over the cap)
        assert round_trips == [500, 500, 500, 500, 205, 203]
        one_by_one = {key: cache.get(key) for key in keys}
    finally:
        cache.close()
    assert found.keys() == {key for key, answer in one_by_one.items() if answer is not None} == good.keys()
    assert all(found[key].text == one_by_one[key].text == good[key]["completion"]["text"] for key in good)
    # what Redis held is now in the local cache too: without Redis, nothing is lost
    local = AnswerCache(tmp_path / "c", run_id="r")
    try:
        assert local.get_many(keys).keys() == good.keys()
    finally:
        local.close()


def test_a_redis_that_cannot_be_reached_gives_no_answer_in_a_batch_and_is_switched_off(tmp_path):
    from pytest_medhelm.cache.store import AnswerCache

    local = AnswerCache(tmp_path / "c", run_id="r")  # (written without Redis: the batch is the first to ask it)
    local.put("here", Completion("local", 1, 1))
    local.close()
    cache = AnswerCache(tmp_path / "c", run_id="r", shared_url=f"redis://127.0.0.1:{_free_port()}/0")
    try:
        assert cache.shared.failure is None
        assert {key: answer.text for key, answer in cache.get_many(["here", "elsewhere"]).items()} == {"here": "local"}
        assert cache.shared.failure is not None  # the tier goes off, said once
    finally:
        cache.close()


def test_a_key_redis_refuses_to_read_costs_only_itself_in_a_batch(tmp_path, redis_url, redis_db):
    from pytest_medhelm.cache import shared as shared_cache
    from pytest_medhelm.cache.store import AnswerCache

    for i in range(5):
        redis_db.set(shared_cache.KEY_PREFIX + f"k{i}", json.dumps({"completion": {"text": f"answer {i}"}}))
    redis_db.delete(shared_cache.KEY_PREFIX + "k2")
    redis_db.rpush(shared_cache.KEY_PREFIX + "k2", "a list")  # (GETRANGE on it is an error reply)
    cache = AnswerCache(tmp_path / "c", run_id="r", shared_url=redis_url)
    try:
        found = cache.get_many([f"k{i}" for i in range(5)])
        assert sorted(found) == ["k0", "k1", "k3", "k4"]  # the others of its chunk are kept
        # a key of another type is a miss, named as what it is (issue 30, item 3): not a Redis that stopped
        assert cache.shared.failure is None and cache.shared.wrong_type == 1
        [note] = cache.shared.notes()
        assert "1 key(s) under medhelm:answer: hold another Redis type than a string (WRONGTYPE)" in note
        assert "stopped answering" not in note
        assert sorted(cache.get_many(["k2", "k3"])) == ["k3"]  # the tier still answers
    finally:
        cache.close()


def test_one_round_trip_reads_at_most_its_byte_budget(redis_url, redis_db, monkeypatch):
    """Issue 30, item 3: twelve planted values just under the per-value cap, asked in one pipeline, are not all
    read: the lengths come first, and only the values within the round trip's total budget are read."""
    from pytest_medhelm.cache import shared as shared_cache

    monkeypatch.setattr(shared_cache, "MAX_VALUE_BYTES", 100_000)
    monkeypatch.setattr(shared_cache, "MAX_ROUND_TRIP_BYTES", 250_000)
    planted = json.dumps({"completion": {"text": "x" * 99_000}, "run_id": "r"})
    assert len(planted) < 100_000
    for i in range(12):
        redis_db.set(shared_cache.KEY_PREFIX + f"big{i}", planted)
    cache = shared_cache.SharedCache(redis_url)
    try:
        sent_before = redis_db.info("stats")["total_net_output_bytes"]
        found = cache.get_many([f"big{i}" for i in range(12)])
        sent = redis_db.info("stats")["total_net_output_bytes"] - sent_before
        assert len(found) == 2 and cache.over_budget == 10  # two fit in 250,000 bytes; the rest are misses
        assert sent < 250_000 + 20_000, sent  # (with the INFO reply): not 12 x 99 KB
        assert cache.failure is None
        assert "10 value(s) left unread" in cache.notes()[0]
    finally:
        cache.close()


class DripServer:
    """A fake Redis on loopback that answers every connection by sending one byte every ``every`` seconds, and
    never a whole reply: no socket read ever waits long enough to time out."""

    def __init__(self, every: float = 1.5) -> None:
        import threading

        self.every = every
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"
        self.stopped = threading.Event()
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"+")
                while not self.stopped.wait(self.every):
                    conn.sendall(b"x")
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


#: the drip in the tests: a byte every DRIP_EVERY s, well within the socket timeout the tests give the client (the
#: product's 2 s, with a drip every 1.5 s, cost seconds per test)
DRIP_EVERY, DRIP_SOCKET_TIMEOUT = 0.2, 0.6


@pytest.fixture
def drip(monkeypatch):
    from pytest_medhelm.cache import shared as shared_cache

    monkeypatch.setattr(shared_cache, "SOCKET_TIMEOUT", DRIP_SOCKET_TIMEOUT)  # (in-process runs: the same module)
    server = DripServer(every=DRIP_EVERY)
    yield server
    server.close()


def test_a_redis_that_drips_one_byte_at_a_time_meets_the_deadline_of_one_operation(drip, monkeypatch):
    """Issue 30, item 3: a byte every 0.2 s never trips the 0.6 s socket timeout (the product's is 2 s; a byte every
    0.2 s leaves a loaded machine 0.4 s of slack); the operation's deadline ends it (1.2 s here, to keep the test
    short), the connection is cut and the tier goes off, named as such."""
    pytest.importorskip("redis", reason="the redis client (pip install 'pytest-medhelm[redis]')")
    from pytest_medhelm.cache import shared as shared_cache

    monkeypatch.setattr(shared_cache, "OPERATION_DEADLINE", 1.2)
    cache = shared_cache.SharedCache(drip.url)
    started = time.monotonic()
    try:
        assert cache.get_many(["a", "b"]) == {}
        took = time.monotonic() - started
        assert 1.15 < took < 4, took
        assert cache.failure == ("did not answer within 1.2 s during the run (the deadline of one operation, "
                                 "connecting included)")
        cache.put("a", {"completion": {"text": "A"}})  # the tier is off: nothing waits on it again
        assert time.monotonic() - started < 4
    finally:
        cache.close()
    assert shared_cache.probe(drip.url).startswith(f"medhelm: the shared cache {drip.url} did not answer within "
                                                   "1.2 s")


def test_a_dripping_redis_cannot_hang_a_run_and_is_said_under_q(pytester, toy, drip, monkeypatch):
    pytest.importorskip("redis", reason="the redis client (pip install 'pytest-medhelm[redis]')")
    from pytest_medhelm.cache import shared as shared_cache

    monkeypatch.setattr(shared_cache, "OPERATION_DEADLINE", 1.0)  # (an in-process run: the same module)
    data = toy(3)
    out = pytester.path / "r.json"
    started = time.monotonic()
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, pytester.path / "c", "--medhelm-cache-url", drip.url,
                                           "--medhelm-json", str(out), "-q", "-p", "no:xdist"))
        assert server.count == 3
    assert result.ret == 0, result.stdout.str()
    assert time.monotonic() - started < 30
    result.stdout.fnmatch_lines([f"medhelm: the shared cache {drip.url} did not answer within 1 s (the deadline "
                                 "of one operation, connecting included): this run uses the local cache only"])
    shared = json.loads(out.read_text())["run"]["shared_cache"]
    assert shared["url"] == drip.url and shared["answered"] is False and "within 1 s" in shared["problem"]


def test_an_unreachable_redis_is_said_in_the_summary_under_q_and_in_the_results(pytester, toy):
    data = toy(2)
    dead = f"redis://:s3cret@127.0.0.1:{_free_port()}/0"
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, pytester.path / "c", "--medhelm-cache-url", dead,
                                           "--medhelm-json", str(out), "-q", "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()
    shown = dead.replace(":s3cret@", ":***@")
    said = [line for line in result.stdout.lines if "cannot be reached" in line]
    assert len(said) == 1 and said[0].startswith(f"medhelm: the shared cache {shown} cannot be reached ("), said
    shared = json.loads(out.read_text())["run"]["shared_cache"]
    assert (shared["url"], shared["answered"]) == (shown, False) and "cannot be reached" in shared["problem"]
    assert "s3cret" not in result.stdout.str() + out.read_text()


def test_an_answer_only_in_redis_is_not_here_until_it_is_read_from_there(tmp_path, redis_url, redis_db):
    """get_here reads the cache directory alone (what a waiting xdist worker polls); get copies a Redis hit here."""
    from pytest_medhelm.cache.store import AnswerCache

    elsewhere = AnswerCache(tmp_path / "another-runner", run_id="r0", shared_url=redis_url)
    elsewhere.put("k", Completion(text="A", tokens_in=3, tokens_out=1))
    elsewhere.close()
    cache = AnswerCache(tmp_path / "c", run_id="r1", shared_url=redis_url)
    try:
        assert cache.get_here("k") is None
        assert cache.get("k").text == "A" and cache.shared.hits == 1
        assert cache.get_here("k").text == "A" and cache.shared.hits == 1  # (copied here: Redis not asked)
    finally:
        cache.close()
    refreshing = AnswerCache(tmp_path / "c", mode="refresh", run_id="r2")
    try:
        assert refreshing.get_here("k") is None  # an earlier run's answer is not this refreshing run's
    finally:
        refreshing.close()


@MODES
def test_the_results_say_a_shared_cache_that_answered(pytester, toy, redis_url, redis_db, mode):
    data = toy(2)
    out = pytester.path / "r.json"
    redis_db.config_resetstat()
    # (slow answers: an xdist worker waits for its answer from the controller, and reads the cache directory only)
    with running_server(answer="A", latency=0.3) as server:
        result = inner(pytester, *toy_args(server, data, pytester.path / "c", "--medhelm-cache-url", redis_url,
                                           "--medhelm-json", str(out), *mode))
        assert result.ret == 0, result.stdout.str()
        assert json.loads(out.read_text())["run"]["shared_cache"] == {"url": redis_url, "answered": True,
                                                                      "problem": None, "hits": 0, "writes": 2}
        # Redis is asked once for each planned answer, whatever the mode
        assert redis_db.info("commandstats")["cmdstat_strlen"]["calls"] == 2
        # a second runner: every answer from Redis, read once by the process that plans the sending
        again = inner(pytester, *toy_args(server, data, pytester.path / "c2", "--medhelm-cache-url", redis_url,
                                          "--medhelm-json", str(out), *mode))
        assert again.ret == 0 and server.count == 2, again.stdout.str()
    shared = json.loads(out.read_text())["run"]["shared_cache"]
    assert shared["answered"] is True and shared["hits"] == 2 and shared["writes"] == 0


def test_a_cache_url_without_the_redis_client_is_a_usage_error(pytester, toy, monkeypatch):
    """Issue 30, item 3: without the client the option is not dropped (with a header line -q hides): exit 4."""
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)  # (an import of it raises ImportError, as when not installed)
    data = toy(1)
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, pytester.path / "c", "--medhelm-cache-url",
                                           "redis://127.0.0.1:6379/0", "-q", "-p", "no:xdist"))
        assert server.count == 0
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["*--medhelm-cache-url redis://127.0.0.1:6379/0 needs the redis client*pip install "
                                 "'pytest-medhelm?redis?'*"])


@pytest.mark.e2e
def test_a_redis_that_stops_during_the_sending_is_said_once(pytester, toy, tmp_path_factory):
    """The sender writes every answer to Redis too: when Redis goes away mid-run, the run goes on with its local
    cache and says so once, in the terminal summary."""
    data = toy(12)
    proc, url = _start_redis(tmp_path_factory.mktemp("redis-dies"))
    try:
        def stop_redis_after_the_third(_body):
            if server.count >= 3 and proc.poll() is None:
                proc.kill()
                proc.wait()
            return None  # (answered as usual)

        with running_server(answer="A", script=stop_redis_after_the_third, latency=0.05) as server:
            result = inner(pytester, *toy_args(server, data, pytester.path / "c",
                                                             "--medhelm-cache-url", url,
                                                             "--medhelm-concurrency", "1", "-p", "no:xdist"))
            assert server.count == 12
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    text = result.stdout.str()
    assert result.ret == 0, text
    said = [line for line in result.stdout.lines if "stopped answering during the run" in line]
    assert len(said) == 1, text
    assert said[0].startswith(f"medhelm: the shared cache {url} stopped answering during the run ("), said
    assert said[0].endswith("the answers after that are in the local cache only")


REDIS_VALUES_TRIED = 60


def test_fuzz_values_planted_in_a_real_redis_are_answers_of_ours_or_misses(tmp_path, redis_url, redis_db):
    """Hypothesis over a real redis-server (issue 30, item 10): whatever bytes or Redis type sits under a key of
    ours (absurd usage numbers included), reading it through the answer cache gives an answer within the bounds or
    a miss; the tier stays on and nothing escapes."""
    from fuzzing import fuzz
    from hypothesis import HealthCheck, given
    from hypothesis import strategies as st

    from pytest_medhelm.cache import shared as shared_cache
    from pytest_medhelm.cache.store import AnswerCache

    numbers = (st.integers() | st.floats(allow_nan=False) | st.integers(1, 4299).map(lambda d: int("9" * d))
               | st.sampled_from([1e308, 10**9 + 1, -1]))
    entries = st.fixed_dictionaries({}, optional={"tokens_in": numbers, "tokens_out": numbers,
                                                  "cost_usd": numbers, "latency_s": numbers}).map(
        lambda n: json.dumps({"completion": {"text": "A", **n}, "run_id": "other"}).encode())
    value = st.binary(max_size=200) | entries | st.just(b"[" * 50_000)
    tried = []

    @fuzz(REDIS_VALUES_TRIED, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(values=st.lists(value | st.just(None), min_size=1, max_size=4), as_list=st.booleans())
    def read_back(values, as_list):
        tried.append(1)
        redis_db.flushdb()
        keys = [f"k{i}" for i in range(len(values))]
        for key, raw in zip(keys, values):
            if raw is None:
                continue
            if as_list and key == "k0":
                redis_db.rpush(shared_cache.KEY_PREFIX + key, raw or b"x")
            else:
                redis_db.set(shared_cache.KEY_PREFIX + key, raw)
        cache = AnswerCache(tmp_path / f"c{len(tried)}", run_id="r", shared_url=redis_url)
        try:
            found = cache.get_many(keys)
            assert cache.shared.failure is None
        finally:
            cache.close()
        for answer in found.values():
            assert answer.text == "A" and 0 <= answer.tokens_in <= 10**9 and 0 <= answer.tokens_out <= 10**9
            assert 0 <= answer.latency_s <= 1e6 and (answer.cost_usd is None or 0 <= answer.cost_usd <= 1e6)

    read_back()
    assert len(tried) >= REDIS_VALUES_TRIED // 2
