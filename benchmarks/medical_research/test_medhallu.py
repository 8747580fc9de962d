"""MedHallu: judge whether an answer to a PubMed question is factual (0) or hallucinated (1)."""

from pytest_medhelm import benchmark_test

test_medhallu = benchmark_test("medhallu")
