"""The MedHELM suite: one test module per benchmark, grouped by category folder.

Run it with ``pytest benchmarks --medhelm-model MODEL``; every test is parametrized per instance and model by
pytest-medhelm. A module is ``test_<slug> = benchmark_test("<slug>")`` in its category's folder
(CONTRIBUTING.md, "Adding a benchmark"); a benchmark of your own, registered by your plugin or conftest, is tested
the same way.
"""
