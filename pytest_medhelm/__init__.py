"""pytest-medhelm: the MedHELM benchmarks as pytest test suites.

The public face for benchmark authors and test writers is this package:

    from pytest_medhelm import Benchmark, Instance, DataFile, MultipleChoicePrompt, MULTIPLE_CHOICE_EXACT_MATCH

Importing it costs nothing: each name is imported from its module on first use (the plugin loads litellm,
pydantic and the data only when a run uses them).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__version__ = "0.1.0"

#: the modules whose ``assert`` statements users' tests rely on: the only ones pytest rewrites (see below)
_ASSERTION_MODULES = ("pytest_medhelm.assertions", "pytest_medhelm.testing")


def _rewrite_only_assertion_modules() -> None:
    """Narrow pytest's assertion rewriting of this package to :data:`_ASSERTION_MODULES`.

    pytest marks every top-level package of a ``pytest11`` plugin's distribution for assertion rewriting, so each
    of this package's modules (115 imported by a one-benchmark run) was parsed, rewritten and compiled from source
    in every session that had no cached rewritten bytecode (CI's fresh installs, ``PYTHONDONTWRITEBYTECODE``):
    0.2-0.3 s of CPU at start-up, for ``assert`` statements that only state invariants. Our modules import through
    the normal path (their ordinary ``.pyc``) instead. This runs first thing when the plugin's entry point imports
    the package (only this module has been rewritten by then); outside pytest, or when pytest did not mark the
    whole package (``-p pytest_medhelm.plugin`` with autoloading off), it changes nothing. It reads pytest's
    rewriting hook's set of marked names, which pytest offers no public way to narrow: a pytest without it keeps
    rewriting the package as before.
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        mark_rewrite = getattr(finder, "mark_rewrite", None)
        if isinstance(marked, set) and __name__ in marked and callable(mark_rewrite):
            marked.discard(__name__)
            mark_rewrite(*_ASSERTION_MODULES)  # also clears the hook's memo of names already judged


_rewrite_only_assertion_modules()

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
    "benchmark_test": "pytest_medhelm.assertions",
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
