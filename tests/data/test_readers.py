"""The data readers (data/readers.py): JSON lines, JSON and CSV rows with their places; on untrusted files (issue 20,
point 9) JSON nested too deeply is a DataError naming the file, and a compressed file or archive member that
inflates past its cap is refused as it is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import jsonl_rows, read_csv_rows, read_json, read_jsonl, require

DEEP = "[" * 200_000 + "]" * 200_000


def test_json_nested_too_deeply_is_a_data_error_naming_the_file(tmp_path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    with pytest.raises(DataError) as info:
        read_json(path)
    assert str(info.value) == f"{path}: JSON nested too deeply to read (deeper than Python's recursion limit); " \
                              "expected a data file"
    with pytest.raises(DataError, match=r"^rows.jsonl, line 2: JSON nested too deeply"):
        jsonl_rows(('{"a": 1}\n' + DEEP + "\n").encode(), "rows.jsonl")


# ------------------------------------------------------------------------------------------ decompression bombs
def test_a_gzip_file_that_inflates_past_the_cap_is_refused_as_it_is_read(tmp_path, monkeypatch):
    import gzip

    from pytest_medhelm.data import readers

    bomb = tmp_path / "discharge.csv.gz"
    bomb.write_bytes(gzip.compress(b"0" * (5 * 1024 ** 2)))  # 5 MB of zeros in about 5 KB
    assert bomb.stat().st_size < 20_000
    monkeypatch.setattr(readers, "MAX_INFLATED_BYTES", 2 * 1024 ** 2)
    with pytest.raises(readers.DataError) as excinfo:
        readers.read_bytes(bomb, gz=True)
    message = str(excinfo.value)
    assert str(bomb) in message and "inflates to more than 2,097,152 bytes" in message
    monkeypatch.setattr(readers, "MAX_INFLATED_BYTES", 6 * 1024 ** 2)
    assert len(readers.read_bytes(bomb, gz=True)) == 5 * 1024 ** 2  # under the cap: read whole


def test_a_zip_member_declared_past_the_cap_is_not_inflated(tmp_path, monkeypatch):
    import zipfile

    from pytest_medhelm.data import gdrive, readers

    archive = tmp_path / "release.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data/rows.jsonl", b"{}\n" * (1024 ** 2))
    monkeypatch.setattr(readers, "MAX_INFLATED_BYTES", 1024 ** 2)
    with pytest.raises(readers.DataError, match=r"data/rows.jsonl inflates to 3,145,728 bytes, more than 1,048,576"):
        gdrive.zip_member(archive, "rows.jsonl")


def test_an_xlsx_whose_parts_inflate_past_the_cap_is_refused_before_openpyxl_reads_it(tmp_path, monkeypatch):
    import zipfile

    from pytest_medhelm.catalogue import user_files
    from pytest_medhelm.data import readers

    workbook = tmp_path / "clear.xlsx"  # an .xlsx is a zip: one sheet part of 5 MB of zeros, about 5 KB on disk
    with zipfile.ZipFile(workbook, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("xl/worksheets/sheet1.xml", b"0" * (5 * 1024 ** 2))
    assert workbook.stat().st_size < 20_000
    monkeypatch.setattr(readers, "MAX_INFLATED_BYTES", 2 * 1024 ** 2)
    with pytest.raises(readers.DataError) as excinfo:
        user_files.read_xlsx_rows(workbook)
    message = str(excinfo.value)
    assert str(workbook) in message and "inflates to 5,242,880 bytes, more than 2,097,152" in message
    assert "MAX_INFLATED_BYTES" in message


def test_healthbench_professionals_member_over_its_cap_names_the_cap(tmp_path, monkeypatch):
    import zipfile

    from pytest_medhelm.catalogue.clinical_decision_support import healthbench_professional as module

    archive = tmp_path / "assets.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"assets/{module.MEMBER}", b"{}\n" * (1024 ** 2))
    monkeypatch.setattr(module, "MAX_MEMBER_BYTES", 1024 ** 2)
    with pytest.raises(module.DataError, match=r"3,145,728 bytes uncompressed, more than the cap of 1,048,576 "
                                               r"\(healthbench_professional.MAX_MEMBER_BYTES\)") as excinfo:
        module.member_bytes(archive)
    assert str(archive) in str(excinfo.value)


def test_read_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    rows = read_jsonl(path)
    assert [(r.number, r["a"]) for r in rows] == [(1, 1), (3, 2)]
    assert require(rows[1], "a", path, rows[1].where) == 2
    with pytest.raises(DataError, match=r"line 3.*missing key 'b'"):
        require(rows[1], "b", path, rows[1].where)
    path.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2, column \d+"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2.*expected a JSON object"):
        read_jsonl(path)


def test_read_json_and_csv_helpers(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('\ufeff{"k": [1, 2]}', encoding="utf-8")  # a byte-order mark is tolerated
    assert read_json(path) == {"k": [1, 2]}
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("x,y\n1,2\n\n3,4\n", encoding="utf-8")
    rows = read_csv_rows(csv_path, ["x"])
    assert [(r.number, r.line, r["y"]) for r in rows] == [(1, 2, "2"), (2, 4, "4")]
    with pytest.raises(DataError, match="expected an object"):
        require([1, 2], "k", path, "top level")
