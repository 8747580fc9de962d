"""PrivacyDetection: does a clinical message leak confidential information?"""

from pytest_medhelm import benchmark_test

test_privacydetection = benchmark_test("privacydetection")
