"""A model's SQL cannot reach the run (issue 20, point 1): every attack scores its own item as a miss with the reason,
and the items after it, of EHRSQL and of a benchmark beside it, are unaffected; the sandbox's limits hold."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
import pytester_runs
from catalogue_helpers import entry, write_ehrsql
from pytester_runs import SHARED_DATA, SUITE

from pytest_medhelm.metrics.ehrsql import normalize_gold_sql
from pytest_medhelm.metrics.sql_sandbox import SandboxError, SqlSandbox

FORTY_ROWS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40)"
#: question (a substring of the prompt the test server matches) -> the attack the "model" answers, the reason shown
ATTACKS = {
    "attack heap limit": ("PRAGMA hard_heap_limit=100000", "PRAGMA hard_heap_limit"),
    "attack temp store": ("PRAGMA temp_store_directory='{tmp}'", "PRAGMA temp_store_directory"),
    "attack zeroblob": (f"{FORTY_ROWS} SELECT zeroblob(20000000) FROM c", "the function zeroblob()"),
    "attack pointer": ("SELECT fts3_tokenizer('simple')", "the function fts3_tokenizer()"),
}
COUNT = "SELECT COUNT(*) FROM patient"
PUBMEDQA = {str(1000 + i): {"QUESTION": f"Does treatment {i} help?", "CONTEXTS": ["We studied it."],
                            "LABELS": ["RESULTS"], "final_decision": "yes", "YEAR": "2001"} for i in range(6)}


def _write_data(data: Path) -> None:
    attacks = [entry(f"att{i}", question + "?", COUNT, {}) for i, question in enumerate(ATTACKS)]
    counts = [entry(f"cnt{i}", f"how many patients are there, asked {i} times?", COUNT, {}) for i in range(6)]
    write_ehrsql(data, valid=attacks, test=counts)
    (data / "pubmedqa").mkdir()
    (data / "pubmedqa" / "ori_pqal.json").write_text(json.dumps(PUBMEDQA), encoding="utf-8")


@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
def test_sql_attacks_miss_their_own_items_and_nothing_else(pytester: pytest.Pytester, xdist: list[str]) -> None:
    from pytest_medhelm.testing.server import running_server

    data = pytester.path / "data"
    _write_data(data)
    moved_temp = pytester.path / "moved-temp"
    moved_temp.mkdir()
    rules = {question: sql.format(tmp=moved_temp) for question, (sql, _) in ATTACKS.items()}
    rules.update({"how many patients": COUNT, "Does treatment": "A"})
    out = pytester.path / "results.json"
    with running_server(rules=rules) as server:
        run = pytester_runs.run(pytester, str(SUITE), "-rA", "--medhelm-model", "openai/x", "--medhelm-api-base",
                                server.url, "--medhelm-data-dir", str(data), "--medhelm-data-unverified", "ehrsql",
                                "--medhelm-data-unverified", "pubmedqa", "--medhelm-benchmark", "ehrsql",
                                "--medhelm-benchmark", "pubmedqa", "--medhelm-cache", "off", "--medhelm-json", str(out),
                                *xdist)
    text = run.stdout.str()
    assert run.ret == 0, text[-4000:]  # misses are measurements: no error, no traceback
    assert "MemoryError" not in text and "INTERNALERROR" not in text
    by_id = {(r["benchmark"], r["instance_id"]): r for r in json.loads(out.read_text())["instances"]}
    for i, (_, reason) in enumerate(ATTACKS.values()):
        record = by_id[("ehrsql", f"att{i}")]
        assert (record["score"], record["error"]) == (0.0, None), record
        assert record["metrics"]["ehr_sql_query_validity"] == 0.0
        assert f"query error: not allowed in the EHRSQL sandbox: {reason}" in text, reason
    for i in range(6):  # the items after the attacks, in this process or beside it
        assert by_id[("ehrsql", f"cnt{i}")]["score"] == 1.0, by_id[("ehrsql", f"cnt{i}")]
        assert by_id[("pubmedqa", str(1000 + i))]["score"] == 1.0, by_id[("pubmedqa", str(1000 + i))]
    assert list(moved_temp.iterdir()) == []


@pytest.fixture
def db(tmp_path: Path) -> Path:
    write_ehrsql(tmp_path, [], [])
    return tmp_path / "ehrsql" / "eicu.sqlite"


def test_the_sandbox_keeps_sqlite_settings_to_its_child(db: Path) -> None:
    sandbox = SqlSandbox()
    try:
        with pytest.raises(SandboxError, match="not allowed in the EHRSQL sandbox: PRAGMA hard_heap_limit"):
            sandbox.run(str(db), "PRAGMA hard_heap_limit=100000", 5, 100)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)]
        here = sqlite3.connect(":memory:")
        assert here.execute("PRAGMA hard_heap_limit").fetchone() == (0,)  # this process: untouched
        for refused in ("ATTACH DATABASE 'x.sqlite' AS x", "DELETE FROM patient", "SELECT load_extension('x')",
                        "SELECT randomblob(10)", "SELECT * FROM pragma_table_info('patient')",
                        "SELECT * FROM json_each('[1]')", "BEGIN", f"VACUUM INTO '{db.parent / 'copy.sqlite'}'"):
            with pytest.raises(SandboxError, match="not allowed in the EHRSQL sandbox"):
                sandbox.run(str(db), refused, 5, 100)
        assert not (db.parent / "copy.sqlite").exists()
    finally:
        sandbox.close()


def test_sql_text_sqlite_cannot_take_is_an_error_of_its_own(db: Path) -> None:
    sandbox = SqlSandbox()
    try:
        for text in ("SELECT 1\x00", "SELECT '\ud800'"):
            with pytest.raises(SandboxError, match="null character|surrogate"):
                sandbox.run(str(db), text, 5, 100)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)] and sandbox.started == 1
    finally:
        sandbox.close()


def test_value_length_and_result_bytes_are_capped(db: Path) -> None:
    sandbox = SqlSandbox()
    try:
        with pytest.raises(SandboxError, match="string or blob too big"):
            sandbox.run(str(db), f"{FORTY_ROWS} SELECT group_concat(printf('%.*c', 100000, 'x')) FROM c", 5, 100)
        many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)"
        with pytest.raises(SandboxError, match="a result larger than 10 MB"):
            sandbox.run(str(db), f"{many} SELECT printf('%.*c', 900000, 'x') FROM c", 5, 1000, max_bytes=10_000_000)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)]
    finally:
        sandbox.close()


def test_a_query_over_the_memory_limit_fails_alone_and_the_next_gets_a_fresh_child(db: Path) -> None:
    sandbox = SqlSandbox(memory_limit=300_000_000)
    rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 600)"
    try:  # 600 values of 900 KB: 540 MB, over the child's 300 MB (the bytes cap lifted for the test)
        with pytest.raises(SandboxError, match="memory limit of 300 MB"):
            sandbox.run(str(db), f"{rows} SELECT printf('%.*c', 900000, 'x') FROM c", 20, 1000, max_bytes=10**10)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)]
        assert sandbox.started == 2
    finally:
        sandbox.close()


def test_the_child_is_killed_at_its_deadline_and_replaced(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_medhelm.metrics.sql_sandbox as module

    monkeypatch.setattr(module, "GRACE_S", -0.9)  # the wall-clock deadline before SQLite's own interruption
    sandbox = SqlSandbox()
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    try:
        sandbox.run(str(db), COUNT, 5, 100)
        child = sandbox._proc
        with pytest.raises(SandboxError, match="time limit of 1 s exceeded .the query's process was killed"):
            sandbox.run(str(db), endless, 1, 100)
        assert child is not None and child.poll() is not None  # gone, not left running
        monkeypatch.setattr(module, "GRACE_S", 5.0)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)] and sandbox.started == 2
    finally:
        sandbox.close()


@pytest.mark.e2e
def test_the_child_ends_with_the_process_that_started_it(pytester: pytest.Pytester, db: Path) -> None:
    pytester.makepyfile(test_uses=f"""
        from pytest_medhelm.metrics.sql_sandbox import sandbox

        def test_query():
            assert sandbox().run({str(db)!r}, "SELECT 1", 5, 10) == [(1,)]
            print("CHILD", sandbox()._proc.pid)
    """)
    run = pytester_runs.run(pytester, "-s", subprocess=True)
    run.assert_outcomes(passed=1)
    pid = int(re.search(r"CHILD (\d+)", run.stdout.str()).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(not (SHARED_DATA / "ehrsql" / "eicu.sqlite").is_file(), reason="../shared/data/ehrsql absent")
def test_every_gold_query_of_the_real_data_runs_in_the_sandbox_as_it_runs_outside() -> None:
    db = SHARED_DATA / "ehrsql" / "eicu.sqlite"
    gold = [normalize_gold_sql(e["query"]) for e in json.loads((SHARED_DATA / "ehrsql" / "test.json").read_text())
            if e["query"] and e["query"] != "null"]
    outside = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sandbox = SqlSandbox()
    try:
        for sql in gold:
            try:
                expected: object = outside.execute(sql).fetchall()
            except sqlite3.Error as exc:
                expected = str(exc)
            try:
                got: object = sandbox.run(str(db), sql, 10, 200_000)
            except SandboxError as exc:
                got = str(exc)
            if "current_time" not in sql:  # (the clock moves between the two)
                assert got == expected, sql
    finally:
        sandbox.close()
    assert len(gold) > 1000


# ------------------------------------------------------------------------------------ issue 30, item 5: bounds
def test_a_distinct_over_a_recursive_cte_stays_in_memory_never_spills_to_temp_files(db: Path) -> None:
    """Temp b-trees stay in the child's memory (temp_store=MEMORY; no file may grow): a DISTINCT over 400,000 rows
    of 206 bytes (80 MB of keys) is refused at a 32 MB heap. Before, SQLite spilled it to temp files, which no
    memory limit bounds (the query then succeeded here; an endless one wrote 2.35 GB per query)."""
    sandbox = SqlSandbox(memory_limit=400_000_000, heap_limit=32_000_000)
    spilling = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000) "
                "SELECT COUNT(*) FROM (SELECT DISTINCT printf('%.*c', 200, 'x') || x FROM c)")
    try:
        with pytest.raises(SandboxError, match="memory limit of 400 MB was exceeded|out of memory"):
            sandbox.run(str(db), spilling, 30, 10**9, max_bytes=10**12)
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)]
    finally:
        sandbox.close()


#: DISTINCT over an endless recursive CTE: a temporary b-tree that grows until a limit stops it (2.35 GB of temp
#: files per query before temp storage was kept in memory)
DISTINCT_FOREVER = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                    "SELECT count(*) FROM (SELECT DISTINCT printf('%.*c', 200, 'y') || x FROM c)")


def _temp_file_bytes(pid: int, db: Path) -> int:
    """Bytes of the regular files the process holds open other than the database (SQLite unlinks its temp files
    as it opens them: they are only seen through /proc/PID/fd)."""
    import stat

    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            info = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # (closed meanwhile)
        if stat.S_ISREG(info.st_mode) and not target.startswith(str(db)) and "/python" not in target:
            total += info.st_size
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the child's open files in /proc")
def test_an_endless_distinct_is_refused_for_its_memory_with_no_temp_file_measured(db: Path) -> None:
    """What the child holds in temp files, measured through /proc while an endless DISTINCT runs: nothing (before
    temp storage was kept in memory, 686 MB in 10 s on a 2-core machine, and the time limit stopped it, not memory);
    the refusal names the heap limit that stopped it."""
    import threading
    import time

    sandbox = SqlSandbox(heap_limit=32_000_000)  # (the default 256 MB takes longer to fill, the same way)
    peak, done = [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            proc = sandbox._proc
            if proc is not None:
                try:
                    peak[0] = max(peak[0], _temp_file_bytes(proc.pid, db))
                except OSError:
                    pass
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        with pytest.raises(SandboxError, match=r"the memory limit of 768 MB was exceeded .* at most 32 MB"):
            sandbox.run(str(db), DISTINCT_FOREVER, 8, 100)
        took = time.monotonic() - started
        assert sandbox.run(str(db), COUNT, 5, 100) == [(2,)]  # a fresh child serves the next query
    finally:
        done.set()
        watcher.join()
        sandbox.close()
    assert peak[0] < 1_000_000, f"the child held {peak[0]:,} bytes of temp files"  # was 686 MB in 10 s here
    assert took < 8, f"refused after {took:.1f} s: the time limit, not the memory limit, stopped it"


def test_the_time_budget_of_a_process_ends_in_an_error_saying_so(db: Path) -> None:
    from pytest_medhelm.metrics.sql_sandbox import BudgetSpent

    sandbox = SqlSandbox(time_budget=0.5)
    slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
            "SELECT COUNT(*) FROM c")
    try:
        # the budget left is its limit: stopped by the budget, not by its own 10 s, it is no measurement either
        with pytest.raises(BudgetSpent, match=r"TIME_BUDGET_S\): the query was stopped when it ran out, before its "
                                              r"own limit of 10 s$"):
            sandbox.run(str(db), slow, 10, 100)
        with pytest.raises(BudgetSpent, match=r"time budget is spent \(\d+ s of queries in this process, the most "
                                              r"is 0 s: pytest_medhelm.metrics.sql_sandbox.TIME_BUDGET_S\)"):
            sandbox.run(str(db), COUNT, 5, 100)
    finally:
        sandbox.close()


def test_a_spent_budget_makes_the_item_an_error_not_a_wrong_answer(db: Path, monkeypatch) -> None:
    import pytest_medhelm.metrics.sql_sandbox as module
    from pytest_medhelm.metrics.base import ScoringError
    from pytest_medhelm.metrics.ehrsql import run_query

    spent = SqlSandbox(time_budget=0.0)
    monkeypatch.setattr(module, "sandbox", lambda: spent)
    with pytest.raises(ScoringError, match="time budget is spent"):
        run_query(db, COUNT)


def test_an_answer_whose_query_the_budget_stops_is_an_error_not_a_wrong_answer(db: Path, monkeypatch) -> None:
    """The query that runs out the budget is not scored as a wrong answer timed out (nor its item "not scored" when
    it is the gold query): its item is an error saying the budget ran out, as every later one's."""
    import dataclasses

    import pytest_medhelm.metrics.sql_sandbox as module
    from pytest_medhelm.metrics.base import ScoringError
    from pytest_medhelm.metrics.ehrsql import EHRSQL_EXECUTION_ACCURACY
    from pytest_medhelm.values import Instance

    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
    instance = Instance(id="q", input="how many patients?", references=(COUNT,), benchmark="ehrsql",
                        extra={"db_path": str(db), "is_impossible": False, "value": {}})
    for answer, gold in ((endless, COUNT), (COUNT, endless)):  # the answer's query stopped, then the gold's
        budgeted = SqlSandbox(time_budget=1.0)
        monkeypatch.setattr(module, "_SANDBOX", budgeted)
        try:
            with pytest.raises(ScoringError, match="stopped when it ran out, before its own limit of 10 s"):
                EHRSQL_EXECUTION_ACCURACY.score(answer, dataclasses.replace(instance, references=(gold,)))
            with pytest.raises(ScoringError, match="the query was not run"):
                EHRSQL_EXECUTION_ACCURACY.score(COUNT, instance)
        finally:
            budgeted.close()


def test_a_short_query_with_a_huge_result_gives_a_bounded_detail(db: Path) -> None:
    from pytest_medhelm.metrics.ehrsql import EHRSQL_EXECUTION_ACCURACY
    from pytest_medhelm.values import Instance

    instance = Instance(id="q", input="how many patients?", references=(COUNT,), benchmark="ehrsql",
                        extra={"db_path": str(db), "gold_sql": COUNT, "is_impossible": False, "value": {}})
    answer = "SELECT printf('%.*c', 3000000, 'x')"  # 36 characters, a 3 MB value
    score = EHRSQL_EXECUTION_ACCURACY.score(answer, instance)
    assert score.value == 0.0 and len(score.detail) < 1000, len(score.detail)
