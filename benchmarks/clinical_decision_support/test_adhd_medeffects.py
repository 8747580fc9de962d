"""ADHD-MedEffects: does the note document ADHD medication side-effect monitoring?"""

from pytest_medhelm import benchmark_test

test_adhd_medeffects = benchmark_test("adhd_medeffects")
