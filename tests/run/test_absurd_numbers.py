"""Numbers are bounded where they enter (issue 30, item 1): a reply, a cache entry or an item's record with absurd
usage numbers (``usage.prompt_tokens`` of ``1e308``, an integer of 4,299 digits, a cost of ``1e308``) costs its
own item only; the run writes its JSON (read back through the shipped schema) and exits as usual, and the next run
is unaffected.

Before the bound, such a reply was cached and the report stage died pricing it (``OverflowError: int too large to
convert to float``, an INTERNALERROR, no JSON), and every rerun died the same way from the cache with 0 requests
sent. The inner runs are in-process (pytester_runs.run) but for the xdist variants: a reply's numbers are read where
it arrives, by the same code in every mode (serial only); a cache entry's and a record's also under xdist, whose
controller reads and writes them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pytester_runs import run as inner
from toy_benchmark import TOY_CONFTEST, planted_records_test

from pytest_medhelm.report.records import SCHEMA_FILE, Results
from pytest_medhelm.testing.server import running_server

jsonschema = pytest.importorskip("jsonschema")

MODES = pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                         pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
#: a price for the toy model, so that the report stage multiplies every count by a float (where it overflowed)
PRICES = '["openai/toy-model"]\ninput_per_million = 2.5\noutput_per_million = 10.0\n'
LONG = int("9" * 4299)  # the longest integer Python reads from JSON by default


def args(pytester: pytest.Pytester, server, data: Path, *extra: str) -> list[str]:
    prices = pytester.path / "prices.toml"
    prices.write_text(PRICES)
    return ["-p", "no:randomly", "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
            "--medhelm-data-dir", str(data), "--medhelm-cache-dir", str(pytester.path / "cache"),
            "--medhelm-prices", str(prices), "--medhelm-json", str(pytester.path / "r.json"), *extra]


def results(pytester: pytest.Pytester, run: pytest.RunResult) -> dict:
    """The run's results file: written, fitting the shipped schema, read back through the models."""
    text = run.stdout.str() + run.stderr.str()
    assert "INTERNALERROR" not in text, text[-3000:]
    data = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert [error.message for error in validator.iter_errors(data)] == []
    Results.model_validate(data)
    return data


@pytest.mark.parametrize(("shape", "shown"), [("huge_usage", "1e+308"), ("long_usage", "an integer of 4,299 digits")])
def test_a_reply_with_absurd_usage_fails_its_item_and_is_never_cached(pytester, toy, shape, shown):
    data = toy(4)
    with running_server(answer="A", reply_shape=shape) as server:
        first = inner(pytester, *args(pytester, server, data, "-p", "no:xdist"))
        assert first.ret == pytest.ExitCode.TESTS_FAILED, first.stdout.str()[-3000:]
        first.stdout.fnmatch_lines([f"*malformed reply: usage.prompt_tokens is {shown}; expected an integer from 0 "
                                    "to 1,000,000,000*"])
        report = results(pytester, first)
        assert [b["n_errors"] for b in report["benchmarks"]] == [4]
        assert all("usage.prompt_tokens" in i["error"] for i in report["instances"])
        assert server.count == 4  # not retried: the same server would say the same
        server.configure(reply_shape="standard")
        # (what is checked is what the first run left out of the cache; this run asking anew shows it)
        again = inner(pytester, *args(pytester, server, data, "-p", "no:xdist"))
        assert again.ret == pytest.ExitCode.OK, again.stdout.str()[-3000:]
        assert server.count == 8  # nothing of the absurd replies was kept: each asked again
    report = results(pytester, again)
    assert [i["tokens_in"] > 0 and i["cost_usd"] > 0 for i in report["instances"]] == [True] * 4


def plant(db: Path, changes: list[dict]) -> None:
    """Rewrite the cache's answer entries, the i-th with ``changes[i]`` merged into its completion (what an
    earlier version, or someone who can write the cache, left there)."""
    with sqlite3.connect(db) as connection:
        keys = [key for (key,) in connection.execute("SELECT key FROM Cache ORDER BY key")]
        assert len(keys) >= len(changes)
        for key, change in zip(keys, changes):
            (value,) = connection.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
            entry = json.loads(value)
            entry["completion"].update(change)
            connection.execute("UPDATE Cache SET value = ? WHERE key = ?", (json.dumps(entry), key))


@MODES
def test_an_absurd_number_in_the_cache_is_a_miss_asked_again(pytester, toy, mode):
    data = toy(5)
    with running_server(answer="A") as server:
        assert inner(pytester, *args(pytester, server, data, "-p", "no:xdist")).ret == pytest.ExitCode.OK
        assert server.count == 5
        plant(pytester.path / "cache" / "cache.db", [{"tokens_in": LONG}, {"tokens_out": 10**9 + 1},
                                                     {"cost_usd": 1e308}, {"latency_s": 1e300}])
        server.reset()
        run = inner(pytester, *args(pytester, server, data, *mode))
        assert run.ret == pytest.ExitCode.OK, run.stdout.str()[-3000:]
        assert server.count == 4  # the four absurd entries were misses; the fifth a hit
        server.reset()
        again = inner(pytester, *args(pytester, server, data, *mode))
        assert again.ret == pytest.ExitCode.OK and server.count == 0  # the good answers were written back
    report = results(pytester, again)
    assert [i["cached"] for i in report["instances"]] == [True] * 5
    assert all(0 < i["tokens_in"] < 1000 and i["latency_s"] < 60 for i in report["instances"])


# an item's own code (a custom metric, a fixture) writing absurd numbers into its record
ABSURD_TEST = planted_records_test(
    '{"q001": {"tokens_in": 10 ** 5000, "cost_usd": 1e308},'
    ' "q002": {"latency_s": float("inf"), "metrics": {"jury_tokens_out": int("9" * 4299)}},'
    ' "q003": {"metrics": {"ratio": 10 ** 5000}}}')


@MODES
def test_whatever_one_record_holds_the_json_of_the_others_is_written(pytester, toy, mode):
    data = toy(5)
    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(test_toy=ABSURD_TEST)
    with running_server(answer="A") as server:
        run = inner(pytester, *args(pytester, server, data, *mode, "--medhelm-markdown", str(pytester.path / "r.md")))
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()[-3000:]
    report = results(pytester, run)
    assert (pytester.path / "r.md").is_file()
    records = {r["instance_id"]: r for r in report["instances"]}
    assert len(records) == 5 and [b["n"] for b in report["benchmarks"]] == [5]
    invalid = {key: records[key]["metrics"]["invalid_fields"] for key in ("q001", "q002")}
    assert "less than or equal to 1000000000000000" in invalid["q001"]["tokens_in"]
    assert "an integer of more than 4,300 digits" in invalid["q001"]["tokens_in"]
    assert "1e+308" in invalid["q001"]["cost_usd"] and "finite number" in invalid["q002"]["latency_s"]
    assert "an integer of 4,299 digits" in invalid["q002"]["jury_tokens_out"]
    assert records["q001"]["tokens_in"] is None and records["q001"]["cost_usd"] is None
    assert records["q001"]["score"] == 0.0 and records["q002"]["score"] == 1.0  # the measurements stand
    # a number JSON cannot carry inside a metric's values: null, and the record says where
    assert records["q003"]["metrics"]["ratio"] is None and records["q003"]["nan_fields"] == ["metrics.ratio"]
    [row] = report["models"]
    assert 0 < row["tokens_in"] < 1000 and 0 < row["cost_usd"] < 1  # the others' sums, priced
