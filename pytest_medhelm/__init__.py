"""pytest-medhelm: the MedHELM benchmarks as pytest test suites.

Importing this package costs nothing: the plugin loads litellm, pydantic and the data only when a run uses them.
"""

__version__ = "0.1.0"
