"""Helpers shared by the catalogue tests (tests/test_catalogue_*.py): loading a benchmark from a data directory,
writing synthetic files in the upstream layout, and checking the real data against HELM's reference prompts.

Real data is read from ``../shared/data`` beside the repository when it exists (tests that need it skip otherwise).
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pytester_runs import SHARED_DATA

from pytest_medhelm.catalogue import builtin_benchmarks
from pytest_medhelm.data.sources import resolve_files
from pytest_medhelm.values import Instance, Loaded

REAL_DATA = SHARED_DATA
REFERENCE_PROMPTS = SHARED_DATA.parent / "reference" / "prompts"

BENCHMARKS = {b.slug: b for b in builtin_benchmarks()}

#: the task count the expansion rules of docs/taxonomy.md reach (the paper states 121)
EXPECTED_TASKS = 112


def build(slug: str, data_dir: Path) -> Any:
    """What the benchmark's loader returns on ``data_dir/<slug>/`` (never downloading)."""
    benchmark = BENCHMARKS[slug]
    return benchmark.build_instances(resolve_files(benchmark, data_dir, download=False))


def load(slug: str, data_dir: Path) -> list[Instance]:
    return list(build(slug, data_dir))


def loaded(slug: str, data_dir: Path) -> Loaded:
    """The loader's result, which must be a :class:`Loaded` (it counts what its filters removed)."""
    result = build(slug, data_dir)
    assert isinstance(result, Loaded)
    return result


def real(slug: str) -> Path:
    """The real data directory, or skip when it has no data for ``slug``."""
    if not (REAL_DATA / slug).is_dir():
        pytest.skip(f"no real data for {slug} under {REAL_DATA}")
    return REAL_DATA


def write(tmp_path: Path, slug: str, name: str, content: str | bytes) -> Path:
    """Write ``tmp_path/<slug>/<name>``; text goes out with ``newline=""``, so a fixture's ``\\r\\n`` stays."""
    path = tmp_path / slug / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
    return path


def csv_text(header: Sequence[Any], rows: Sequence[Sequence[Any]], newline: str = "\n", delimiter: str = ",") -> str:
    """A delimited file: a cell is quoted when it holds the delimiter, a quote or a line break (``None`` is empty),
    and a row of one empty cell is written ``""`` so that it is not a blank line (as ``csv.writer`` does)."""

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        if any(ch in text for ch in (delimiter, '"', "\r", "\n")):
            return '"' + text.replace('"', '""') + '"'
        return text

    def line(values: Sequence[Any]) -> str:
        cells = [cell(v) for v in values]
        return '""' if cells == [""] else delimiter.join(cells)

    return "".join(line(values) + newline for values in [header, *rows])


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def helm_first_index(n: int, cap: int | None = None) -> int:
    """Position of the first prompt HELM sends: the first of its seed-0 sample (when ``cap`` is None or below n),
    else 0 (an uncapped run sends the instances in order)."""
    if cap is not None and n <= cap:
        return 0
    return int(np.random.RandomState(0).permutation(n)[0])


def check_real_count_and_reference_prompt(slug: str, count: int, cap: int | None = None) -> list[Instance]:
    """On the real data: ``count`` instances with unique, id-friendly ids, and HELM's reference prompt (the first
    prompt of its run) rendered byte for byte by exactly one instance, at HELM's first sampled position."""
    reference = REFERENCE_PROMPTS / f"{slug}.txt"
    if not (REAL_DATA / slug).is_dir() or not reference.is_file():
        pytest.skip(f"no real data for {slug} under {REAL_DATA}")
    benchmark = BENCHMARKS[slug]
    instances = load(slug, REAL_DATA)
    assert len(instances) == count
    ids = [instance.id for instance in instances]
    assert len(set(ids)) == len(ids)
    assert all(i and " " not in i and len(i) <= 40 for i in ids)
    expected = reference.read_bytes()
    matching = [k for k, instance in enumerate(instances) if benchmark.render_prompt(instance).encode() == expected]
    assert len(matching) == 1
    assert matching[0] == helm_first_index(len(instances), cap)  # pins HELM's instance order
    return instances


def assert_missing_column(slug: str, data_dir: Path, path: Path, column: str, where: str = "header (line 1)") -> None:
    """Loading ``slug`` fails with a DataError naming ``path``, its header and the missing ``column``."""
    from pytest_medhelm.data.errors import DataError

    with pytest.raises(DataError) as info:
        load(slug, data_dir)
    assert (info.value.path, info.value.where) == (str(path), where)
    assert repr(column) in info.value.problem


SCHEMA = """DROP TABLE IF EXISTS patient;
CREATE TABLE patient
(
    uniquepid VARCHAR(10) NOT NULL,
    patientunitstayid INT NOT NULL PRIMARY KEY,
    age VARCHAR(10) NOT NULL,
    hospitaladmittime TIMESTAMP(0) NOT NULL
) ;

DROP TABLE IF EXISTS medication;
CREATE TABLE medication
(
    medicationid INT NOT NULL PRIMARY KEY,
    patientunitstayid INT NOT NULL,
    drugname VARCHAR(220) NOT NULL,
    routeadmin VARCHAR(120) NOT NULL,
    drugstarttime TIMESTAMP(0),
    FOREIGN KEY(patientunitstayid) REFERENCES patient(patientunitstayid)
) ;

DROP TABLE IF EXISTS vitalperiodic;
CREATE TABLE vitalperiodic
(
    vitalperiodicid BIGINT NOT NULL PRIMARY KEY,
    patientunitstayid INT NOT NULL,
    heartrate INT,
    observationtime TIMESTAMP(0) NOT NULL
) ;
"""


SCHEMA_IN_PROMPT = (
    "CREATE TABLE patient\n(\nuniquepid VARCHAR(10) NOT NULL,\npatientunitstayid INT NOT NULL PRIMARY KEY,\n"
    "age VARCHAR(10) NOT NULL,\nhospitaladmittime TIMESTAMP(0) NOT NULL\n) ;\n\n"
    "CREATE TABLE medication\n(\nmedicationid INT NOT NULL PRIMARY KEY,\npatientunitstayid INT NOT NULL,\n"
    "drugname VARCHAR(220) NOT NULL,\nrouteadmin VARCHAR(120) NOT NULL,\ndrugstarttime TIMESTAMP(0),\n"
    "FOREIGN KEY(patientunitstayid) REFERENCES patient(patientunitstayid)\n) ;\n\n"
    "CREATE TABLE vitalperiodic\n(\nvitalperiodicid BIGINT NOT NULL PRIMARY KEY,\npatientunitstayid INT NOT NULL,\n"
    "heartrate INT,\nobservationtime TIMESTAMP(0) NOT NULL\n) ;"
)


ROWS = {
    "patient": [("001-1", 10, "60", "2104-05-01 10:00:00"), ("001-2", 20, "45", "2103-02-01 09:00:00")],
    "medication": [
        (1, 10, "aspirin 81 mg", "po", "2104-05-02 08:00:00"),
        (2, 10, "heparin", "iv", "2104-05-03 08:00:00"),
        (3, 20, "aspirin 81 mg", "po", "2103-02-02 08:00:00"),
    ],
    "vitalperiodic": [(1, 10, 72, "2104-05-01 11:00:00"), (2, 10, 130, "2104-05-01 12:00:00")],
}


def make_database(path: Path, schema: str = SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    with con:
        con.executescript(schema)
        for table, rows in ROWS.items():
            con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.close()
    return path


def entry(entry_id: str, question: str, query: str, value: dict | None = None, impossible: bool = False) -> dict:
    record = {"db_id": "eicu", "question": question, "query": query, "is_impossible": impossible, "id": entry_id,
              "split": "x"}
    if value is not None:
        record["value"] = value
    return record


def write_ehrsql(tmp_path: Path, valid: list[dict], test: list[dict]) -> None:
    write(tmp_path, "ehrsql", "valid.json", json.dumps(valid))
    write(tmp_path, "ehrsql", "test.json", json.dumps(test))
    write(tmp_path, "ehrsql", "eicu.sql", SCHEMA)
    make_database(tmp_path / "ehrsql" / "eicu.sqlite")


ROUTE_QUERY = "select distinct medication.routeadmin from medication where medication.drugname = 'aspirin 81 mg'"


def sql_instance(db: Path, gold: str, value: dict | None = None, impossible: bool = False) -> Instance:
    return Instance(id="e", input="?", references=(gold,),
                    extra={"db_path": str(db), "is_impossible": impossible, "value": {} if value is None else value})


MEDQA_DEV = [
    {"question": "A 23-year-old woman has burning on urination. Best treatment?", "answer": "Nitrofurantoin",
     "options": {"A": "Ampicillin", "B": "Ceftriaxone", "C": "Doxycycline", "D": 'Nitrofurantoin\n"'},
     "meta_info": "step2&3", "answer_idx": "D"},
    {"question": "Which nerve?", "answer": "Ulnar", "options": {"A": "Ulnar", "B": "Radial", "C": "Median",
                                                                "D": "Axillary"},
     "meta_info": "step1", "answer_idx": "A"},
]


MEDQA_TEST = [
    {"question": "Which drug?", "answer": "Heparin", "options": {"A": "Warfarin", "B": "Heparin", "C": "Aspirin",
                                                                 "D": "Clopidogrel"},
     "meta_info": "step1", "answer_idx": "B"},
]


MEDQA_MEMBER = "data_clean/questions/US/4_options/phrases_no_exclude_{}.jsonl"


def medqa_zip(path: Path, dev: list[dict] = MEDQA_DEV, test: list[dict] = MEDQA_TEST) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(MEDQA_MEMBER.format("dev"), jsonl(dev))
        zf.writestr(MEDQA_MEMBER.format("test"), jsonl(test))
        zf.writestr(MEDQA_MEMBER.format("train"), jsonl(dev))
        zf.writestr("data_clean/questions/Mainland/4_options/phrases_no_exclude_dev.jsonl", "not read\n")
    return path
