"""ADHD-Behavior: does the note recommend parent training in behavior management?"""

from pytest_medhelm import benchmark_test

test_adhd_behavior = benchmark_test("adhd_behavior")
