"""HealthBench Professional: a physician's clinical task; graded per rubric criterion and against a physician's
answer by the jury."""

from pytest_medhelm import benchmark_test

test_healthbench_professional = benchmark_test("healthbench_professional")
