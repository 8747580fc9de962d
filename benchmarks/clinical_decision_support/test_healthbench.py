"""HealthBench: answer a health conversation; graded per physician-written rubric criterion (--medhelm-grader)."""

from pytest_medhelm import benchmark_test

test_healthbench = benchmark_test("healthbench")
