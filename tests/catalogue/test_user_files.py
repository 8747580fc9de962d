"""catalogue/user_files.py: reading the user's files of the gated and private benchmarks as HELM reads them."""

from __future__ import annotations

import pytest

from pytest_medhelm.catalogue.user_files import pandas_strings


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "02"], ["1", "2"]),
        (["1", ""], ["1.0", "nan"]),
        (["1.50", "2"], ["1.5", "2.0"]),
        (["True", "false"], ["True", "False"]),
        (["a", "NA", "null"], ["a", "nan", "nan"]),
        (["", ""], ["nan", "nan"]),
    ],
)
def test_pandas_strings(values: list[str], expected: list[str]) -> None:
    assert pandas_strings(values) == expected
