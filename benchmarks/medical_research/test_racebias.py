"""RaceBias: say whether a chatbot's medical answer contains harmful or race-based content."""

from pytest_medhelm import benchmark_test

test_racebias = benchmark_test("racebias")
