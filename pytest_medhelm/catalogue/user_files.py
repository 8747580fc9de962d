"""The user's files: reading code shared by the gated and private benchmarks (files under ``--medhelm-data-dir``).

HELM reads these files with pandas, ``csv.DictReader``, openpyxl (through pandas), pyarrow and tiktoken. This module
reproduces what those readers hand to HELM's scenario code, without importing pandas, and fails with a
:class:`~pytest_medhelm.data.errors.DataError` that names the file, the row and the problem. The generic readers
(bytes, text, CSV, JSON) are in :mod:`pytest_medhelm.data.readers`.

* :func:`pandas_strings` gives the text pandas would print for a column (its type inference: ``"1"`` → ``1``, a
  column of ints with an empty cell → floats ``"1.0"``, empty → ``"nan"``); :data:`PANDAS_NA` / :func:`is_pandas_na`
  pandas' default NA strings. Files HELM reads with ``pandas.read_csv`` are split by
  :func:`pytest_medhelm.data.readers.read_csv_rows` with ``universal_newlines=False``.
* :func:`read_xlsx_rows`: the first sheet of an .xlsx file, header on row 1 (``pandas.read_excel`` defaults).
* :func:`import_pyarrow`, :func:`cl100k`: optional dependencies; when absent the benchmark is skipped with a
  :class:`~pytest_medhelm.data.errors.DataMissing` that says what to install.
* :func:`unique_id`, :func:`safe_id`: instance ids.

The SHC loader is :func:`pytest_medhelm.catalogue.shc.shc_instances`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_medhelm.data.errors import DataError, DataMissing
from pytest_medhelm.data.readers import Row, inflate_limit_problem, read_bytes

__all__ = [
    "DATA_EXTRA", "PANDAS_NA", "cl100k", "count_tokens", "import_pyarrow", "is_pandas_na", "pandas_strings",
    "read_xlsx_rows", "safe_id", "unique_id",
]

#: ``pip install`` hint for the Parquet / Feather readers
DATA_EXTRA = "pip install 'pytest-medhelm[data]'"


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
    cells = [None if is_pandas_na(v) else v for v in values]  # None: what pandas reads as NA
    present = [v for v in cells if v is not None]
    has_na = len(present) < len(cells)
    if present and all(_INT.fullmatch(v.strip()) for v in present):
        if not has_na:
            return [str(int(v)) for v in present]
        return ["nan" if v is None else str(float(int(v))) for v in cells]
    if present and all(_float_or_none(v) is not None for v in present):
        return ["nan" if v is None else str(float(v)) for v in cells]
    if present and all(v in _TRUE or v in _FALSE for v in present):
        return ["nan" if v is None else str(v in _TRUE) for v in cells]
    return ["nan" if v is None else v for v in cells]


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

    try:  # (an .xlsx is a zip: its parts are not inflated past the cap on a compressed data file)
        with zipfile.ZipFile(path) as archive:
            problem = inflate_limit_problem(sum(info.file_size for info in archive.infolist()))
    except (zipfile.BadZipFile, OSError, ValueError):
        problem = None  # (openpyxl says what is wrong with it, below)
    if problem:
        raise DataError(path, "", f"the workbook's parts together {problem}")

    try:
        import openpyxl
    except ImportError:  # pragma: no cover - a dependency of the package
        raise DataMissing(f"reading {path} needs openpyxl: pip install openpyxl") from None
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise DataError(path, "", f"not a readable .xlsx workbook ({type(exc).__name__}: {exc}); truncated?") from None
    except Exception as exc:  # noqa: BLE001 - openpyxl's InvalidFileException and friends
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

        # imported so that pyarrow.feather and pyarrow.parquet exist as attributes for the callers
        import pyarrow.feather  # noqa: F401 - see above
        import pyarrow.parquet  # noqa: F401 - see above
    except ImportError:
        raise DataMissing(
            f"reading {path} needs pyarrow, which is not installed: {DATA_EXTRA} (or pip install pyarrow)"
        ) from None
    return pyarrow


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
    try:
        from pytest_medhelm.thirdparty import bundled_tiktoken_files

        with bundled_tiktoken_files():
            _CL100K = tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # noqa: BLE001 - a download refused offline, a damaged file: the reason is reported
        raise DataMissing(
            "tiktoken could not load its cl100k_base tokenizer (it is downloaded on first use; offline, point "
            f"TIKTOKEN_CACHE_DIR at a folder holding it): {type(exc).__name__}: {exc}"
        ) from None
    return _CL100K


def count_tokens(text: str) -> int:
    return len(cl100k().encode(text, disallowed_special=()))
