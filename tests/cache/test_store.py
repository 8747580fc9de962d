"""The answer cache as untrusted input (issue 20, points 3, 4 and the cache items of 10): values are JSON and
reading them runs nothing; a directory or file that is not safely the user's own is refused, naming it; a damaged
database is a clear error; files planted by someone else are not believed; an answer is cached (and priced) as the
endpoint that actually gave it, litellm's environment included. The cache is created with explicit modes (0700
directory, 0600 SQLite file and its -wal/-shm), from a thread, without moving the process's umask.

The inner runs are in-process (pytester_runs.run): nothing here needs a fresh interpreter, and litellm (which reads
OPENAI_BASE_URL at each request, not at import) was imported again by each one, seconds apiece."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import stat
import textwrap
import threading
from pathlib import Path

import pytest
from fuzzing import examples, fuzz
from pytester_runs import run as inner

from pytest_medhelm.cache.store import FEW_KEYS, AnswerCache, CacheRefused, Stored, make_private_dir
from pytest_medhelm.testing.server import running_server
from pytest_medhelm.values import Completion

MODES = pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                         pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])


def toy_args(server, data: Path, cache: Path, *extra: str) -> list[str]:
    return ["-p", "no:randomly", "-p", "no:cacheprovider", "--medhelm-model", "openai/toy-model",
            "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache),
            *extra]


def rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT key, raw, mode, filename, value FROM Cache").fetchall()


class Planted:
    """What an attacker puts in a pickle: unpickling it creates the file ``marker``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


# ------------------------------------------------------------------------------------------------ JSON, not pickles


@pytest.mark.e2e
def test_a_run_stores_its_answers_as_json_text(pytester, toy, server):
    data = toy(3)
    cache = pytester.path / "cache"
    result = inner(pytester, *toy_args(server, data, cache, "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()
    stored = rows(cache / "cache.db")
    assert len(stored) == 3
    for _key, raw, mode, filename, value in stored:
        assert (raw, mode, filename) == (1, 1, None)  # diskcache's MODE_RAW: the text itself, no pickle, no file
        entry = json.loads(value)
        assert entry["completion"]["text"] == "A" and entry["request"]["model"] == f"openai/toy-model@{server.url}"


@pytest.mark.e2e
@MODES
def test_a_planted_pickle_never_runs_and_its_answer_is_asked_again(pytester, toy, mode):
    data = toy(4)
    cache = pytester.path / "cache"
    marker = pytester.path / "code-ran"
    with running_server(answer="A") as server:
        assert inner(pytester, *toy_args(server, data, cache, *mode)).ret == 0
        planted = pickle.dumps({"completion": Planted(str(marker))})
        with sqlite3.connect(cache / "cache.db") as connection:  # someone rewrites every entry as a pickle
            connection.execute("UPDATE Cache SET mode = 4, value = ?", (planted,))
        server.reset()
        result = inner(pytester, *toy_args(server, data, cache, *mode))
        count = server.count
    assert result.ret == 0, result.stdout.str()
    assert not marker.exists()  # the pickle was never loaded (it would have created the file)
    assert count == 4  # the planted entries were dropped: every answer was asked again
    result.stdout.fnmatch_lines(["*was converted from pickles to JSON once: 0 entries kept, 4 unreadable entries "
                                 "dropped*"])
    assert all(mode_ == 1 for _k, _r, mode_, _f, _v in rows(cache / "cache.db"))


@pytest.mark.e2e
def test_an_earlier_versions_pickled_cache_is_converted_once_and_keeps_its_answers(pytester, toy, server):
    data = toy(3)
    cache = pytester.path / "cache"
    assert inner(pytester, *toy_args(server, data, cache, "-p", "no:xdist")).ret == 0
    with sqlite3.connect(cache / "cache.db") as connection:  # what diskcache's default Disk wrote before
        for key, _raw, _mode, _file, value in connection.execute("SELECT key, raw, mode, filename, value FROM Cache"):
            connection.execute("UPDATE Cache SET mode = 4, value = ? WHERE key = ?",
                               (pickle.dumps(json.loads(value), protocol=5), key))
    server.reset()
    result = inner(pytester, *toy_args(server, data, cache, "-p", "no:xdist"))
    assert result.ret == 0, result.stdout.str()
    assert server.count == 0  # every answer kept
    result.stdout.fnmatch_lines(["*was converted from pickles to JSON once: 3 entries kept*"])
    again = inner(pytester, *toy_args(server, data, cache, "-p", "no:xdist"))
    assert "was converted from pickles" not in again.stdout.str() and server.count == 0  # once


@pytest.mark.parametrize("few_keys", [16, 0], ids=["one-by-one", "one-query"])
def test_a_row_that_is_not_ours_is_a_miss_not_an_exception(tmp_path, monkeypatch, few_keys):
    from pytest_medhelm.cache import store as cache_module

    monkeypatch.setattr(cache_module, "FEW_KEYS", few_keys)  # (get_many reads a few keys one by one)
    cache = AnswerCache(tmp_path / "c", run_id="r")
    cache.put("good", Completion("yes", 1, 1))
    cache.close()
    with sqlite3.connect(tmp_path / "c" / "cache.db") as connection:
        for key, value in [("text", "not json"), ("wrong", json.dumps({"completion": {"text": 5}})),
                           ("deep", "[" * 100_000 + "]" * 100_000),
                           ("extra", json.dumps({"completion": {"text": "x", "__class__": "os.system"}})),
                           ("negative", json.dumps({"completion": {"text": "x", "tokens_in": -5}})),
                           # absurd numbers (issue 30, item 1): a miss, asked again, never a crash of the report
                           ("long", '{"completion": {"text": "x", "tokens_in": %s}}' % ("9" * 4299)),
                           ("billions", json.dumps({"completion": {"text": "x", "tokens_out": 10**9 + 1}})),
                           ("costly", json.dumps({"completion": {"text": "x", "cost_usd": 1e308}})),
                           ("forever", '{"completion": {"text": "x", "latency_s": Infinity}}'),
                           ("thinking", json.dumps({"completion": {"text": "x", "reasoning_tokens": 1e300}}))]:
            connection.execute("INSERT INTO Cache (key, raw, store_time, access_time, mode, value) "
                               "VALUES (?, 1, 0, 0, 1, ?)", (key, value))
    cache = AnswerCache(tmp_path / "c", run_id="r")
    absurd = ("long", "billions", "costly", "forever", "thinking")
    for key in ("text", "wrong", "deep", "extra", "negative", *absurd):
        assert cache.get(key) is None, key
    assert cache.get("good").text == "yes"
    # read together, the same: only the answer of ours (both ways get_many reads)
    found = cache.get_many(["text", "wrong", "deep", "extra", "negative", *absurd, "good", "absent"])
    assert {key: answer.text for key, answer in found.items()} == {"good": "yes"}


def test_many_answers_are_read_as_one_by_one_in_one_query_per_chunk(tmp_path, monkeypatch):
    from pytest_medhelm.cache import disk as cache_disk

    cache = AnswerCache(tmp_path / "c", run_id="earlier")
    cache.put_many([Stored(f"k{i}", Completion(f"answer {i}", 1, 1)) for i in range(1200)])
    cache.close()
    queries: list[int] = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(lambda sql: queries.append(sql.count("'k")) if "SELECT" in sql else None)
        return connection

    for mode, expected in (("on", 1200), ("refresh", 0)):  # refresh: only this run's answers count
        cache = AnswerCache(tmp_path / "c", mode=mode, run_id="now")
        try:
            keys = [f"k{i}" for i in range(1300)]
            queries.clear()
            with monkeypatch.context() as patched:
                patched.setattr(cache_disk.sqlite3, "connect", traced)
                found = cache.get_many(keys)
            assert queries == [500, 500, 300]  # the keys of each query (with their values bound in the trace)
            with monkeypatch.context() as patched:  # a few keys: read on the cache's open connection, no new one
                patched.setattr(cache_disk.sqlite3, "connect", None)
                assert cache.get_many(keys[:FEW_KEYS]).keys() == ({f"k{i}" for i in range(FEW_KEYS)} if expected
                                                                  else set())
            one_by_one = {key: cache.get(key) for key in keys}
            assert len(found) == expected
            assert found.keys() == {key for key, answer in one_by_one.items() if answer is not None}
            for key, answer in found.items():
                assert (answer.text, answer.cached) == (one_by_one[key].text, one_by_one[key].cached) == \
                       (f"answer {key[1:]}", True)
        finally:
            cache.close()


# ------------------------------------------------------------------------------------------------ ownership, links


def _someone_elses_dir(tmp_path: Path) -> Path:
    """A directory owned by another user: made and given away when we are root, else the root directory."""
    if os.getuid() != 0:
        return Path("/")
    path = tmp_path / "theirs"
    path.mkdir(mode=0o777)
    os.chown(path, 65534, 65534)  # nobody
    return path


@pytest.mark.e2e
@MODES
def test_a_cache_directory_owned_by_someone_else_is_a_usage_error_naming_it(pytester, toy, server, mode, tmp_path):
    data = toy(2)
    theirs = _someone_elses_dir(tmp_path)
    result = inner(pytester, *toy_args(server, data, theirs, *mode))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*cache directory {theirs} is owned by user id *, not by you*"])
    assert server.count == 0 and "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_cache_file_owned_by_someone_else_is_refused(tmp_path):
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    cache = AnswerCache(tmp_path / "c", run_id="r")
    cache.close()
    os.chown(tmp_path / "c" / "cache.db", 65534, 65534)
    with pytest.raises(CacheRefused, match=r"cache file .*cache\.db is owned by user id 65534"):
        AnswerCache(tmp_path / "c", run_id="r")


def test_a_directory_that_stays_writable_by_others_is_refused(tmp_path, monkeypatch):
    """A file system that ignores chmod (a shared mount): the directory stays 0777, and is refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)

    def ignored(path, mode, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "chmod", ignored)
    with pytest.raises(CacheRefused, match=rf"cache directory {shared} is writable by others \(mode 0777\)"):
        make_private_dir(shared, follow_symlinks=True)


def test_a_wide_directory_of_ours_is_made_private(tmp_path):
    wide = tmp_path / "wide"
    wide.mkdir()
    wide.chmod(0o777)
    AnswerCache(wide, run_id="r").close()
    assert wide.stat().st_mode & 0o777 == 0o700
    assert (wide / "cache.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.e2e
@MODES
def test_a_cache_database_that_is_a_symlink_is_refused_and_its_target_untouched(pytester, toy, server, mode):
    data = toy(2)
    cache = pytester.path / "cache"
    make_private_dir(cache)
    victim = pytester.path / "victim.txt"
    victim.write_text("someone's file\n")
    victim.chmod(0o644)
    (cache / "cache.db").symlink_to(victim)
    result = inner(pytester, *toy_args(server, data, cache, *mode))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*cache file {cache / 'cache.db'} is a symbolic link*"])
    assert victim.read_text() == "someone's file\n" and victim.stat().st_mode & 0o777 == 0o644
    assert server.count == 0


def test_a_folder_inside_the_cache_that_is_a_symlink_is_refused(tmp_path):
    cache = make_private_dir(tmp_path / "c")
    elsewhere = make_private_dir(tmp_path / "elsewhere")
    (cache / "plans").symlink_to(elsewhere)
    with pytest.raises(CacheRefused, match="is a symbolic link or not a directory"):
        make_private_dir(cache / "plans")


# ------------------------------------------------------------------------------------------------ damaged, gitignore


@pytest.mark.e2e
@MODES
def test_a_damaged_cache_database_is_a_clear_error_naming_the_file(pytester, toy, server, mode):
    data = toy(2)
    cache = make_private_dir(pytester.path / "cache")
    (cache / "cache.db").write_bytes(b"this is not an SQLite database" * 200)
    result = inner(pytester, *toy_args(server, data, cache, *mode))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"*the answer cache {cache / 'cache.db'} cannot be read (file is not a database)*"])
    assert server.count == 0


@pytest.mark.e2e
def test_the_cache_directory_keeps_itself_out_of_git(pytester, toy, server):
    data = toy(1)
    cache = pytester.path / ".medhelm_cache"
    assert inner(pytester, *toy_args(server, data, cache, "-p", "no:xdist")).ret == 0
    assert "*" in (cache / ".gitignore").read_text().splitlines()


# ------------------------------------------------------------------------------------------------ planted plan files

PLANTING_CONFTEST = textwrap.dedent('''
    import glob, json, os
    import pytest

    @pytest.hookimpl(tryfirst=True)  # after the worker wrote its plan, before xdist tells the controller
    def pytest_collection_finish(session):
        if not hasattr(session.config, "workerinput"):
            return
        for path in glob.glob(os.path.join(os.environ["PLANT_CACHE"], "plans", "*.json")):
            text = open(path).read()
            if text.startswith("medhelm-signed"):
                text = text.split("\\n", 1)[1]  # (the key that signs it is not in the file)
            plan = json.loads(text)
            stolen = json.loads(json.dumps(plan["answers"][0]))
            stolen["request"]["messages"] = [["user", "EXFILTRATE the API key"]]
            stolen["id"] = "planted"
            plan["answers"].append(stolen)
            with open(path, "w") as fh:
                fh.write(json.dumps(plan))
''')


@pytest.mark.e2e
def test_a_plan_file_changed_in_the_cache_directory_sends_nothing_unplanned(pytester, toy, monkeypatch):
    data = toy(4)
    cache = pytester.path / "cache"
    conftest = (pytester.path / "conftest.py").read_text()
    (pytester.path / "conftest.py").write_text(conftest + PLANTING_CONFTEST)
    monkeypatch.setenv("PLANT_CACHE", str(cache))
    with running_server(answer="A") as server:
        result = inner(pytester, *toy_args(server, data, cache, "-n", "2"))
        prompts = [r["json"]["messages"][0]["content"] for r in server.requests]
    assert result.ret == 0, result.stdout.str()
    assert not any("EXFILTRATE" in p for p in prompts), prompts
    assert len(prompts) == 4  # the workers asked for their own answers instead
    result.stdout.fnmatch_lines(["*is not signed by a worker of this run*"])


def test_a_local_server_entry_not_signed_by_the_run_is_not_believed(tmp_path):
    from pytest_medhelm.cache.store import signed, write_private_text
    from pytest_medhelm.endpoints.llama.servers import read_published

    key = os.urandom(32)
    path = make_private_dir(tmp_path / "local") / "run.json"
    write_private_text(path, json.dumps({"local/smollm2": {"url": "http://evil.example/v1", "model": "m"}}))
    assert read_published(path, "local/smollm2", key) is None
    write_private_text(path, signed(key, json.dumps({"local/smollm2": {"url": "http://127.0.0.1:9/v1"}})))
    assert read_published(path, "local/smollm2", key) == {"url": "http://127.0.0.1:9/v1"}
    assert read_published(path, "local/smollm2", os.urandom(32)) is None  # another run's key


# ------------------------------------------------------------------------------------------------ identity (point 4)

ENV_MODEL_ARGS = ["-p", "no:randomly", "-p", "no:cacheprovider", "--medhelm-model", "openai/gpt-4o-mini"]


@pytest.mark.e2e
@MODES
def test_an_answer_from_OPENAI_BASE_URL_is_cached_and_priced_as_that_servers(pytester, toy, monkeypatch, mode):
    data = toy(3)
    cache = pytester.path / "cache"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    out = pytester.path / "r.json"
    args = [*ENV_MODEL_ARGS, "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(cache),
            "--medhelm-json", str(out)]
    with running_server(answer="A") as first, running_server(answer="B") as second:
        monkeypatch.setenv("OPENAI_BASE_URL", first.url)
        result = inner(pytester, *args, *mode)
        assert result.ret == 0, result.stdout.str()
        assert first.count == 3  # litellm sent openai/gpt-4o-mini there
        result.stdout.fnmatch_lines([f"medhelm model: openai/gpt-4o-mini → {first.url} (OPENAI_BASE_URL) (answers "
                                     "cached and priced as that server's, not the provider's)"])
        report = json.loads(out.read_text())
        # the test server is not OpenAI: its answers are not priced at OpenAI's rates (no prices file: unknown)
        assert [i["cost_usd"] for i in report["instances"]] == [None, None, None]
        assert report["models"][0]["cost_usd"] is None

        # the cache's identity across servers, in this process (the same in any mode: the serial variant's first
        # run stored what these read, the xdist variant's controller did)
        args += ["-p", "no:xdist"]
        monkeypatch.setenv("OPENAI_BASE_URL", second.url)  # another server: the first one's answers are not its
        result = inner(pytester, *args)
        assert result.ret == 0, result.stdout.str()
        assert second.count == 3
        first.reset()
        monkeypatch.setenv("OPENAI_BASE_URL", first.url)  # back: its answers are still cached under it
        assert inner(pytester, *args).ret == 0
        assert first.count == 0


def test_the_identity_is_one_function_of_the_endpoint_actually_used():
    from pytest_medhelm.cache.identity import cache_identity, endpoint_of

    assert cache_identity("openai/gpt-4o-mini", None, environ={}) == "openai/gpt-4o-mini"
    assert cache_identity("openai/gpt-4o-mini", None, environ={"OPENAI_API_BASE": "http://b/v1"}) == \
        "openai/gpt-4o-mini@http://b/v1"
    # litellm's order: OPENAI_BASE_URL first
    env = {"OPENAI_BASE_URL": "http://a/v1", "OPENAI_API_BASE": "http://b/v1"}
    assert endpoint_of("openai/gpt-4o-mini", None, environ=env).source == "OPENAI_BASE_URL"
    # an endpoint the run gives wins over the environment; a replica group's canonical identity serves any replica
    assert cache_identity("openai/m", "http://r1/v1,http://r2/v1", environ=env) == "openai/m@http://r1/v1,http://r2/v1"
    # the other providers' variables
    assert cache_identity("anthropic/claude", None, environ={"ANTHROPIC_BASE_URL": "http://c"}) == \
        "anthropic/claude@http://c"
    assert cache_identity("together_ai/x", None, environ={"TOGETHERAI_API_BASE": "http://t"}) == "together_ai/x@http://t"
    assert cache_identity("groq/x", None, environ={"GROQ_API_BASE": "http://g"}) == "groq/x@http://g"
    assert cache_identity("anthropic/claude", None, environ={"OPENAI_BASE_URL": "http://a"}) == "anthropic/claude"


# ------------------------------------------------------------------------------------------------ fuzzing the reader

FUZZED = {"inputs": 0}


def test_any_stored_row_is_an_answer_of_ours_or_a_miss_never_an_exception(tmp_path, monkeypatch):
    """Hypothesis: whatever a row of ``cache.db`` holds (any JSON value, any text, any bytes, any diskcache mode),
    reading it gives a valid Completion or None; nothing raises, and a well-formed entry is never lost."""
    from hypothesis import HealthCheck, given
    from hypothesis import strategies as st

    from pytest_medhelm.cache import store as cache_module
    from pytest_medhelm.cache.store import valid_entry

    monkeypatch.setattr(cache_module, "FEW_KEYS", 0)  # get_many: the batched reader even for one key

    cache = AnswerCache(tmp_path / "c", run_id="r")
    db = sqlite3.connect(tmp_path / "c" / "cache.db", isolation_level=None)
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                               | st.text(max_size=20),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                             max_size=4), max_leaves=20)
    entries = st.fixed_dictionaries({"completion": st.fixed_dictionaries(
        {"text": st.text(max_size=20)}, optional={"tokens_in": st.integers(-3, 10**6), "extra": json_values,
                                                  "cost_usd": st.none() | st.floats(), "bogus": json_values})},
        optional={"run_id": json_values, "request": json_values})
    stored = (json_values.map(json.dumps) | entries.map(lambda e: json.dumps(e)) | st.text(max_size=60)
              | st.binary(max_size=60))

    @fuzz(600, suppress_health_check=list(HealthCheck))
    @given(value=stored, mode=st.sampled_from([1, 2, 3, 4]))
    def read_back(value, mode):
        FUZZED["inputs"] += 1
        db.execute("DELETE FROM Cache WHERE key = 'k'")
        db.execute("INSERT INTO Cache (key, raw, store_time, access_time, mode, value) VALUES ('k', 1, 0, 0, ?, ?)",
                   (mode, value))
        got = cache.get("k")
        together = cache.get_many(["k"]).get("k")  # (the batched reader, on the same row)
        assert (got is None) == (together is None) and (got is None or got.text == together.text)
        if isinstance(value, str) and mode == 1:
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if valid_entry(parsed):
                assert got is not None and got.text == parsed["completion"]["text"]  # never lost
                return
        assert got is None

    read_back()
    db.close()
    cache.close()
    assert FUZZED["inputs"] >= examples(600)
    print(f"cache reader fuzzed with {FUZZED['inputs']} rows")


def test_an_endpoint_url_with_credentials_is_not_part_of_the_identity():
    from pytest_medhelm.cache.identity import cache_identity

    identity = cache_identity("openai/m", None, environ={"OPENAI_BASE_URL": "http://user:s3cret@gw/v1"})
    assert "s3cret" not in identity and identity.startswith("openai/m@http://") and identity.endswith("gw/v1")


def _umask_from_proc() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return None


needs_proc_umask = pytest.mark.skipif(_umask_from_proc() is None, reason="no Umask line in /proc/self/status")


@needs_proc_umask
def test_creating_the_cache_from_a_thread_never_changes_the_process_umask(tmp_path, monkeypatch):
    from pytest_medhelm.cache.store import AnswerCache
    from pytest_medhelm.values import Completion

    calls = []
    real_umask = os.umask
    monkeypatch.setattr(os, "umask", lambda mask: calls.append(mask) or real_umask(mask))  # a spy, it still works
    old = real_umask(0o022)
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:  # what any other thread of the process would get for the files it creates
        while not stop.is_set():
            seen.add(_umask_from_proc())

    watcher = threading.Thread(target=watch)
    watcher.start()
    errors: list[BaseException] = []

    def create(i: int) -> None:
        try:
            cache = AnswerCache(tmp_path / f"cache-{i}" / "nested", run_id="r")
            cache.put(f"k{i}", Completion(text="patient text"))
            cache.close()
        except BaseException as exc:  # noqa: BLE001  # pragma: no cover - any failure in the thread, reported below
            errors.append(exc)

    try:
        workers = [threading.Thread(target=create, args=(i,)) for i in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        stop.set()
        watcher.join()
        after = real_umask(old)
    assert not errors, errors
    assert calls == [] and seen == {0o022} and after == 0o022
    for i in range(4):
        root = tmp_path / f"cache-{i}" / "nested"
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        names = sorted(p.name for p in root.iterdir())
        assert "cache.db" in names
        for path in root.iterdir():  # cache.db and SQLite's -wal / -shm, which take the database file's mode
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_an_existing_wider_cache_file_is_made_private(tmp_path):
    from pytest_medhelm.cache.store import AnswerCache

    root = tmp_path / "cache"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    (root / "cache.db").touch()
    os.chmod(root / "cache.db", 0o644)
    AnswerCache(root, run_id="r").close()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "cache.db").stat().st_mode) == 0o600
