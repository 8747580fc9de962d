"""``--medhelm-batch`` against a hostile or broken Batch API (issue 30): a batch's paid answers are never lost and
never bought twice. Each fault is configuration of the test server's batch service
(pytest_medhelm.testing.server.batches: ``content_failures``, ``outcome="in_progress"``, ``status_padding``,
``line_faults``, ``foreign_lines``); the plugin runs end to end, in-process (pytester_runs.run), and under
``-n 2`` where the controller's part differs (it submits, polls and says the wait)."""

from __future__ import annotations

import json

import pytest
import test_batching
from pytester_runs import run as inner
from test_batching import XDIST, results, scores

from pytest_medhelm.sending.batch_api import REPLY_MAX_BYTES
from pytest_medhelm.testing.server import batch_stats, configure_batches

fast_polls = test_batching.fast_polls  # (test_batch's fixtures, used here too: fast polls, the toy project's arguments)
project = test_batching.project

pytestmark = pytest.mark.e2e


def records(pytester) -> list:
    folder = pytester.path / "cache" / "batches"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def errors_of(pytester, name: str) -> dict[str, str]:
    return {i["instance_id"]: i["error"] for i in results(pytester, name)["instances"] if i["error"]}


def collected_again(pytester, server, project, batch_id: str, *extra: str) -> None:
    """The same command once the fault is gone: the batch is collected, not submitted again, nothing asked
    directly, every item answered, the record gone."""
    again = inner(pytester, *project("cache", "again.json", "--medhelm-batch", *extra))
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert batch_stats(server.url)["batch_ids"] == [batch_id] and server.count == 0  # not paid twice
    again.stdout.fnmatch_lines([f"medhelm batch {batch_id}: submitted by an earlier run, collected (* request(s), "
                                "not submitted again)"])
    assert sorted(scores(results(pytester, "again.json")).values()) == [0.0] * 5 + [1.0] * 5
    assert records(pytester) == []


@XDIST
def test_a_results_download_that_fails_through_the_retries_keeps_the_record_and_the_next_run_collects_it(
        pytester, server, project, xdist):
    configure_batches(server.url, content_failures=10**6)  # 502 for every download of the output file
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch", "--medhelm-retries", "1"), *xdist)
    assert run.ret == 1, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    assert batch_stats(server.url)["downloads_failed"] == 2  # the first try and its one retry
    errors = errors_of(pytester, "out.json")
    assert len(errors) == 10
    assert all("its results file file-" in e and "could not be read" in e and "Bad gateway" in e
               and "its id is kept in the cache directory: the same command collects it" in e
               for e in errors.values()), errors
    assert len(records(pytester)) == 1  # kept: its answers are paid for
    run.stdout.fnmatch_lines([f"medhelm batch {batch_id}: kept in the cache directory (its results could not all "
                              "be read): the same command collects it, not submitted again (its record: *"])

    configure_batches(server.url, content_failures=0)
    collected_again(pytester, server, project, batch_id, *xdist)


def test_a_results_file_over_its_bound_keeps_the_record_with_a_message_naming_the_bound(pytester, server, project):
    server.set_answer("word " * 20_000)  # every line 100 kB, for requests of max_tokens=1: the file is over its bound
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    errors = errors_of(pytester, "out.json")
    assert len(errors) == 10
    assert all("/content is over " in e and "bytes, the bound of a results file, the most its requests' max_tokens "
               "allow: not read" in e and "its id is kept" in e for e in errors.values()), errors
    assert len(records(pytester)) == 1

    again = inner(pytester, *project("cache", "again.json", "--medhelm-batch"))  # collected, not submitted again
    assert batch_stats(server.url)["batch_ids"] == [batch_id] and again.ret == 1
    again.stdout.fnmatch_lines([f"medhelm batch {batch_id}: submitted by an earlier run, collected *"])


@pytest.mark.parametrize("fault, why", [
    ("nested", "a result line is nested too deeply to be read (not an answer)"),
    ("other_model", "the result line answers for model 'someone-else', not 'writer', the model of this batch's "
                    "requests: refused (not an answer)"),
    ("duplicate", "its custom_id is on 2 lines of the batch's results (a duplicate): refused, no line of it is "
                  "taken as its answer"),
    ("not_object", "no result line for this request"),
])
def test_one_bad_line_fails_its_own_item_only_every_other_answer_is_stored_and_a_rerun_asks_only_for_it(
        pytester, server, project, fault, why):
    configure_batches(server.url, line_faults={"question 3?": fault})
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    errors = errors_of(pytester, "out.json")
    assert list(errors) == ["q003"] and why in errors["q003"], errors
    assert records(pytester) == []  # done: every good line stored, the bad one its item's error
    if fault == "duplicate":
        assert "DUPLICATE" not in json.dumps(results(pytester, "out.json"))  # no silent pick of either line
        run.stdout.fnmatch_lines([f"medhelm batch {batch_id}: custom_id * is on more than one result line (a "
                                  "duplicate): refused, its item is an error"])

    configure_batches(server.url, line_faults={})
    again = inner(pytester, *project("cache", "again.json", "--medhelm-batch"))
    assert again.ret == 0, again.stdout.str()[-3000:]
    stats = batch_stats(server.url)  # the 9 answers came from the cache; only q003's request went again
    assert stats["batches_created"] == 2 and len(stats["lines"]) == 11 and server.count == 0
    assert "submitted by an earlier run" not in again.stdout.str()
    assert sorted(scores(results(pytester, "again.json")).values()) == [0.0] * 5 + [1.0] * 5


def test_lines_for_requests_the_batch_did_not_submit_are_refused_and_said(pytester, server, project):
    configure_batches(server.url, foreign_lines=3)
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 0, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    run.stdout.fnmatch_lines([f"medhelm batch {batch_id}: a result line names a request this batch did not hold: "
                              "custom_id 'foreign-0'"])
    assert not errors_of(pytester, "out.json") and records(pytester) == []


@XDIST
def test_a_batch_that_never_ends_stops_the_wait_at_the_batch_timeout_and_the_next_run_collects_it(
        pytester, server, project, xdist):
    configure_batches(server.url, outcome="in_progress")
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch", "--medhelm-batch-timeout", "1.5"), *xdist)
    assert run.ret == 1, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    message = (f"batch {batch_id} is still in_progress after 1.5 s, the --medhelm-batch-timeout: no longer waited "
               "for; its id is kept in the cache directory: the same command collects it (not submitted again)")
    errors = errors_of(pytester, "out.json")
    assert len(errors) == 10 and all(message in e for e in errors.values()), errors
    assert len(records(pytester)) == 1
    run.stdout.fnmatch_lines([f"medhelm {message}"])
    if xdist:  # the controller says what it waits for, as it starts
        run.stdout.fnmatch_lines([f"medhelm batch {batch_id}: waiting for its 10 result(s) from openai/writer, at most "
                                  "1.5 s (--medhelm-batch-timeout)"])

    configure_batches(server.url, outcome="completed")  # the provider finishes it meanwhile
    collected_again(pytester, server, project, batch_id, *xdist)


def test_the_batch_timeout_is_an_option_and_an_ini_key_and_a_bad_value_is_a_usage_error(pytester, project):
    bad = inner(pytester, *project("cache", "out.json", "--medhelm-batch", "--medhelm-batch-timeout", "0"))
    assert bad.ret == 4
    bad.stderr.fnmatch_lines(["*--medhelm-batch-timeout*expected a number > 0, got 0*"])
    pytester.makeini("[pytest]\nmedhelm_batch_timeout = soon\n")
    bad_ini = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert bad_ini.ret == 4 and "medhelm_batch_timeout" in bad_ini.stderr.str() + bad_ini.stdout.str()


def test_a_status_reply_over_its_bound_is_not_read_whole_and_the_batch_stays_collectable(pytester, server, project):
    padding = 300 * 1024 * 1024
    configure_batches(server.url, status_padding=padding)
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    [batch_id] = batch_stats(server.url)["batch_ids"]
    # the client hung up past its bound: what reached the socket is the bound and the buffers, not 300 MB
    assert batch_stats(server.url)["status_bytes_sent"] < 10 * REPLY_MAX_BYTES
    errors = errors_of(pytester, "out.json")
    assert len(errors) == 10 and all(
        f"the reply of GET {server.url}/batches/{batch_id} is over {REPLY_MAX_BYTES:,} bytes, the bound of a File or "
        "Batch object: not read" in e and "its id is kept in the cache directory" in e for e in errors.values()), errors
    assert len(records(pytester)) == 1

    configure_batches(server.url, status_padding=0)
    collected_again(pytester, server, project, batch_id)


def test_an_upload_reply_over_its_bound_is_not_read_whole_and_nothing_is_submitted(pytester, server, project):
    configure_batches(server.url, upload_padding=64 * 1024 * 1024)
    run = inner(pytester, *project("cache", "out.json", "--medhelm-batch"))
    assert run.ret == 1, run.stdout.str()[-3000:]
    stats = batch_stats(server.url)
    assert stats["batches_created"] == 0 and records(pytester) == []  # nothing submitted: nothing paid, no record
    assert stats["status_bytes_sent"] < 10 * REPLY_MAX_BYTES  # the client hung up past its bound
    errors = errors_of(pytester, "out.json")
    assert len(errors) == 10 and all(
        f"the batch could not be submitted: the reply of POST {server.url}/files is over {REPLY_MAX_BYTES:,} bytes, "
        "the bound of a File or Batch object: not read" in e for e in errors.values()), errors
