"""HealthQA-BR: answer a Brazilian health-professional exam question in Portuguese."""

from pytest_medhelm import benchmark_test

test_healthqa_br = benchmark_test("healthqa_br")
