"""pytest-medhelm: the MedHELM benchmarks as pytest test suites.

The public face for benchmark authors and test writers is this package:

    from pytest_medhelm import Benchmark, Instance, DataFile, MultipleChoicePrompt, MULTIPLE_CHOICE_EXACT_MATCH

Importing it costs nothing: each name is imported from its module on first use (the plugin loads litellm,
pydantic and the data only when a run uses them).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    # a benchmark: data, instances, prompt, metric
    "Benchmark": "pytest_medhelm.catalogue.definition",
    "Instance": "pytest_medhelm.values",
    "Loaded": "pytest_medhelm.values",
    "DataFile": "pytest_medhelm.data.sources",
    "DataError": "pytest_medhelm.data.errors",
    "DataMissing": "pytest_medhelm.data.errors",
    "read_csv_rows": "pytest_medhelm.data.readers",
    "read_json": "pytest_medhelm.data.readers",
    "PromptTemplate": "pytest_medhelm.prompting",
    "GenerationPrompt": "pytest_medhelm.prompting",
    "MultipleChoicePrompt": "pytest_medhelm.prompting",
    "Metric": "pytest_medhelm.metrics.base",
    "Score": "pytest_medhelm.metrics.base",
    "ScoringContext": "pytest_medhelm.metrics.base",
    "MULTIPLE_CHOICE_EXACT_MATCH": "pytest_medhelm.metrics.exact_match",
    "GENERATION_EXACT_MATCH": "pytest_medhelm.metrics.exact_match",
    "JuryMetric": "pytest_medhelm.metrics.jury",
    "jury_metric": "pytest_medhelm.metrics.jury",
    # in a test
    "assert_metric": "pytest_medhelm.assertions",
    "score_answer": "pytest_medhelm.assertions",
    "Missed": "pytest_medhelm.item_api",
    "Completion": "pytest_medhelm.values",
    "ModelError": "pytest_medhelm.values",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_medhelm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
