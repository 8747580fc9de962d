"""Data files under --medhelm-data-dir are checked against their pinned sha256 by every run.

A benchmark whose file differs from its pin errors (E) with a message naming the file and both checksums, before
anything is sent for it; ``--medhelm-data-unverified SLUG`` (or the ini key) accepts that version and the results
JSON records it as ``run.data_unverified``. Files without a pin are not checked. Through pytester with a toy
benchmark whose file is pinned (the check is the same for every benchmark), serially and under xdist; and the 13
public benchmarks of ../shared/data all match their pins.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST, TOY_TEST, toy_rows

from pytest_medhelm.data.verification import DataVerification, file_sha256

ROWS = json.dumps(toy_rows(4))
PINNED = hashlib.sha256(ROWS.encode()).hexdigest()
PINNED_CONFTEST = TOY_CONFTEST.replace('DataFile("toy.json", description="toy questions")',
                                       f'DataFile("toy.json", sha256="{PINNED}", description="toy questions")')


@pytest.fixture
def pinned(pytester: pytest.Pytester):
    assert PINNED_CONFTEST != TOY_CONFTEST
    pytester.makeconftest(PINNED_CONFTEST)
    pytester.makepyfile(test_toy=TOY_TEST)
    data = pytester.path / "data"
    (data / "toy").mkdir(parents=True)
    return data


def run(pytester, server, data, *args):
    return pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                             "--medhelm-data-dir", str(data), *args)


XDIST = [pytest.param(["-p", "no:xdist"], id="serial"), pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)]


@pytest.mark.parametrize("xdist", XDIST)
def test_the_pinned_file_runs(pytester, server, pinned, xdist):
    (pinned / "toy" / "toy.json").write_text(ROWS)
    out = pytester.path / "r.json"
    result = run(pytester, server, pinned, "--medhelm-json", str(out), *xdist)
    assert result.ret == 0, result.stdout.str()
    assert json.loads(out.read_text())["run"]["data_unverified"] == {}


@pytest.mark.parametrize("xdist", XDIST)
def test_a_changed_file_is_an_error_naming_it_and_both_checksums(pytester, server, pinned, xdist):
    changed = ROWS.replace("question 3?", "question 3 (edited)?")
    (pinned / "toy" / "toy.json").write_text(changed)
    actual = hashlib.sha256(changed.encode()).hexdigest()
    result = run(pytester, server, pinned, *xdist)
    text = result.stdout.str()
    assert result.ret == 1, text
    result.assert_outcomes(errors=1)  # the benchmark's one collection-time placeholder item: no instance loads
    assert f"toy.json: sha256 {actual} differs from the pinned {PINNED}" in text
    assert "--medhelm-data-unverified toy" in text
    assert server.count == 0  # nothing was sent for data that is not the pinned data


@pytest.mark.parametrize("xdist", XDIST)
def test_an_accepted_version_runs_and_is_recorded(pytester, server, pinned, xdist):
    changed = json.dumps(toy_rows(6))
    (pinned / "toy" / "toy.json").write_text(changed)
    out = pytester.path / "r.json"
    result = run(pytester, server, pinned, "--medhelm-data-unverified", "toy", "--medhelm-json", str(out), *xdist)
    assert result.ret == 0, result.stdout.str()
    assert {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "missed")} == {"passed": 3, "missed": 3}
    record = json.loads(out.read_text())["run"]["data_unverified"]
    assert record == {"toy": {"toy.json": {"expected": PINNED, "actual": hashlib.sha256(changed.encode()).hexdigest()}}}


def test_the_ini_key_accepts_too_and_an_unknown_slug_is_a_usage_error(pytester, server, pinned):
    (pinned / "toy" / "toy.json").write_text(json.dumps(toy_rows(2)))
    pytester.makeini("[pytest]\nmedhelm_data_unverified =\n    toy\n")
    assert run(pytester, server, pinned).ret == 0
    result = run(pytester, server, pinned, "--medhelm-data-unverified", "toyy")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--medhelm-data-unverified 'toyy'*unknown benchmark*"])


def test_a_file_without_a_pin_is_not_checked(pytester, server, toy):
    data = toy(4)  # the plain toy benchmark: its file has no sha256
    result = pytester_runs.run(pytester, "--medhelm-model", "openai/toy-model", "--medhelm-api-base", server.url,
                               "--medhelm-data-dir", str(data))
    assert result.ret == 0


def test_the_public_data_matches_its_pins_and_hashing_is_cheap(shared_data, capsys):
    """Every pinned file of ../shared/data matches its pin; prints what hashing them all costs (measured)."""
    from pytest_medhelm.catalogue import builtin_benchmarks
    from pytest_medhelm.data import verification
    from pytest_medhelm.data.sources import resolve_files

    check = DataVerification()
    files = size = 0
    verification._HASHED.clear()
    started = time.perf_counter()
    for bench in builtin_benchmarks():
        if not (shared_data / bench.slug).is_dir():
            continue
        found = resolve_files(bench, shared_data, download=False, verification=check)  # raises on a mismatch
        pinned = [path for name, path in found.items()
                  if any(f.name == name and f.sha256 and not f.is_dir for f in bench.files)]
        files += len(pinned)
        size += sum(p.stat().st_size for p in pinned)
    elapsed = time.perf_counter() - started
    assert files >= 15 and check.record() == {}
    again = time.perf_counter()
    for resolved, _size, _mtime in list(verification._HASHED):
        file_sha256(Path(resolved))
    memo = time.perf_counter() - again
    with capsys.disabled():
        print(f"\ndata pins: {files} pinned files, {size / 1e6:.1f} MB checked in {elapsed:.3f} s "
              f"(again from the memo: {memo * 1000:.2f} ms)")


def test_the_list_shows_a_changed_file_as_an_error(pytester, server, pinned):
    (pinned / "toy" / "toy.json").write_text(json.dumps(toy_rows(3)))
    result = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(pinned))
    assert result.ret == 0
    text = result.stdout.str()
    assert f"differs from the pinned {PINNED}" in text, text
    accepted = pytester_runs.run(pytester, "--medhelm-list", "--medhelm-data-dir", str(pinned),
                                 "--medhelm-data-unverified", "toy")
    assert "differs from the pinned" not in accepted.stdout.str()
