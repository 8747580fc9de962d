"""The LLM jury of MedHELM's open-ended benchmarks (HELM ``LLMJuryMetric``).

Every answer of an open-ended benchmark is graded by each judge with the benchmark's judge prompt: HELM v0.5.16's
own (:mod:`pytest_medhelm.jury.instrument`, read as pinned data), or our rubric (:mod:`pytest_medhelm.jury.rubrics`)
as an announced fallback when HELM's files cannot be had. Per instance the jury's raw score is the plain mean of
every valid judge x criterion score, as HELM computes it, and the normalized score ``(raw - 1) / 4``. An empty
answer is not sent to the judges and, like an answer no judge could grade, gets HELM's default 1.0 (normalized 0),
flagged.

How a reply is read and averaged differs from HELM by default and is HELM's under ``--medhelm-compat helm``
(``compat="helm"``; docs/fidelity.md lists every difference): our parser is tolerant and range-checks 1-5, and the
mean is over the benchmark's criteria with each judge's number as given; HELM's greedy-regex parser drops more
judges, accepts any number, ``int()``-s each score and averages every key of the reply. Each judge that could not
be read is excluded for that instance and its reason counted. ``--medhelm-compat medhelm`` reads as HELM does with
medhelm 0.8.0's two changes: no sub-key check, ``float()`` instead of ``int()``.

``DEFAULT_JUDGES`` are the paper's three as litellm model strings: GPT-4o (2024-05-13) on OpenAI, Claude 3.7
Sonnet (20250219) on Anthropic, and Llama 3.3 70B Instruct on Together AI
(``together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo``, the Together AI deployment of that model that litellm
knows and prices; HELM used Stanford's own deployment, which nobody else can reach). litellm's price table has no
entry for ``claude-3-7-sonnet-20250219``: give its price with ``--medhelm-prices`` to count the jury's cost.

Nothing heavy is imported here: this package is imported while pytest collects.
"""

from __future__ import annotations

from pytest_medhelm.jury.instrument import JUDGE_MAX_TOKENS
from pytest_medhelm.jury.parsing import JudgementError, parse_judgement
from pytest_medhelm.jury.parsing_helm import parse_judgement_helm
from pytest_medhelm.jury.rubrics import RUBRICS, Rubric, rubric_for
from pytest_medhelm.jury.scoring import (
                                         FLAG_EMPTY,
                                         FLAG_NO_JUDGE,
                                         HELM_DEFAULT_SCORE,
                                         JuryResult,
                                         JuryVerdicts,
                                         judge_requests,
                                         jury_score,
)

#: the paper's jury (GPT-4o 2024-05-13, Claude 3.7 Sonnet 20250219, Llama 3.3 70B Instruct on Together AI)
DEFAULT_JUDGES: tuple[str, ...] = (
    "openai/gpt-4o-2024-05-13",
    "anthropic/claude-3-7-sonnet-20250219",
    "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
)


__all__ = [
    "DEFAULT_JUDGES", "FLAG_EMPTY", "FLAG_NO_JUDGE", "HELM_DEFAULT_SCORE", "JUDGE_MAX_TOKENS",
    "JudgementError", "JuryResult", "JuryVerdicts", "RUBRICS", "Rubric", "judge_requests", "jury_score",
    "parse_judgement", "parse_judgement_helm", "rubric_for",
]
