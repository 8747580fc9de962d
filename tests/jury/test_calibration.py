"""Property tests (Hypothesis) of the two new readers of files from disk: calibration records
(``.medhelm/calibration/*.json``) and HealthBench's meta-evaluation rows (``healthbench_meta``). Nothing escapes but
the documented error (CalibrationError, DataError), a record read back is the one written, and a well-formed row
becomes an instance whose labels are the row's. ``EXAMPLES`` inputs per property in the whole suite, a share of
them in the fast tier (tests/fuzzing.py); the count tried is printed with ``-s``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fuzzing import fuzz
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from pytest_medhelm.catalogue.clinical_decision_support.healthbench_meta import read_rows
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.jury.calibration import (
    MAX_RECORD_BYTES,
    CalibrationError,
    CalibrationRecord,
    parse_record,
    read_record,
    write_record,
)

EXAMPLES = 300
TRIED: dict[str, int] = {}
FUZZ = fuzz(EXAMPLES, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TEMPLATE = "Conversation:\n<<conversation>>\nRubric item:\n<<rubric_item>>\n"

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                       max_size=4), max_leaves=12)
VALID = {"format": "pytest-medhelm calibration", "version": 1, "rater": "openai/g", "prompt_sha256": "a" * 64,
         "statistic": "macro_f1", "value": 0.7, "human": 0.6, "n": 10}
#: a valid record with one field replaced by anything, or dropped
mutated = st.builds(lambda key, value, drop: {k: v for k, v in {**VALID, key: value}.items()
                                             if not (drop and k == key)},
                    st.sampled_from([*VALID, "source", "created", "instrument"]), json_values, st.booleans())


def count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


@FUZZ
@given(st.one_of(json_values, mutated))
def test_a_calibration_record_is_read_or_refused(data):
    count("calibration record (JSON)")
    try:
        record = parse_record(data, "f.json")
    except CalibrationError as exc:
        assert str(exc).startswith("f.json: ")
        return
    assert math.isfinite(record.value) and record.n >= 0 and len(record.prompt_sha256) == 64
    assert record.calibrated == (record.human is not None and record.value >= record.human)


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_a_calibration_file_of_any_bytes_is_read_or_refused(tmp_path, raw):
    count("calibration file (bytes)")
    path = tmp_path / "r.json"
    path.write_bytes(raw)
    try:
        read_record(path)
    except CalibrationError as exc:
        assert str(path) in str(exc)


@FUZZ
@given(rater=st.text(min_size=1, max_size=60).filter(str.strip), value=st.floats(-1, 1),
       human=st.none() | st.floats(0, 1), n=st.integers(0, 10 ** 6),
       prompt=st.text("0123456789abcdef", min_size=64, max_size=64))
def test_a_written_record_reads_back_the_same(tmp_path, rater, value, human, n, prompt):
    count("calibration record (written, read back)")
    record = CalibrationRecord(rater=rater, prompt_sha256=prompt, statistic="icc3k", value=value, human=human, n=n,
                               created="2026-11-28T10:00:00+00:00")
    back = read_record(write_record(record, tmp_path))
    assert (back.rater, back.prompt_sha256, back.value, back.human, back.n) == (rater, prompt, value, human, n)


def test_a_huge_file_is_refused_unread(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_RECORD_BYTES + 1))
    with pytest.raises(CalibrationError, match="larger than"):
        read_record(path)


messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                           "content": st.text(max_size=40)}), min_size=1, max_size=3)
good_row = st.builds(lambda m, c, r, cat, labels: {"prompt": m, "completion": c, "rubric": r, "category": cat,
                                                    "binary_labels": labels,
                                                    "anonymized_physician_ids": [f"p{i}" for i in range(len(labels))]},
                     messages, st.text(max_size=40), st.text(max_size=40), st.text(max_size=20),
                     st.lists(st.booleans(), min_size=1, max_size=4))
any_row = st.one_of(good_row, json_values,
                    st.builds(lambda row, key, value: {**row, key: value}, good_row,
                              st.sampled_from(["prompt", "completion", "rubric", "category", "binary_labels",
                                               "anonymized_physician_ids"]), json_values))


@FUZZ
@given(st.lists(any_row, min_size=1, max_size=4))
def test_meta_eval_rows_become_instances_or_a_data_error(rows):
    count("meta-eval file (rows)")
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    try:
        loaded = read_rows(Path("meta.jsonl"), TEMPLATE, data=data)
    except DataError as exc:
        assert "meta.jsonl" in str(exc)
        return
    for instance, row in zip(loaded, rows):
        meta = instance.extra["meta"]
        assert meta["labels"] == row["binary_labels"] and len(meta["physicians"]) == len(row["binary_labels"])
        user = meta["messages"][-1]["content"]
        assert user.endswith(f"Rubric item:\n{row['rubric']}\n")


@FUZZ
@given(st.binary(max_size=200))
def test_meta_eval_bytes_become_instances_or_a_data_error(raw):
    count("meta-eval file (bytes)")
    try:
        read_rows(Path("meta.jsonl"), TEMPLATE, data=raw)
    except DataError:
        pass


def test_zz_report_the_inputs_tried():
    print(f"\ncalibration and meta-eval readers: {sum(TRIED.values())} inputs tried: {TRIED}")
