"""Checks and estimates before anything is sent.

* ``--medhelm-local-only``: refuse (a usage error, exit 4) to send gated or private data to a model or judge
  endpoint that is not on loopback or a private network, before any request;
* ``--medhelm-dry-run``: count the prompt tokens offline, add the maximum output tokens and the jury's calls, print
  the estimate per benchmark x model, and exit without sending anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.run.context import RunContext
    from pytest_medhelm.run.plan import PlannedAnswer


def check_local_only(ctx: RunContext) -> None:
    from pytest_medhelm.data.errors import DataMissing
    from pytest_medhelm.data.sources import resolve_files
    from pytest_medhelm.governance import private_network_message, private_network_violations

    rc = ctx.run_config
    benchmarks = []
    for slug in ctx.registry.slugs():
        if rc.benchmarks and slug not in rc.benchmarks:
            continue  # (its definition is not even imported)
        bench = ctx.registry.get(slug)
        if bench.access not in ("gated", "private"):
            continue
        try:
            resolve_files(bench, rc.data_dir, download=False)
        except DataMissing:
            continue  # skipped for want of data: nothing of it can be sent
        benchmarks.append((bench.slug, bench.access, bench.kind))
    violations = private_network_violations([ctx.model_spec(m) for m in rc.models], ctx.judge_specs(), benchmarks,
                                            cache_url=rc.cache_url if rc.cache != "off" else None)
    if violations:
        raise pytest.UsageError(private_network_message(violations))


def identity_lines(ctx: RunContext) -> list[str]:
    """The start-up lines saying where each model under test is sent, and so what its answers are cached and
    priced as; a judge too when litellm's environment (OPENAI_BASE_URL...) moves it off its provider's API."""
    from pytest_medhelm.cache.identity import endpoint_of
    from pytest_medhelm.endpoints.resolve import destination, key_lines

    lines = []
    for name in ctx.run_config.models:
        spec = ctx.model_spec(name)
        moved = not spec.api_base and endpoint_of(spec.litellm_model, None).url is not None
        lines.append(f"medhelm model: {name} → {destination(spec)}" + (
            " (answers cached and priced as that server's, not the provider's)" if moved else ""))
    for spec in ctx.judge_specs():
        if not spec.api_base and endpoint_of(spec.litellm_model, None).url is not None:
            lines.append(f"medhelm judge: {spec.name} → {destination(spec)} (cached and priced as that server's)")
    return lines + key_lines([ctx.model_spec(name) for name in ctx.run_config.models], ctx.judge_specs())


def announce_judges(ctx: RunContext, write_line: Any) -> None:
    """Before the first judge request of a run whose model under test is local: one line per judge that a
    provider's public API would get (a hospital keeping its model on its network must not learn that from a bill),
    and what a local judge's requests do differently from HELM's."""
    from pytest_medhelm.endpoints.resolve import startup_lines
    from pytest_medhelm.jury import JUDGE_MAX_TOKENS, llama_judges

    judges = ctx.judge_specs()
    for line in startup_lines([ctx.model_spec(m) for m in ctx.run_config.models], judges):
        write_line(line, {"yellow": True})
    notice = llama_judges.notice([j.name for j in judges], JUDGE_MAX_TOKENS)
    if notice:
        write_line(notice, {"yellow": True})


def dry_run(ctx: RunContext, planned: list[PlannedAnswer], write_line: Any) -> None:
    """Print the estimate and exit (``pytest.exit``, status 0)."""
    from pytest_medhelm.dryrun import JUDGE_MAX_TOKENS, estimate, render
    from pytest_medhelm.tokens import TokenCounter

    judges = ctx.judge_names()
    judged = {p.instance.benchmark for p in planned if ctx.registry.get(p.instance.benchmark).is_judged}
    graded = {slug for slug in judged if getattr(ctx.registry.get(slug).metric, "rubric_graded", False)}
    judged -= graded  # HealthBench's are counted as the rubric grader's calls, one per criterion
    counter = TokenCounter()
    work = grader_work(ctx, [p for p in planned if p.instance.benchmark in graded], counter, write_line)
    instrument = None
    if judged:
        # the judges' prompts as a run would send them, counted; nothing is downloaded for a dry run
        instrument, missing = ctx.jury(download_allowed=False)
        write_line(f"medhelm dry run: judge prompts {instrument.name}" + (
            "" if missing is None else " (HELM's judge prompts are not on this machine: a run downloads them once "
            "and asks those, of about the same length; counted here with pytest-medhelm's rubric)"))
    items = [(p.instance.benchmark, p.model, p.request.prompt_text, p.request.max_tokens,
              instrument.judge_prompt_without_answer(p.instance.benchmark, p.instance)
              if instrument is not None and p.instance.benchmark in judged else None) for p in planned]
    specs = {m: ctx.model_spec(m) for m in ctx.run_config.models}
    specs.update({j: ctx.judge_spec(j) for j in judges})
    specs.update({w.grader: ctx.judge_spec(w.grader) for w in work})
    litellm_models = {name: spec.litellm_model for name, spec in specs.items()}
    if ctx.prices.batched:  # --medhelm-batch
        write_line("medhelm dry run: --medhelm-batch: priced at the batch rate: " + ", ".join(
            f"{name} ×{factor:g}" for name, factor in ctx.prices.batched.items()))
    budgets = {name: spec.reasoning.budget for name, spec in specs.items() if spec.reasoning is not None}
    for name, spec in specs.items():  # which models are treated as reasoning models, and their room to think
        if spec.reasoning is not None:
            write_line(f"medhelm dry run: {name} is a reasoning model ({spec.reasoning.family}): "
                       f"{spec.reasoning.budget:,} reasoning tokens reserved on top of each answer limit")
    rows = estimate(items, judges if judged else (), open_benchmarks=judged,
                    prices=_RunPrices(ctx, specs),  # type: ignore[arg-type]  # the estimate asks only price_for
                    litellm_models=litellm_models, judge_max_tokens=JUDGE_MAX_TOKENS, count_tokens=counter,
                    grader_work=work, reasoning_budgets=budgets)
    for line in render(rows, judges if judged else (), reasoning=bool(budgets)).splitlines():
        write_line(line)
    pytest.exit("medhelm dry run: nothing was sent", returncode=0)


def grader_work(ctx: RunContext, planned: list[PlannedAnswer], counter: Any, write_line: Any) -> list[Any]:
    """The rubric grader's calls for each planned answer of a HealthBench benchmark, counted offline: one per
    criterion and grader (plus HealthBench Professional's comparison), each prompt the grader template with the
    conversation, the criterion and the answer at its longest. The template is counted once per grader, the
    conversation once per answer: the sum of the parts (token boundaries aside) is the prompt's count."""
    from pytest_medhelm.dryrun import JUDGE_PROMPT_TOKENS_ESTIMATE, GraderWork
    from pytest_medhelm.jury.rubric_grader import (
        FORK_MAX_TOKENS,
        REFERENCE_MAX_TOKENS,
        fork_rubric_item,
        has_positive_points,
        reference_rubric_item,
    )
    from pytest_medhelm.run.plan import rubric_metric

    work: list[GraderWork] = []
    template_tokens: dict[tuple[str, bool], int] = {}
    said: set[bool] = set()
    for p in planned:
        fork = rubric_metric(ctx, p.instance.benchmark).fork_prompts(ctx.run_config.compat)
        graders = ctx.judge_names() if fork else [ctx.grader_name(p.instance.benchmark)]
        prompts = ctx.grader_prompts(fork, download_allowed=False)
        template = prompts.fork_rubric if fork else prompts.reference
        if template is None and fork not in said:
            said.add(fork)
            write_line("medhelm dry run: the rubric grader's prompt is not on this machine (a run downloads it "
                       f"once); counted with an allowance of {JUDGE_PROMPT_TOKENS_ESTIMATE} tokens per call")
        grading = p.instance.extra["grading"]
        # (the reference asks nothing about a rubric without positive points, and compares with no physician)
        items = grading["rubric_items"] if fork or has_positive_points(grading["rubric_items"]) else []
        render_item = fork_rubric_item if fork else reference_rubric_item
        comparison = 1 if fork and grading.get("physician_response") is not None else 0
        for grader in graders:
            key = (grader, fork)
            if key not in template_tokens:
                template_tokens[key] = counter(grader, template) if template else JUDGE_PROMPT_TOKENS_ESTIMATE
            conversation = counter(grader, "\n\n".join(f"{m['role']}: {m['content']}" for m in grading["messages"]))
            per_call = template_tokens[key] + conversation + p.request.max_tokens
            tokens = sum(per_call + counter(grader, render_item(item)) for item in items)
            if comparison:  # the physician's answer and the model's answer again
                tokens += per_call + p.request.max_tokens + counter(grader, grading["physician_response"])
            reasoning = ctx.judge_spec(grader).reasoning  # (a reasoning grader's budget is reserved too)
            work.append(GraderWork(p.instance.benchmark, p.model, grader, len(items) + comparison, tokens,
                                   (FORK_MAX_TOKENS if fork else REFERENCE_MAX_TOKENS)
                                   + (reasoning.budget if reasoning is not None else 0)))
    return work


class _RunPrices:
    """The run's own pricing rule for the estimate (:meth:`RunContext.price_of`: a model at an endpoint that is not
    its provider's public API is priced by the prices file only), in the shape the estimate asks for."""

    def __init__(self, ctx: RunContext, specs: dict[str, Any]) -> None:
        self.ctx, self.specs = ctx, specs

    def price_for(self, model_name: str, litellm_model: str | None = None):
        spec = self.specs.get(model_name)
        return self.ctx.price_of(spec) if spec is not None else self.ctx.prices.price_for(model_name, litellm_model)
