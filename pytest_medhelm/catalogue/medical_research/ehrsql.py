"""EHRSQL (eICU): write the SQL query that answers a clinical research question (HELM ``EhrSqlScenario``,
``ehr_sql``).

Instances: the ``valid`` then the ``test`` question set of EHRSQL's eICU split (HELM maps both to its test split;
its ``train`` set is never evaluated and is not read here), each in file order: 1,117 + 1,792 = 2,909 questions of
the 2024-04-27 release (glee4810/EHRSQL commit ``ba4c58f8``), 950 of them unanswerable (gold query ``"null"``,
``is_impossible`` true): those score only with an empty answer. Nothing is filtered. (HELM skips an entry without
a ``question`` or ``query`` key; here such an entry is a :class:`~pytest_medhelm.data.errors.DataError`, and the
pinned files have none.) Instance ids are EHRSQL's own 24-hex-digit ids.

The prompt lists every ``CREATE TABLE`` statement of ``eicu.sql`` (each line stripped, statements separated by a
blank line) and reproduces HELM's whitespace byte for byte: ``"-- "`` then 20 spaces (a source line continuation)
before ``Question:``, and a blank-line run before ``SQL Query:``.

Execution accuracy runs the gold and the model's SQL against MedHELM's ``eicu.sqlite`` (a 7-patient subset of
EHRSQL's database, pinned by HELM); its path travels in ``Instance.extra["db_path"]``. The metric and its
differences from HELM (no fallback to the template ``value``, gold queries repaired as EHRSQL's scorer does,
items whose gold result is empty on the database in use not scored, read-only and time-limited execution) are in
:mod:`pytest_medhelm.metrics.ehrsql`.

Under ``--medhelm-compat medhelm`` (medhelm 0.8.0's ``ehr_sql``, :func:`build_instances_medhelm`): the entries whose
gold ``query`` is the string ``"null"`` (the unanswerable questions) are dropped, counted in ``Loaded.removed``
(1,959 instances on the pinned files), and the instructions are the fork's (SQLite expertise, a list of
requirements naming EHRSQL's fixed current time); the input text, nouns and generation settings are unchanged. The
fork's scoring changes are in :mod:`pytest_medhelm.metrics.ehrsql`. The files stay the pinned ones: the fork reads
the question files from EHRSQL's unpinned ``main`` and the database from an unpinned Google Drive file.

Sources: HELM downloads ``{valid,test}.json`` and ``eicu.sql`` from glee4810/EHRSQL (its scenario names commit
``e172ec8e`` for the question files; the files pinned here are the release HELM's runs used, commit ``ba4c58f8``),
and ``eicu.sqlite`` from raulista1997/benchmarkdata at ``c4c25244``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_medhelm.catalogue.definition import Benchmark
from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import data_file, read_json, read_text, require, universal_newlines
from pytest_medhelm.data.sources import DataFile
from pytest_medhelm.metrics.ehrsql import EHRSQL_EXECUTION_ACCURACY
from pytest_medhelm.prompting import GenerationPrompt
from pytest_medhelm.values import Instance, Loaded

SLUG = "ehrsql"
SPLIT_FILES = ("valid.json", "test.json")  # HELM's order: valid, then test
SCHEMA_FILE = "eicu.sql"
DB_FILE = "eicu.sqlite"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_SIZE = 100

_EHRSQL = "https://raw.githubusercontent.com/glee4810/EHRSQL"


def extract_schema(path: Path) -> str:
    """HELM's ``extract_schema``: every ``CREATE TABLE`` statement up to the line ending with ``;``, each line
    stripped, statements joined by a blank line."""
    text = universal_newlines(read_text(path))
    tables: list[str] = []
    current: list[str] = []
    inside = False
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("CREATE TABLE"):
            inside, current = True, [line]
        elif inside:
            current.append(line)
            if line.endswith(";"):
                inside = False
                tables.append("\n".join(current))
    if not tables:
        raise DataError(path, "", "no complete CREATE TABLE statement (ending with ';') in the schema file")
    return "\n\n".join(tables)


def instance_text(schema: str, question: str) -> str:
    # HELM: f"-- Database Schema:\n{schema_prompt}\n\n-- \<newline + 20 spaces>Question:\n{question}\n\n"
    return f"-- Database Schema:\n{schema}\n\n-- {' ' * 20}Question:\n{question}\n\n"


def _check_database(path: Path) -> None:
    """A readable, whole SQLite 3 database, or a :class:`DataError` naming the file and what was expected.

    Three checks, cheapest first: the 100-byte header and its magic string; the file size against the size the
    header records (page count x page size: a database cut at any byte, even on a page boundary, is caught here);
    then ``PRAGMA quick_check`` on a read-only connection (damage inside the file; ~10 ms on the pinned 0.5 MB
    database). Without them a broken database loads, every query fails, and every item silently scores 0."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SQLITE_HEADER_SIZE)
        size = path.stat().st_size
    except OSError as exc:
        raise DataError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
    if not head:
        raise DataError(path, "", "the file is empty")
    if not _SQLITE_MAGIC.startswith(head[:len(_SQLITE_MAGIC)]):
        raise DataError(path, "header", "not an SQLite 3 database")
    if len(head) < _SQLITE_HEADER_SIZE:
        raise DataError(path, "header", f"truncated: the file is {size} bytes, an SQLite database header alone is "
                                        f"{_SQLITE_HEADER_SIZE}")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(head[28:32], "big")
    # the header's page count is valid only when its change counter equals its version-valid-for number (SQLite
    # file format, section 1.3.7); a legacy writer may leave it stale, and SQLite then uses the file size
    if page_count and head[24:28] == head[92:96] and size < page_count * page_size:
        raise DataError(path, "", f"truncated: the file is {size} bytes, its header records {page_count} pages of "
                                  f"{page_size} bytes ({page_count * page_size} bytes)")
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            problems = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise DataError(path, "", f"not a readable SQLite 3 database ({exc}); expected the pinned eicu.sqlite, "
                                  "fetch it again") from None
    if problems != ["ok"]:
        shown = "; ".join(" ".join(str(p).split()) for p in problems[:3]) + ("; ..." if len(problems) > 3 else "")
        raise DataError(path, "", f"the SQLite database is malformed (PRAGMA quick_check: {shown}); expected the "
                                  "pinned eicu.sqlite, fetch it again")


def _string(entry: Any, key: str, path: Path, where: str) -> str:
    value = require(entry, key, path, where)
    if not isinstance(value, str):
        raise DataError(path, where, f"{key!r} must be a string, got {type(value).__name__}")
    return value


#: medhelm 0.8.0's scenario skips these entries (its ``entry["query"] != "null"`` test)
UNANSWERABLE_DROPPED = "unanswerable questions (gold query \"null\"): medhelm 0.8.0's scenario drops them"


def build_instances_medhelm(files: Mapping[str, Path]) -> Loaded:
    """The instances of medhelm 0.8.0's ``ehr_sql``: HELM's, without the questions whose gold query is ``"null"``."""
    loaded = Loaded(slug=SLUG)
    for instance in build_instances(files):
        if instance.references[0] == "null":
            loaded.note_removed(UNANSWERABLE_DROPPED)
        else:
            loaded.append(instance)
    return loaded.done()


def build_instances(files: Mapping[str, Path]) -> list[Instance]:
    schema = extract_schema(data_file(files, SCHEMA_FILE))
    db_path = data_file(files, DB_FILE)
    _check_database(db_path)
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    for name in SPLIT_FILES:
        path = data_file(files, name)
        entries = read_json(path)
        if not isinstance(entries, list):
            raise DataError(path, "top level", f"expected a list of questions, got {type(entries).__name__}")
        if not entries:
            raise DataError(path, "top level", "the list of questions is empty")
        split = name.removesuffix(".json")
        for position, entry in enumerate(entries, start=1):
            where = f"entry {position}"
            if not isinstance(entry, dict):
                raise DataError(path, where, f"expected an object, got {type(entry).__name__}")
            entry_id = _string(entry, "id", path, where)
            where = f"entry {position} (id {entry_id!r})"
            question = _string(entry, "question", path, where)
            query = _string(entry, "query", path, where)
            is_impossible = entry.get("is_impossible", False)
            if not isinstance(is_impossible, bool):
                raise DataError(path, where, f"'is_impossible' must be true or false, got {is_impossible!r}")
            value = entry.get("value", {})
            if not isinstance(value, dict) or not all(
                v is None or isinstance(v, (str, int, float)) for v in value.values()
            ):
                raise DataError(path, where, f"'value' must be an object of template values, got {value!r:.80}")
            if not entry_id or any(ch.isspace() for ch in entry_id):
                raise DataError(path, where, "'id' must be a non-empty string without spaces")
            if entry_id in seen:
                raise DataError(path, where, f"duplicate id {entry_id!r} (first in {seen[entry_id]})")
            seen[entry_id] = f"{name} {where}"
            instances.append(
                Instance(
                    id=entry_id,
                    input=instance_text(schema, question),
                    references=(query,),
                    extra={
                        "db_path": str(db_path),
                        "is_impossible": is_impossible,
                        "value": value,
                        "split": split,
                    },
                    benchmark=SLUG,
                )
            )
    return instances


BENCHMARK = Benchmark(
    slug=SLUG,
    name="EHRSQL",
    subcategory="Analyzing Clinical Research Data",
    access="public",
    kind="closed",
    files=(
        DataFile(
            name="valid.json",
            url=f"{_EHRSQL}/ba4c58f8b0581b31755faaead9b8cbee97b66eff/dataset/ehrsql/eicu/valid.json",
            sha256="e63ce19c6a55c7a97a010dabbd0297d30666e8631b36f6f0e1aa19ddd93c70a3",
            description="EHRSQL eICU validation questions (1,117; CC BY 4.0)",
        ),
        DataFile(
            name="test.json",
            url=f"{_EHRSQL}/ba4c58f8b0581b31755faaead9b8cbee97b66eff/dataset/ehrsql/eicu/test.json",
            sha256="b511d9294b8dac50840173ab18b3e42a5f03abef88c326b5a4393e75c9c7ed8f",
            description="EHRSQL eICU test questions (1,792; CC BY 4.0)",
        ),
        DataFile(
            name=SCHEMA_FILE,
            url=f"{_EHRSQL}/9eb39b5e1fd0e4e2ec7bc31208a768dcdf873c50/dataset/ehrsql/eicu/eicu.sql",
            sha256="e423f49c2e45b7a4441f83dd69c18c7b01889958f58db4130a2b280de8b9ab28",
            description="the eICU schema (10 CREATE TABLE statements) shown to the model",
        ),
        DataFile(
            name=DB_FILE,
            url=(
                "https://github.com/raulista1997/benchmarkdata/raw/"
                "c4c252443fa9c52afb6960f53e51be278639bea2/eicu.sqlite"
            ),
            sha256="a2996946babe6d5c5bbc5e19e26d16123e3dcfa8932c57a3299f91885b469266",
            description=(
                "MedHELM's small eICU SQLite database (7 patients) the queries run against; derived from "
                "eICU-CRD, never commit it"
            ),
        ),
    ),
    build_instances=build_instances,
    build_instances_medhelm=build_instances_medhelm,
    prompt=GenerationPrompt(
        instructions=(
            "You are a highly skilled AI specializing in medical SQL queries. "
            "Given a database schema and a medical question, generate a valid SQL query "
            "that retrieves the required information from the database. "
            "Output only the SQL query without explanations.\n\n"
            "Input: A database schema followed by a natural language question.\n"
            "Output: A valid SQL query ending with ;. Only return SQL query, don't add additional text.\n\n"
            "If the question is unanswerable, return an empty string without additional text or comments."
        ),
        input_noun="Medical Question + Schema",
        output_noun="SQL Query",
    ),
    prompt_medhelm=GenerationPrompt(
        instructions=(
            "You are a highly skilled AI specializing in medical SQL queries with SQLite expertise. "
            "Given a database schema and a medical question, generate a valid SQL query to retrieve the required "
            "information.\n\n"
            "Requirements:\n"
            "- Output only the SQL query without explanations\n"
            "- Return exactly one SQL statement ending with ;\n"
            "- Use current time `2105-12-31 23:59:00` if needed\n"
            "- Return empty string if the question is unanswerable\n"
            "- Do not add additional text or comments"
        ),
        input_noun="Medical Question + Schema",
        output_noun="SQL Query",
    ),
    metric=EHRSQL_EXECUTION_ACCURACY,
    max_tokens=1024,
    description="Write the SQLite query over an eICU database that answers a clinical research question.",
    example=(
        "valid.json: [{\"id\": \"0123456789abcdef01234567\", \"question\": \"what is the synthetic patient 000-000's "
        "gender?\", \"query\": \"select distinct patient.gender from patient where patient.uniquepid = '000-000'\", "
        "\"value\": {\"patient_id\": \"000-000\"}, \"is_impossible\": false}]"
    ),
    instance_count=2909,
)
