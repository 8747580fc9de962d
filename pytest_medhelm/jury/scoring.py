"""Judge requests for one answer, and the jury's score from the judges' replies."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_medhelm.compat import is_medhelm, reproduces_helm
from pytest_medhelm.cost import add_costs
from pytest_medhelm.jury.parsing import JudgementError, parse_judgement
from pytest_medhelm.jury.parsing_helm import parse_judgement_helm
from pytest_medhelm.values import ChatRequest, Completion

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.jury.instrument import JuryInstrument
    from pytest_medhelm.values import Instance, ModelSpec

#: HELM's ``default_score`` of every MedHELM jury metric: an empty answer, or no judge left, scores this (1-5 scale)
HELM_DEFAULT_SCORE = 1.0

FLAG_EMPTY = "empty answer"
FLAG_NO_JUDGE = "no valid judge"


def judge_requests(slug: str, instance: Instance, answer_text: str, judges: Sequence[ModelSpec],
                   instrument: JuryInstrument | None = None) -> list[tuple[str, ChatRequest]]:
    """(judge name, request) for every judge; none for an empty answer (HELM sends none) or a closed benchmark.

    ``instrument``: the run's judge prompts (:func:`~pytest_medhelm.jury.instrument.load_jury_instrument`); default
    our own rubric. The prompt has ``{QUESTION}`` = ``instance.input``, ``{RESPONSE}`` = the answer as given,
    ``{GOLD_RESPONSE}`` = ``instance.references[0]``; temperature 0, 4096 tokens, no stop sequence, and a
    ``purpose`` naming the instrument (part of the cache key). A ``local/...`` judge's request also carries the
    judgement's JSON schema and a smaller ``max_tokens`` (:mod:`pytest_medhelm.jury.llama_judges`).
    """
    from pytest_medhelm.jury.instrument import default_instrument

    return (instrument or default_instrument()).judge_requests(slug, instance, answer_text, judges)


@dataclass
class JuryVerdicts:
    """What the judges said about one answer (``replies``: judge -> Completion or the error its request ended
    with), with what they were asked: the sha256 of each request's prompt, the criteria and the instrument."""

    replies: dict[str, Completion | BaseException]
    judge_prompt_sha256: list[str]
    criteria: tuple[str, ...]
    instrument: str


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
    #: sha256 of the prompt of each judge request made for this answer (none for an empty answer)
    judge_prompt_sha256: list[str] = field(default_factory=list)

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


def _medhelm_reading(text: str, criteria: Sequence[str]) -> dict[str, tuple[float, str]]:
    """medhelm 0.8.0's reading of a judge's reply (``model_as_judge.py``, ``llm_jury_metrics.py``)."""
    return parse_judgement_helm(text, criteria, subkeys=(), read_score=float)


def _reading(compat: str) -> Callable[[str, Sequence[str]], dict[str, tuple[float, str]]]:
    """How a judge's reply is read under ``compat``: ours (tolerant, range-checked), HELM 0.5.16's, the fork's."""
    if is_medhelm(compat):
        return _medhelm_reading
    return parse_judgement_helm if reproduces_helm(compat) else parse_judgement


def jury_score(slug: str, completions: Mapping[str, Completion | BaseException] | JuryVerdicts,
               criteria: Sequence[str] | None = None, *, answer: str | None = None, compat: str = "default",
               default_score: float = HELM_DEFAULT_SCORE, instrument: JuryInstrument | None = None) -> JuryResult:
    """The jury's score of one answer from each judge's reply (or the exception its request ended with).

    ``completions``: judge -> reply, or a :class:`JuryVerdicts` (the run's, whose criteria and prompt
    hashes are then used). ``criteria`` defaults to ``instrument``'s for the benchmark (default instrument: our
    rubric). Pass ``answer`` so that an empty one is flagged as such (no judge is asked for it, so ``completions``
    is empty).

    Default: each judge's reply read by :func:`~pytest_medhelm.jury.parsing.parse_judgement` (tolerant, scores
    range-checked 1-5), the mean over the judges x ``criteria``. ``compat="helm"``: HELM's aggregation
    (:func:`~pytest_medhelm.jury.parsing.parse_judgement_helm`): a judge is kept only with every criterion and its
    ``score`` and ``explanation``, then every key of its reply is averaged (extra keys too), each score ``int()``-ed.
    ``compat="medhelm"``: the same with medhelm 0.8.0's two changes, only the criteria checked (not their
    ``score`` and ``explanation`` sub-keys) and each score read with ``float()`` (4.9 stays 4.9).
    """
    prompt_hashes: list[str] = []
    if isinstance(completions, JuryVerdicts):
        prompt_hashes = list(completions.judge_prompt_sha256)
        criteria = completions.criteria if criteria is None else criteria
        completions = completions.replies
    if criteria is None:
        from pytest_medhelm.jury.instrument import default_instrument

        criteria = (instrument or default_instrument()).criteria(slug)
    parse = _reading(compat)

    per_judge: dict[str, dict[str, dict[str, Any]]] = {}
    failures: dict[str, str] = {}
    scores: list[float] = []
    tokens_in = tokens_out = 0
    costs: list[float | None] = []
    for judge, reply in completions.items():
        if isinstance(reply, BaseException):
            failures[judge] = _reason(reply)
            continue
        tokens_in += int(reply.tokens_in or 0)
        tokens_out += int(reply.tokens_out or 0)
        costs.append(None if reply.cost_usd is None else float(reply.cost_usd))
        try:
            judgement = (parse_judgement(reply.text, criteria, answer or "") if parse is parse_judgement
                         else parse(reply.text, criteria))
        except JudgementError as exc:
            failures[judge] = exc.reason
            continue
        except Exception as exc:  # noqa: BLE001 - a reply no parser foresaw excludes its judge, not the jury
            failures[judge] = f"unreadable reply ({type(exc).__name__}: {str(exc)[:200]})"
            continue
        per_judge[judge] = {c: {"score": s, "explanation": e} for c, (s, e) in judgement.items()}
        scores.extend(s for s, _e in judgement.values())

    flagged = None
    if answer is not None and not answer.strip():
        flagged, raw = FLAG_EMPTY, float(default_score)
    elif not scores:
        flagged, raw = FLAG_NO_JUDGE, float(default_score)
    else:
        raw = _mean(scores)
    normalized = min(1.0, max(0.0, (raw - 1.0) / 4.0))
    return JuryResult(raw=raw, normalized=normalized, per_judge=per_judge, failures=failures, flagged=flagged,
                      tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=add_costs(costs), n_scores=len(scores),
                      judge_prompt_sha256=prompt_hashes)


def _mean(scores: list[float]) -> float:
    """The mean of finite scores, as the references take it; scores whose sum overflows a float (a judge's reply
    may state any finite number under --medhelm-compat medhelm) are averaged term by term instead of raising."""
    try:
        return math.fsum(scores) / len(scores)
    except OverflowError:
        return math.fsum(score / len(scores) for score in scores)
