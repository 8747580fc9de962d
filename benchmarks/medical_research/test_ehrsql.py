"""EHRSQL: write the SQL query over an eICU database that answers a clinical research question."""

from pytest_medhelm import benchmark_test

test_ehrsql = benchmark_test("ehrsql")
