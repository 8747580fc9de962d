"""The jury package itself (jury/__init__.py): the paper's judges, and importing it imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

from pytest_medhelm.jury import (
    DEFAULT_JUDGES,
)


def test_default_judges_are_the_papers_three_as_litellm_strings():
    assert DEFAULT_JUDGES == ("openai/gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet-20250219",
                              "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo")


def test_importing_the_jury_imports_nothing_heavy():
    code = ("import sys, pytest_medhelm.jury, pytest_medhelm.metrics.jury;"
            "print([m for m in ('numpy', 'torch', 'transformers', 'bert_score', 'litellm', 'rouge_score', 'nltk')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
