"""Shared reading code for the gated and private benchmarks (files the user supplies under ``--medhelm-data-dir``).

HELM reads these files with pandas, ``csv.DictReader``, openpyxl (through pandas), pyarrow and tiktoken. This module
reproduces what those readers hand to HELM's scenario code, without importing pandas, and fails with a
:class:`~pytest_medhelm.data.errors.DataError` that names the file, the row and the problem.

* :class:`Loaded`: a loader's instances plus the count of what its filters removed (``removed``, reason → count),
  so that nothing is dropped silently. The reasons are also logged (logger ``pytest_medhelm.catalogue``).
* :func:`read_table_rows`: a delimited file as pandas' C parser splits it (``newline=""``: a ``\\r\\n`` inside a
  quoted field is kept), optionally gzip-compressed. :func:`pandas_strings` gives the text pandas would print for
  a column (its type inference: ``"1"`` → ``1``, a column of ints with an empty cell → floats ``"1.0"``, empty →
  ``"nan"``). CSV files HELM opens with ``open()`` + ``csv.DictReader`` are read with
  :func:`pytest_medhelm.data.readers.read_csv_rows` instead (universal newlines).
* :func:`read_xlsx_rows`: the first sheet of an .xlsx file, header on row 1 (``pandas.read_excel`` defaults).
* :func:`import_pyarrow`, :func:`cl100k`: optional dependencies; when absent the benchmark is skipped with a
  :class:`~pytest_medhelm.data.errors.DataMissing` that says what to install.
* :func:`shc_instances`: the loader shared by the ten Stanford Health Care (SHC) multiple-choice CSVs.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_medhelm.catalogue.definition import Instance
from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import Row, read_csv_rows

LOG = logging.getLogger("pytest_medhelm.catalogue")

#: ``pip install`` hint for the Parquet / Feather readers
DATA_EXTRA = "pip install 'pytest-medhelm[data]'"


# --------------------------------------------------------------------------------------------------------------
# What a loader removed


class Loaded(list):
    """A loader's instances (a list) plus ``removed``: reason → number of source records a filter dropped."""

    def __init__(self, items: Iterable[Instance] = (), slug: str = "") -> None:
        super().__init__(items)
        self.slug = slug
        self.removed: dict[str, int] = {}

    def note_removed(self, reason: str, count: int = 1) -> None:
        """Count ``count`` source records removed for ``reason``."""
        if count:
            self.removed[reason] = self.removed.get(reason, 0) + count

    def done(self) -> "Loaded":
        """Log what was removed; return self."""
        for reason, count in self.removed.items():
            LOG.info("%s: %d record(s) removed: %s", self.slug or "benchmark", count, reason)
        return self


def unique_id(base: str, seen: set[str]) -> str:
    """``base``, or ``base~2``, ``base~3``... when it was already used (HELM has no ids; ours must be unique)."""
    candidate, n = base, 1
    while candidate in seen:
        n += 1
        candidate = f"{base}~{n}"
    seen.add(candidate)
    return candidate


def safe_id(value: Any) -> str:
    """A value usable in a pytest id: no whitespace, no ``[]``, not empty."""
    text = re.sub(r"[\s\[\]]+", "_", str(value).strip())
    return text or "_"


# --------------------------------------------------------------------------------------------------------------
# pandas semantics

#: pandas' default NA strings (``pandas.read_csv``, ``keep_default_na=True``): such a cell becomes NaN
PANDAS_NA = frozenset(
    {
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
        "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)
_INT = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"True", "TRUE", "true"})
_FALSE = frozenset({"False", "FALSE", "false"})


def is_pandas_na(value: str | None) -> bool:
    return value is None or value in PANDAS_NA


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def pandas_strings(values: Sequence[str | None]) -> list[str]:
    """How ``str(cell)`` prints each value of a column that pandas read with its default type inference.

    All integers → ``"7"`` (``"07"`` → ``"7"``); integers and NA → floats ``"7.0"`` and ``"nan"``; all numbers →
    ``str(float)``; ``True``/``False`` → booleans; anything else → the text as is, NA → ``"nan"``. (pandas has
    more cases, e.g. integers beyond 64 bits; those stay text here.)
    """
    present = [v for v in values if not is_pandas_na(v)]
    has_na = len(present) < len(values)
    if present and all(_INT.fullmatch(v.strip()) for v in present):
        if not has_na:
            return [str(int(v)) for v in values]  # type: ignore[arg-type]
        return ["nan" if is_pandas_na(v) else str(float(int(v))) for v in values]  # type: ignore[arg-type]
    if present and all(_float_or_none(v) is not None for v in present):
        return ["nan" if is_pandas_na(v) else str(float(v)) for v in values]  # type: ignore[arg-type]
    if present and all(v in _TRUE or v in _FALSE for v in present):
        return ["nan" if is_pandas_na(v) else str(v in _TRUE) for v in values]
    return ["nan" if is_pandas_na(v) else v for v in values]  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------------------
# Delimited files as pandas reads them


def _decode(path: Path, raw: bytes) -> str:
    if not raw.strip():
        raise DataError(path, "", "the file is empty")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            path, f"byte {exc.start} (line {line})", f"not valid UTF-8 ({exc.reason}); expected a UTF-8 text file"
        ) from None


def read_bytes(path: Path, gz: bool = False) -> bytes:
    try:
        if gz:
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return Path(path).read_bytes()
    except (gzip.BadGzipFile, EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise DataError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
        what = "not a valid gzip file or truncated" if gz else "cannot read the file"
        raise DataError(path, "", f"{what} ({exc})") from None


def read_table_rows(
    path: Path, required_columns: Iterable[str] = (), delimiter: str = ",", gz: bool = False
) -> list[Row]:
    """Rows of a delimited file with a header line, as pandas' parser splits them (embedded newlines kept as is).

    Errors name the file and the row: a required column missing from the header, a row with another number of
    fields than the header, broken quoting, an empty file, a header with no rows.
    """
    text = _decode(path, read_bytes(path, gz))
    csv.field_size_limit(2**31 - 1)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise DataError(path, "line 1", f"expected a header line of column names ({exc or 'no lines'})") from None
    missing = [c for c in required_columns if c not in header]
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
            if not fields:  # pandas skips blank lines (skip_blank_lines=True)
                start = reader.line_num + 1
                continue
            number = len(rows) + 1
            if len(fields) != len(header):
                raise DataError(
                    path, f"row {number} (line {start})",
                    f"expected {len(header)} fields as in the header, got {len(fields)}",
                )
            rows.append(Row(number, start, dict(zip(header, fields))))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(path, f"row {len(rows) + 1} (line {start})", f"malformed file ({exc})") from None
    if not rows:
        raise DataError(path, "after the header", "no data rows")
    return rows


def text_lines(path: Path) -> list[str]:
    """``open(path).readlines()`` (universal newlines), each line without its line break."""
    text = _decode(path, read_bytes(path)).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------------------------------------------
# Excel


def read_xlsx_rows(path: Path, required_columns: Iterable[str] = ()) -> list[Row]:
    """The first sheet of an .xlsx file as ``pandas.read_excel`` sees it: header on the first row, then data rows.

    Values are openpyxl's (str, int, float, datetime or None); ``Row.number`` is the spreadsheet row (header = 1).
    Rows whose cells are all empty are kept (the caller decides); trailing empty rows are dropped, as pandas does.
    """
    if not read_bytes(path).strip():
        raise DataError(path, "", "the file is empty")
    import zipfile

    try:
        import openpyxl
    except ImportError:  # pragma: no cover - a dependency of the package
        raise DataMissing(f"reading {path} needs openpyxl: pip install openpyxl") from None
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise DataError(path, "", f"not a readable .xlsx workbook ({type(exc).__name__}: {exc}); truncated?") from None
    except Exception as exc:  # openpyxl's InvalidFileException and friends
        raise DataError(path, "", f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})") from None
    try:
        sheet = workbook.worksheets[0]
        values = [list(r) for r in sheet.iter_rows(values_only=True)]
    finally:
        workbook.close()
    while values and all(v is None or (isinstance(v, str) and v == "") for v in values[-1]):
        values.pop()
    if not values:
        raise DataError(path, "", "the first sheet is empty")
    header = [("" if h is None else str(h)) for h in values[0]]
    missing = [c for c in required_columns if c not in header]
    if missing:
        raise DataError(
            path, "header (row 1)",
            f"missing column(s) {', '.join(map(repr, missing))}; found columns "
            f"{', '.join(repr(h) for h in header if h)}",
        )
    rows = []
    for number, cells in enumerate(values[1:], start=2):
        cells = list(cells) + [None] * (len(header) - len(cells))
        rows.append(Row(number, number, {h: cells[i] for i, h in enumerate(header) if h}))
    if not rows:
        raise DataError(path, "after the header", "no data rows")
    return rows


# --------------------------------------------------------------------------------------------------------------
# Optional dependencies


def import_pyarrow(path: Path | str) -> Any:
    """``pyarrow`` (with its ``parquet`` and ``feather`` modules), or DataMissing saying what to install."""
    try:
        import pyarrow
        import pyarrow.feather  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise DataMissing(
            f"reading {path} needs pyarrow, which is not installed: {DATA_EXTRA} (or pip install pyarrow)"
        ) from None
    return pyarrow


def _litellm_tokenizer_dir() -> str | None:
    """The directory where litellm ships tiktoken's BPE files (found without importing litellm, which is slow)."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "litellm_core_utils", "tokenizers")
    return folder if os.path.isdir(folder) else None


_CL100K: Any = None


def cl100k() -> Any:
    """tiktoken's ``cl100k_base`` (GPT-4's tokenizer, which HELM counts with), usable offline.

    tiktoken downloads its BPE file on first use; litellm (a dependency) ships that file, so it is used from
    there when ``TIKTOKEN_CACHE_DIR`` is not set.
    """
    global _CL100K
    if _CL100K is not None:
        return _CL100K
    try:
        import tiktoken
    except ImportError:
        raise DataMissing("counting tokens as HELM does needs tiktoken: pip install tiktoken") from None
    if not os.environ.get("TIKTOKEN_CACHE_DIR") and not os.environ.get("DATA_GYM_CACHE_DIR"):
        bundled = _litellm_tokenizer_dir()
        if bundled:
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        _CL100K = tiktoken.get_encoding("cl100k_base")
    except Exception as exc:
        raise DataMissing(
            "tiktoken could not load its cl100k_base tokenizer (it is downloaded on first use; offline, point "
            f"TIKTOKEN_CACHE_DIR at a folder holding it): {type(exc).__name__}: {exc}"
        ) from None
    return _CL100K


def count_tokens(text: str) -> int:
    return len(cl100k().encode(text, disallowed_special=()))


# --------------------------------------------------------------------------------------------------------------
# The Stanford Health Care (SHC) multiple-choice CSVs


def shc_instances(
    files: Mapping[str, Path],
    *,
    slug: str,
    file: str,
    render: Callable[[str, str, int], str],
    choices: tuple[str, ...] = ("A", "B"),
    question_column: str = "prompt",
    counter: str = "",
) -> Loaded:
    """HELM's ``create_benchmark`` of the SHC scenarios, then one instance per distinct prompt.

    The CSV is read as ``csv.DictReader`` over ``open(path)`` reads it. Each row becomes
    ``render(question, context, counter)``; HELM stores ``data[prompt] = label`` in a dict, so a prompt met twice
    keeps the place of its first row and the label of its last. ``counter`` is ``""`` (not used), ``"every"``
    (ClinicReferral: +1 on every row) or ``"kept"`` (ENT-Referral: rows with an empty ``label`` are skipped and do
    not advance it). The reference texts are the letters themselves, so the options read ``A. A``, ``B. B``.
    Labels must be one of ``choices`` exactly (HELM asserts it).
    """
    from pytest_medhelm.data.readers import data_file

    path = data_file(files, file)
    rows = read_csv_rows(path, (question_column, "context", "label"))
    loaded = Loaded(slug=slug)
    by_prompt: dict[str, list[Any]] = {}  # prompt -> [first row, label, rows merged]
    n = 1
    for row in rows:
        label = row["label"]
        if counter == "kept" and label == "":
            loaded.note_removed("empty 'label' (HELM skips these rows)")
            continue
        if label not in choices:
            raise DataError(
                path, row.where, f"'label' must be one of {', '.join(map(repr, choices))}, got {label!r}"
            )
        prompt = render(row[question_column], row["context"], n)
        if counter:
            n += 1
        if prompt in by_prompt:
            entry = by_prompt[prompt]
            if entry[1] != label:
                loaded.note_removed("repeated prompt with another label: the last row's label is kept (as HELM's dict)")
            else:
                loaded.note_removed("repeated prompt: merged into its first row (HELM keys instances by prompt text)")
            entry[1] = label
        else:
            by_prompt[prompt] = [row, label]
    for prompt, (row, label) in by_prompt.items():
        loaded.append(
            Instance(
                id=f"row{row.number}",
                input=prompt,
                references=(label,),
                choices=choices,
                correct=choices.index(label),
                benchmark=slug,
            )
        )
    return loaded.done()
