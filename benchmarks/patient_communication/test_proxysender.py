"""ProxySender: was a portal message sent by a proxy user rather than the patient?"""

from pytest_medhelm import benchmark_test

test_proxysender = benchmark_test("proxysender")
