"""CDI-QA: answer a documentation-integrity verification question from earlier notes."""

from pytest_medhelm import benchmark_test

test_cdi_qa = benchmark_test("cdi_qa")
