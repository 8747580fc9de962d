"""PubMedQA: answer a biomedical research question (yes / no / maybe) from a PubMed abstract."""

from pytest_medhelm import benchmark_test

test_pubmedqa = benchmark_test("pubmedqa")
