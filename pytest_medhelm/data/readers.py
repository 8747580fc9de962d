"""Readers for benchmark files that fail with a :class:`DataError` naming the file, the place and what was expected.

Loaders read through these functions and fetch fields with :func:`require`, so a malformed file (truncated JSON, a
missing column, an empty file, another encoding) never surfaces as a bare ``KeyError`` or ``IndexError`` and
never silently drops instances.

* :func:`read_bytes` / :func:`decode_text` / :func:`read_text`: a file's bytes (optionally gunzipped) and its text
  as UTF-8 (a byte-order mark tolerated); empty or undecodable files are errors. :func:`check_not_empty` does the
  same first check for binary formats read by another library (.docx, .xlsx, .zip).
* :func:`read_csv_rows`: a delimited file with a header line, as :class:`Row` objects. By default with universal
  newlines, as HELM opens CSV files for ``csv.DictReader`` (``open(path, encoding="utf-8")``): a ``\\r\\n`` inside a
  quoted field becomes ``\\n`` (MEDEC's notes depend on that for the prompts to match byte for byte). With
  ``universal_newlines=False`` the file is split as ``pandas.read_csv`` splits it (a ``\\r\\n`` inside a quoted
  field is kept), for the files HELM reads with pandas.
* :func:`read_json`, :func:`read_jsonl` / :func:`jsonl_rows`, :func:`text_lines`: JSON, JSON lines, plain lines.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_medhelm.data.errors import DataError, DataMissing

#: JSON nested deeper than Python's recursion limit (json raises RecursionError): no benchmark file is
NESTED_TOO_DEEPLY = "JSON nested too deeply to read (deeper than Python's recursion limit); expected a data file"

# Clinical notes exceed the csv module's default field limit of 128 KiB; 2**31 - 1 is accepted on every platform.
_CSV_FIELD_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Row:
    """One record of a CSV or JSONL file, with where it sits in the file (for error messages)."""

    #: 1-based record number: the first data row of a CSV (after the header) is row 1
    number: int
    #: 1-based line of the file where the record starts (a CSV record may span several lines)
    line: int
    values: Mapping[str, Any]

    @property
    def where(self) -> str:
        return f"row {self.number} (line {self.line})"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def data_file(files: Mapping[str, Path], name: str) -> Path:
    """The resolved path of the data file ``name``; a loader called without it gets :class:`DataMissing`."""
    try:
        return files[name]
    except KeyError:
        raise DataMissing(f"data file {name!r} was not resolved (have: {', '.join(sorted(files)) or 'none'})") from None


# --------------------------------------------------------------------------------------------------------------
# Bytes and text


#: the most bytes a compressed data file may inflate to (the largest real one, DischargeMe's discharge notes, is
#: a few hundred MB): a small file that inflates past it is refused as it is read, never held whole in memory
MAX_INFLATED_BYTES = 2 * 1024 ** 3
_CHUNK = 1024 ** 2


def read_bytes(path: Path | str, gz: bool = False) -> bytes:
    """The file's bytes (decompressed when ``gz``, up to :data:`MAX_INFLATED_BYTES`); an unreadable file, a broken
    gzip stream or one that inflates past the cap is a DataError naming the file."""
    try:
        if gz:
            with gzip.open(path, "rb") as fh:
                return _inflated(path, fh)
        return Path(path).read_bytes()
    except (gzip.BadGzipFile, EOFError, OSError) as exc:
        if gz and not isinstance(exc, FileNotFoundError):
            raise DataError(path, "", f"not a valid gzip file or truncated ({exc})") from None
        raise DataError(path, "", f"cannot read the file: {getattr(exc, 'strerror', None) or exc}") from None


def _inflated(path: Path | str, stream: Any) -> bytes:
    chunks, size = [], 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        if size > MAX_INFLATED_BYTES:
            raise DataError(path, "", f"inflates to more than {MAX_INFLATED_BYTES:,} bytes (the cap on a compressed "
                                      "data file, pytest_medhelm.data.readers.MAX_INFLATED_BYTES): not read further")
        chunks.append(chunk)
    return b"".join(chunks)


def inflate_limit_problem(declared: int) -> str | None:
    """Why a compressed member declared to inflate to ``declared`` bytes is not read, or None."""
    if declared > MAX_INFLATED_BYTES:
        return (f"inflates to {declared:,} bytes, more than {MAX_INFLATED_BYTES:,} (the cap on a compressed data "
                "file, pytest_medhelm.data.readers.MAX_INFLATED_BYTES): not read")
    return None


def check_not_empty(path: Path | str) -> None:
    """A DataError when the file cannot be read or is empty (for formats another library parses)."""
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise DataError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
    if size == 0:
        raise DataError(path, "", "the file is empty")


def decode_text(path: Path | str, raw: bytes) -> str:
    """``raw`` as UTF-8 text (a byte-order mark is tolerated); ``path`` names the data in errors."""
    if not raw.strip():
        raise DataError(path, "", "the file is empty")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            path, f"byte {exc.start} (line {line})", f"not valid UTF-8 ({exc.reason}); expected a UTF-8 text file"
        ) from None


def read_text(path: Path | str, gz: bool = False) -> str:
    """The whole file as UTF-8 text (a byte-order mark is tolerated). Empty or undecodable files are errors."""
    return decode_text(path, read_bytes(path, gz))


def universal_newlines(text: str) -> str:
    """``\\r\\n`` and ``\\r`` as ``\\n``: what Python's ``open()`` in text mode gives HELM's code."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_lines(path: Path | str) -> list[str]:
    """``open(path).readlines()`` (universal newlines), each line without its line break."""
    lines = universal_newlines(read_text(path)).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------------------------------------------
# JSON


def read_json(path: Path | str) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON ({exc.msg}); is the file truncated?"
        ) from None
    except RecursionError:
        raise DataError(path, "", NESTED_TOO_DEEPLY) from None


def jsonl_rows(data: bytes, label: Path | str) -> list[Row]:
    """The JSON objects of JSON-lines ``data`` (blank lines skipped), as :class:`Row` objects numbered by line.

    ``label`` names the data in errors: the file, or e.g. ``"data_clean.zip:data_clean/questions/.../dev.jsonl"``
    for an archive member."""
    rows: list[Row] = []
    # split on "\n" only: str.splitlines() also breaks at U+2028/U+2029 and other characters that JSON strings
    # may hold unescaped (MedHallu has a U+2029); a trailing "\r" is JSON whitespace
    for lineno, line in enumerate(decode_text(label, data).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(label, f"line {lineno}, column {exc.colno}", f"invalid JSON ({exc.msg})") from None
        except RecursionError:
            raise DataError(label, f"line {lineno}", NESTED_TOO_DEEPLY) from None
        if not isinstance(value, dict):
            raise DataError(label, f"line {lineno}", f"expected a JSON object, got {type(value).__name__}")
        rows.append(Row(lineno, lineno, value))
    return rows


def read_jsonl(path: Path | str) -> list[Row]:
    """One JSON object per line; blank lines are skipped. ``Row.number`` and ``Row.line`` are the line number."""
    return jsonl_rows(read_bytes(path), path)


# --------------------------------------------------------------------------------------------------------------
# Delimited files

_universal_newlines = universal_newlines  # read_csv_rows' parameter of the same name shadows the function


def read_csv_rows(
    path: Path | str,
    required_columns: Iterable[str] = (),
    *,
    delimiter: str = ",",
    gz: bool = False,
    universal_newlines: bool = True,
    drop_undecodable: bool = False,
    columns: Sequence[str] | None = None,
) -> list[Row]:
    """The data rows of a delimited file with a header line, each a :class:`Row` of column → string.

    ``columns``: the file has no header line, these are its columns (the first line is row 1).

    ``universal_newlines``: True for files HELM reads with ``csv.DictReader`` over ``open()``, False for files it
    reads with ``pandas.read_csv`` (see the module docstring). Blank lines are skipped, as both do. ``gz``: the
    file is gzip-compressed.

    Errors: a required column absent from the header, a row with more or fewer fields than the header, broken
    quoting, an empty file, or a header with no data rows. ``drop_undecodable``: bytes that are not UTF-8 vanish
    instead of being an error, as in a file opened with ``errors="ignore"`` (medhelm's SCT-Bench loader).
    """
    if drop_undecodable:
        raw = read_bytes(path, gz)
        if not raw.strip():
            raise DataError(path, "", "the file is empty")
        text = raw.decode("utf-8", errors="ignore")
    else:
        text = read_text(path, gz)
    if universal_newlines:
        text = _universal_newlines(text)
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = list(columns) if columns is not None else next(reader)
    except (StopIteration, csv.Error) as exc:
        raise DataError(path, "line 1", f"expected a header line of column names ({exc or 'no lines'})") from None
    missing = [col for col in required_columns if col not in header]
    if missing:
        raise DataError(
            path,
            "header (line 1)",
            f"missing column(s) {', '.join(map(repr, missing))}; found columns {', '.join(map(repr, header))}",
        )
    rows: list[Row] = []
    start = reader.line_num + 1
    try:
        for fields in reader:
            if not fields:  # a blank line, which csv.DictReader and pandas (skip_blank_lines=True) skip too
                start = reader.line_num + 1
                continue
            number = len(rows) + 1
            if len(fields) != len(header):
                raise DataError(
                    path,
                    f"row {number} (line {start})",
                    f"expected {len(header)} fields"
                    + (f" ({', '.join(header)})" if columns is not None else " as in the header")
                    + f", got {len(fields)}",
                )
            rows.append(Row(number, start, dict(zip(header, fields))))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(path, f"row {len(rows) + 1} (line {start})", f"malformed CSV ({exc})") from None
    if not rows:
        raise DataError(path, "after the header" if columns is None else "", "no data rows")
    return rows


def require(record: Mapping[str, Any] | Row, key: str, path: Path | str, where: str) -> Any:
    """``record[key]``, or a :class:`DataError` naming the file, the place and the key that is missing."""
    values = record.values if isinstance(record, Row) else record
    if not isinstance(values, Mapping):
        raise DataError(path, where, f"expected an object with key {key!r}, got {type(values).__name__}")
    try:
        return values[key]
    except KeyError:
        found = ", ".join(map(repr, list(values)[:20]))
        raise DataError(path, where, f"missing key {key!r} (found: {found or 'no keys'})") from None


# --------------------------------------------------------------------------------------------------------------
# Parquet and pinned Python modules


def read_parquet_rows(path: Path | str) -> list[Row]:
    """The rows of a parquet file (a Hugging Face dataset's own file) as :class:`Row` objects numbered from 1.
    Needs pyarrow; without it the benchmark's data count as missing, with a message saying what to install."""
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        raise DataMissing(f"reading {path} needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(path)
    except (OSError, pyarrow.ArrowException) as exc:
        raise DataError(path, "", f"not a readable parquet file ({exc})") from None
    return [Row(k, k, values) for k, values in enumerate(table.to_pylist(), start=1)]


def read_python_strings(path: Path | str, names: Iterable[str]) -> dict[str, str]:
    """The module-level string constants ``names`` of a Python file, read as literals with :mod:`ast`: the file is
    data (a pinned upstream module holding prompt templates), never imported or executed. A name that is absent
    or not a plain string literal is a :class:`DataError` naming the file."""
    import ast

    wanted = set(names)
    try:
        tree = ast.parse(read_bytes(path), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise DataError(path, "", f"cannot be read as a Python module ({exc})") from None
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in wanted:
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    value = None
                if not isinstance(value, str):
                    raise DataError(path, f"line {node.lineno}", f"{name} is not a string literal")
                found[name] = value
    missing = sorted(wanted - set(found))
    if missing:
        raise DataError(path, "", f"no module-level string constant(s) {', '.join(missing)}")
    return found
