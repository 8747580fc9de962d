"""The answer plan: what the run will ask, built once.

* benchmark x instance x model -> the benchmark's request (its exact prompt and generation settings), remembered
  so that the item reuses that very request (and its computed cache key);
* an answer -> the judge requests of the jury, for a benchmark that is judged. This is the only place the jury's
  requests are planned: the sender's follow-ups, a worker's wait and the item's scoring all come here. A rubric-graded
  benchmark's (HealthBench's) grader requests, one per criterion, are judge requests too, planned here as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.metrics.healthbench import RubricGradedMetric
    from pytest_medhelm.run.context import RunContext
    from pytest_medhelm.values import ChatRequest, Instance, ModelSpec


@dataclass(frozen=True)
class PlannedAnswer:
    model: str
    instance: Instance
    request: ChatRequest

    @property
    def key(self) -> str:
        return self.request.cache_key()


@dataclass(frozen=True)
class JudgeRequest:
    judge: str
    spec: ModelSpec
    request: ChatRequest


class AnswerPlan:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._planned: dict[tuple[str, str, str], tuple[Any, ChatRequest]] = {}
        self._by_key: dict[str, list[Instance]] = {}

    def is_judged(self, slug: str) -> bool:
        return slug in self.ctx.registry and self.ctx.registry.get(slug).is_judged

    def answers(self, pairs: Iterable[tuple[Instance, str]]) -> list[PlannedAnswer]:
        """The request of every (instance, model), in the order given (item order: the first items' answers are
        sent first)."""
        out = []
        for instance, model in pairs:
            request = self.request_for(instance, model)
            self._planned[(instance.benchmark, instance.id, model)] = (instance, request)
            self._by_key.setdefault(request.cache_key(), []).append(instance)
            out.append(PlannedAnswer(model, instance, request))
        return out

    def request_for(self, instance: Instance, model: str) -> ChatRequest:
        """The benchmark's request for ``instance`` to ``model``: its exact prompt and generation settings, its
        ``max_tokens`` under the run's ``--medhelm-max-tokens`` cap."""
        from pytest_medhelm.report.generation_cap import capped

        bench = self.ctx.registry.get(instance.benchmark)
        return bench.request_for(self.ctx.model_spec(model), instance,
                                 capped(bench.max_tokens, self.ctx.run_config.max_tokens),
                                 compat=self.ctx.run_config.compat)

    def keys_of(self, slug: str) -> list[tuple[str, list[Instance]]]:
        """(answer key, its instances) of every planned answer of benchmark ``slug``."""
        return [(key, instances) for key, instances in self._by_key.items()
                if any(i.benchmark == slug for i in instances)]

    def instances_of(self, answer_key: str) -> list[Instance]:
        """The instances a planned answer request asks about (several, when their prompts are the same)."""
        return self._by_key.get(answer_key, [])

    def answer_request(self, instance: Instance, model: str) -> ChatRequest:
        """The request planned for ``instance`` (that very object) and ``model``, else one built the same way."""
        planned = self._planned.get((instance.benchmark, instance.id, model))
        return planned[1] if planned is not None and planned[0] is instance else self.request_for(instance, model)

    def is_graded(self, slug: str) -> bool:
        """Whether the benchmark is graded per rubric criterion (HealthBench) rather than by the jury."""
        return slug in self.ctx.registry and bool(getattr(self.ctx.registry.get(slug).metric, "rubric_graded", False))

    def graders(self, slug: str) -> tuple[bool, list[ModelSpec]]:
        """(the fork's prompts?, the graders) of a rubric-graded benchmark under the run's compat: the grader
        (``--medhelm-grader``) for the reference, every judge of the jury for medhelm 0.8.0's grading."""
        fork = rubric_metric(self.ctx, slug).fork_prompts(self.ctx.run_config.compat)
        return fork, (self.ctx.judge_specs() if fork else [self.ctx.grader_spec(slug)])

    def grader_calls(self, instance: Instance, answer_text: str) -> tuple[list[Any], dict[str, ModelSpec]]:
        """The rubric grader's requests for ``answer_text`` (:func:`pytest_medhelm.jury.rubric_grader.grading_calls`)
        and the graders by name. This is the only place they are planned. Raises
        :class:`~pytest_medhelm.jury.rubric_grader.GraderPromptsUnavailable` when the prompts cannot be had."""
        from pytest_medhelm.jury.rubric_grader import grading_calls

        fork, graders = self.graders(instance.benchmark)
        effort = rubric_metric(self.ctx, instance.benchmark).grader_effort
        calls = grading_calls(instance.benchmark, instance, answer_text, graders, self.ctx.grader_prompts(fork), fork,
                              effort=effort)
        return calls, {spec.name: spec for spec in graders}

    def judging_specs(self, slugs: Iterable[str]) -> list[ModelSpec]:
        """The judges and graders the benchmarks ``slugs`` are scored by (the jury's, a rubric grader's)."""
        specs: dict[str, ModelSpec] = {}
        for slug in dict.fromkeys(slugs):
            if self.is_judged(slug):
                for spec in self.graders(slug)[1] if self.is_graded(slug) else self.ctx.judge_specs():
                    specs.setdefault(spec.name, spec)
        return list(specs.values())

    def judge_requests(self, instance: Instance, answer_text: str) -> list[JudgeRequest]:
        """The jury's requests for ``answer_text``: one per judge, none for an empty answer or an unjudged
        benchmark."""
        if not self.is_judged(instance.benchmark):
            return []
        if self.is_graded(instance.benchmark):  # HealthBench: one request per rubric criterion and grader
            from pytest_medhelm.jury.rubric_grader import GraderPromptsUnavailable

            try:
                calls, specs = self.grader_calls(instance, answer_text)
            except GraderPromptsUnavailable:  # nothing to send: each item's metric says why
                return []
            return [JudgeRequest(call.grader, specs[call.grader], call.request) for call in calls]
        judges = self.ctx.judge_specs()
        specs = {spec.name: spec for spec in judges}
        requests = self.ctx.jury_instrument.judge_requests(instance.benchmark, instance, answer_text, judges)
        return [JudgeRequest(name, specs[name], request) for name, request in requests]


def rubric_metric(ctx: RunContext, slug: str) -> RubricGradedMetric:
    """The metric of a benchmark graded per rubric criterion (HealthBench)."""
    from pytest_medhelm.metrics.healthbench import RubricGradedMetric

    metric = ctx.registry.get(slug).metric
    if not isinstance(metric, RubricGradedMetric):
        raise TypeError(f"{slug} is not graded per rubric criterion (its metric is {metric!r})")
    return metric
