"""Judge requests for one answer, and the jury's score from the judges' replies."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pytest_medhelm.jury import local_judges
from pytest_medhelm.jury.parsing import JudgementError, parse_judgement, parse_judgement_helm
from pytest_medhelm.jury.rubrics import rubric_for
from pytest_medhelm.models.request import ChatRequest, Completion

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.catalogue.definition import Instance
    from pytest_medhelm.models.request import ModelSpec

#: HELM's generation settings for a judge (``Request(..., temperature=0.0, max_tokens=4096)``)
JUDGE_MAX_TOKENS = 4096
JUDGE_TEMPERATURE = 0.0
#: HELM's ``default_score`` of every MedHELM jury metric: an empty answer, or no judge left, scores this (1-5 scale)
HELM_DEFAULT_SCORE = 1.0

FLAG_EMPTY = "empty answer"
FLAG_NO_JUDGE = "no valid judge"


def judge_requests(slug: str, instance: "Instance", answer_text: str,
                   judges: Sequence["ModelSpec"]) -> list[tuple[str, ChatRequest]]:
    """(judge name, request) for every judge; none for an empty answer (HELM sends none) or a closed benchmark.

    The prompt is the benchmark's rubric with ``{QUESTION}`` = ``instance.input``, ``{RESPONSE}`` = the answer as
    given, ``{GOLD_RESPONSE}`` = ``instance.references[0]``; temperature 0, 4096 tokens, no stop sequence, and
    ``purpose = "judge:<slug>:<rubric version>"`` (part of the cache key). A ``local/...`` judge's request also
    carries the judgement's JSON schema and a smaller ``max_tokens`` (:mod:`pytest_medhelm.jury.local_judges`).
    """
    rubric = rubric_for(slug)
    if rubric is None or not answer_text.strip():
        return []
    gold = instance.references[0] if instance.references else ""
    prompt = rubric.render(instance.input, answer_text, gold)
    requests = []
    for judge in judges:
        if local_judges.constrained(judge.name):  # a llama.cpp server we start: the schema, a small max_tokens
            request = ChatRequest.for_prompt(judge, prompt, local_judges.max_tokens_for(rubric.criteria),
                                             temperature=JUDGE_TEMPERATURE, purpose=rubric.purpose,
                                             response_format=local_judges.response_format(rubric.criteria))
        else:
            request = ChatRequest.for_prompt(judge, prompt, JUDGE_MAX_TOKENS, temperature=JUDGE_TEMPERATURE,
                                             purpose=rubric.purpose)
        requests.append((judge.name, request))
    return requests


@dataclass
class JuryResult:
    """The jury's verdict on one answer.

    ``raw`` is the mean of every valid judge x criterion score (1-5; HELM's 1.0 when the answer is empty or no
    judge could be read, with ``flagged`` saying which); ``normalized`` is ``(raw - 1) / 4``, clipped to [0, 1]
    (only ``compat="helm"``, which accepts HELM's out-of-range scores, can need the clip). ``per_judge`` keeps
    every valid judge's scores and explanations, ``failures`` the reason each other judge was excluded. Tokens and
    cost add up every judge reply received, readable or not; ``cost_usd`` is None when any reply's cost is unknown.
    """

    raw: float
    normalized: float
    per_judge: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    flagged: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    n_scores: int = 0

    @property
    def n_judges(self) -> int:
        return len(self.per_judge)

    def to_record(self) -> dict[str, Any]:
        """The per-instance ``jury`` dict: what the results JSON keeps and :func:`judge_agreement` reads."""
        return {"raw": self.raw, "per_judge": self.per_judge, "failures": self.failures, "flagged": self.flagged}

    def detail(self) -> str:
        """One line: ``jury 3.67/5 (2 judges; claude-3-7-sonnet-20250219: malformed JSON)``."""
        if self.flagged == FLAG_EMPTY:
            core = "empty answer, no judge asked: HELM's default"
        elif self.flagged == FLAG_NO_JUDGE:
            core = "no valid judge: HELM's default"
        else:
            core = f"{self.n_judges} judge{'' if self.n_judges == 1 else 's'}"
        parts = [core] + [f"{_short(name)}: {reason}" for name, reason in self.failures.items()]
        return f"jury {self.raw:.2f}/5 ({'; '.join(parts)})"


def _short(name: str) -> str:
    return name.split("/")[-1]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, JudgementError):
        return exc.reason
    text = str(exc) or type(exc).__name__
    return f"request failed: {text}"


def jury_score(slug: str, completions: Mapping[str, "Completion | BaseException"],
               criteria: Sequence[str] | None = None, *, answer: str | None = None, compat: str = "default",
               default_score: float = HELM_DEFAULT_SCORE) -> JuryResult:
    """The jury's score of one answer from each judge's reply (or the exception its request ended with).

    ``criteria`` defaults to the benchmark's rubric. Pass ``answer`` so that an empty one is flagged as such
    (:func:`judge_requests` sends nothing for it, so ``completions`` is empty). ``compat="helm"`` parses as HELM
    does and truncates each score with ``int()`` (4.5 counts 4); the default keeps the judge's number.
    """
    if criteria is None:
        rubric = rubric_for(slug)
        if rubric is None:
            raise ValueError(f"{slug!r} has no jury rubric (not an open-ended benchmark)")
        criteria = rubric.criteria
    parse = parse_judgement_helm if compat == "helm" else parse_judgement

    per_judge: dict[str, dict[str, dict[str, Any]]] = {}
    failures: dict[str, str] = {}
    scores: list[float] = []
    tokens_in = tokens_out = 0
    cost: float | None = 0.0
    for judge, reply in completions.items():
        if isinstance(reply, BaseException):
            failures[judge] = _reason(reply)
            continue
        tokens_in += int(reply.tokens_in or 0)
        tokens_out += int(reply.tokens_out or 0)
        cost = None if cost is None or reply.cost_usd is None else cost + float(reply.cost_usd)
        try:
            judgement = parse(reply.text, criteria)
        except JudgementError as exc:
            failures[judge] = exc.reason
            continue
        per_judge[judge] = {c: {"score": s, "explanation": e} for c, (s, e) in judgement.items()}
        scores.extend(s for s, _e in judgement.values())

    flagged = None
    if answer is not None and not answer.strip():
        flagged, raw = FLAG_EMPTY, float(default_score)
    elif not scores:
        flagged, raw = FLAG_NO_JUDGE, float(default_score)
    else:
        raw = math.fsum(scores) / len(scores)
    normalized = min(1.0, max(0.0, (raw - 1.0) / 4.0))
    return JuryResult(raw=raw, normalized=normalized, per_judge=per_judge, failures=failures, flagged=flagged,
                      tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost, n_scores=len(scores))
