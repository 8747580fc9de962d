"""The MedHELM suite: one test module per benchmark, grouped by category folder.

Run it with ``pytest benchmarks --medhelm-model MODEL``; every test is parametrized per instance and model by
pytest-medhelm. Copy any module as the start of a benchmark of your own.
"""
