"""Saved runs (compare/storage.py): numbered names, loading by name, number or path, errors naming the file."""

from __future__ import annotations

import json

import pytest
from run_results import results

from pytest_medhelm.compare.storage import StorageError, list_runs, load, sanitize, save


def test_storage_numbers_names_and_loads(tmp_path):
    run = results("m", {"toy": [1, 0]})
    assert save(run, "base", tmp_path).name == "0001_base.json"
    assert save(run, "autosave", tmp_path).name == "0002_autosave.json"
    assert save(run, "feature/x y", tmp_path).name == "0003_feature_x_y.json"
    assert save(run, "base", tmp_path).name == "0004_base.json"
    assert sanitize("../../etc") == "etc" and sanitize("///") == "run"
    assert [(r.number, r.name) for r in list_runs(tmp_path)] == [(1, "base"), (2, "autosave"), (3, "feature_x_y"),
                                                                  (4, "base")]
    assert load("latest", tmp_path)["saved"]["number"] == 4
    assert load("base", tmp_path)["saved"]["number"] == 4  # a name: its latest run
    assert load("2", tmp_path)["saved"]["name"] == "autosave" and load("0001", tmp_path)["saved"]["number"] == 1
    assert load("0003_feature_x_y.json", tmp_path)["saved"]["number"] == 3
    saved = load(str(tmp_path / ".medhelm" / "runs" / "0002_autosave.json"), tmp_path)
    assert saved["source"].endswith("0002_autosave.json")
    info = saved["run"]
    assert info["machine_info"]["cpu_count"] and info["machine_info"]["python"]
    assert set(info["commit_info"]) == {"commit", "branch", "dirty"}
    assert saved["instances"] == run["instances"]  # still a results file
    assert oct((tmp_path / ".medhelm" / "runs").stat().st_mode & 0o777) == "0o700"


def test_storage_errors_name_the_file(tmp_path):
    with pytest.raises(StorageError, match="no saved run in .*runs.*--medhelm-save"):
        load("latest", tmp_path)
    save(results("m", {"toy": [1]}), "base", tmp_path)
    with pytest.raises(StorageError, match=r"no saved run named 'nope'.*0001_base"):
        load("nope", tmp_path)
    with pytest.raises(StorageError, match="missing.json: no such file"):
        load("missing.json", tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StorageError, match="bad.json: not valid JSON"):
        load(str(bad), tmp_path)
    bad.write_text(json.dumps({"schema_version": 2, "run": {}, "benchmarks": [], "instances": []}))
    with pytest.raises(StorageError, match=r"bad.json: not a pytest-medhelm results file of schema_version 1 "
                                           r"\(schema_version 2\)"):
        load(str(bad), tmp_path)
    bad.write_text(json.dumps({"schema_version": 1, "run": {}, "benchmarks": [], "instances": [{"x": 1}]}))
    with pytest.raises(StorageError, match=r"instances\[0\] lacks benchmark"):
        load(str(bad), tmp_path)
