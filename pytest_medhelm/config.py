"""One validated run configuration from options and ini keys.

Built once per process, and only when the plugin is used (a medhelm option is given or a medhelm item is
collected): pydantic is imported here and nowhere at plugin load. Any problem raises ``pytest.UsageError``, whose
message names the option and what was expected; pytest turns it into exit status 4 before any model is called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_medhelm.options import (
    INI_ENDPOINTS,
    INI_THRESHOLDS,
    OPTIONS,
    Option,
    from_ini,
    parse_endpoint,
    parse_threshold,
    raw_value,
)

if TYPE_CHECKING:
    from pytest_medhelm.values import ModelSpec


class Threshold(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # a benchmark slug, a category slug, or "overall" (normalized in from_pytest)
    value: float = Field(ge=0.0, le=1.0)
    spec: str  # as the user wrote it


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[str, ...] = ()
    api_base: str | None = None
    #: (model or judge name, its own URL), from --medhelm-endpoint and the ini key medhelm_endpoints
    endpoints: tuple[tuple[str, str], ...] = ()
    #: NAMES of environment variables holding the keys of the models' / the judges' endpoints (never keys)
    api_key_env: str | None = None
    jury_api_key_env: str | None = None
    benchmarks: tuple[str, ...] = ()
    max_instances: int | None = Field(default=None, ge=1)
    #: --medhelm-max-tokens: every benchmark's max_tokens capped at this (a departure from MedHELM's settings)
    max_tokens: int | None = Field(default=None, ge=1)
    #: --medhelm-reasoning-budget / --medhelm-reasoning-effort (pytest_medhelm.sending.reasoning); None: not given
    reasoning_budget: int | None = Field(default=None, ge=0)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    data_dir: Path | None = None
    cache_dir: Path
    cache: Literal["on", "off", "refresh"] = "on"
    #: the shared answer cache behind the local one (--medhelm-cache-url), a redis:// URL
    cache_url: str | None = None
    concurrency: int = Field(default=16, ge=1)
    timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    retries: int = Field(default=3, ge=0)
    thresholds: tuple[Threshold, ...] = ()
    json_path: Path | None = None
    markdown_path: Path | None = None
    strict: bool = False
    strict_gates: bool = False
    compat: Literal["default", "helm", "medhelm"] = "default"
    local_ctx: int = Field(default=8192, ge=256)
    local_threads: int | None = Field(default=None, ge=1)
    judges: tuple[str, ...] = ()  # empty: the paper's three (pytest_medhelm.jury)
    jury_api_base: str | None = None
    bertscore_model: str | None = None
    save: str | None = None
    autosave: bool = False
    compare: str | None = None  # "latest", a saved run's name, or a path
    compare_fail: tuple[tuple[str, float], ...] = ()
    #: --medhelm-power: each gate's minimum detectable effect in the summary and the results
    power: bool = False
    shard: tuple[int, int] | None = None
    dry_run: bool = False
    budget: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    prices: Path | None = None
    html_path: Path | None = None
    local_only: bool = False
    #: --medhelm-batch: requests to endpoints with a Batch API go as batches (pytest_medhelm.sending.batching)
    batch: bool = False
    #: --medhelm-batch-timeout: seconds a run waits for one submitted batch (the provider's window by default)
    batch_timeout: float = Field(default=86400.0, gt=0, allow_inf_nan=False)
    #: benchmarks whose files may differ from their pinned sha256 (--medhelm-data-unverified)
    data_unverified: tuple[str, ...] = ()
    #: HELM run-entry arguments per benchmark (--medhelm-benchmark-args SLUG:NAME=VALUE,...): (slug, ((name, value),))
    benchmark_args: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    report_text: bool = False
    #: HealthBench's rubric grader (--medhelm-grader) and examples (--medhelm-healthbench-subset)
    grader: str = "openai/gpt-4.1-2025-04-14"
    #: HealthBench Professional's grader: its reference's (simple-evals PR #108), or --medhelm-grader when given
    professional_grader: str = "openai/gpt-5.4-2026-03-05"
    healthbench_subset: Literal["full", "hard", "consensus"] = "full"

    @field_validator("cache_url")
    @classmethod
    def _cache_url(cls, value: str | None) -> str | None:
        from pytest_medhelm.cache.shared import url_problem

        problem = None if value is None else url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("jury_api_base")
    @classmethod
    def _jury_url(cls, value: str | None) -> str | None:
        return cls._url(value)

    @field_validator("api_base")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
        return value.rstrip("/") if value else value

    @field_validator("models")
    @classmethod
    def _models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name.strip() or name != name.strip():
                raise ValueError(f"expected a litellm model string like 'openai/gpt-4o', got {name!r}")
        if len(set(value)) != len(value):
            raise ValueError(f"a model is given twice: {list(value)}")
        return value

    @field_validator("grader", "professional_grader")
    @classmethod
    def _grader(cls, value: str) -> str:
        if not value.strip() or value != value.strip():
            raise ValueError(f"expected a litellm model string like 'openai/gpt-4.1-2025-04-14', got {value!r}")
        return value

    @property
    def endpoint_map(self) -> dict[str, str]:
        return dict(self.endpoints)

    def arguments_of(self, slug: str) -> tuple[tuple[str, str], ...]:
        """The --medhelm-benchmark-args pairs given for ``slug``, in order (a later value of a name wins)."""
        return tuple(pair for name, pairs in self.benchmark_args if name == slug for pair in pairs)

    def public_options(self) -> dict[str, Any]:
        """The options for the results JSON (no secrets are ever in here: keys come from the environment)."""
        from pytest_medhelm.values import redact_url

        data = self.model_dump(mode="json")
        data["thresholds"] = [t.spec for t in self.thresholds]
        for name in ("api_base", "jury_api_base", "cache_url"):  # (URLs may carry credentials: never stored)
            if isinstance(data.get(name), str):
                data[name] = redact_url(data[name])
        data["endpoints"] = [[model, redact_url(url)] for model, url in self.endpoints]
        return data


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"pytest-medhelm: {message}")


def from_pytest(config: pytest.Config, known_benchmarks: set[str], registry: Any = None) -> RunConfig:
    """``registry`` (the run's benchmarks) checks --medhelm-benchmark-args; without it, the built-in ones."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        try:
            values[opt.dest] = raw_value(config, opt)
        except argparse.ArgumentTypeError as exc:
            raise _usage(f"ini key {opt.dest}: {exc}") from None

    thresholds = list(values.pop("medhelm_threshold") or [])
    for line in config.getini(INI_THRESHOLDS):
        try:
            thresholds.append(parse_threshold(line))
        except argparse.ArgumentTypeError as exc:
            raise _usage(f"ini key {INI_THRESHOLDS}: {exc}") from None
    gates = [_threshold(name, value, known_benchmarks) for name, value in thresholds]

    endpoints_cli = list(values.pop("medhelm_endpoint") or [])
    endpoints_ini = []
    for line in config.getini(INI_ENDPOINTS):
        try:
            endpoints_ini.append(parse_endpoint(line))
        except argparse.ArgumentTypeError as exc:
            raise _usage(f"ini key {INI_ENDPOINTS}: {exc}") from None

    for slug in values["medhelm_benchmark"] or []:
        if slug not in known_benchmarks:
            raise _usage(f"{_where(config, OPTION['medhelm_benchmark'])} {slug!r}: unknown benchmark; known: "
                         f"{', '.join(sorted(known_benchmarks))}")
    for slug in values["medhelm_data_unverified"] or []:
        if slug not in known_benchmarks:
            raise _usage(f"--medhelm-data-unverified {slug!r} (ini key medhelm_data_unverified): unknown benchmark; "
                         f"known: {', '.join(sorted(known_benchmarks))}")

    benchmark_args = tuple(values["medhelm_benchmark_args"] or ())
    _check_benchmark_args(config, benchmark_args, known_benchmarks, values["medhelm_compat"], registry)

    rootdir = Path(str(config.rootpath))
    for name, _drop in values["medhelm_compare_fail"] or []:
        if name.lower() != "overall":
            _threshold(name, 0.0, known_benchmarks, what=f"--medhelm-compare-fail {name}:{_drop:g}")
    given = dict(values)
    for opt in OPTIONS:
        if opt.path and values[opt.dest] is not None:
            values[opt.dest] = _resolve(config, opt, values[opt.dest])
    prices = values["medhelm_prices"]
    if prices is not None and not prices.is_file():
        raise _usage(f"{_named(config, 'medhelm_prices', given, prices)}: no such file (expected a TOML file of "
                     "model prices)")
    if prices is not None:
        from pytest_medhelm.cost import PricesError, parse_prices

        try:
            parse_prices(prices)
        except PricesError as exc:
            raise _usage(str(exc)) from None

    data_dir = values["medhelm_data_dir"]
    if data_dir is not None and not data_dir.is_dir():
        raise _usage(f"{_named(config, 'medhelm_data_dir', given, data_dir)}: not a directory")
    cache_dir = values["medhelm_cache_dir"] or rootdir / ".medhelm_cache"

    try:
        rc = RunConfig(
            models=tuple(values["medhelm_model"] or ()),
            api_base=values["medhelm_api_base"],
            # the command line wins over the ini file, model by model
            endpoints=tuple(dict([*endpoints_ini, *endpoints_cli]).items()),
            api_key_env=values["medhelm_api_key_env"],
            jury_api_key_env=values["medhelm_jury_api_key_env"],
            benchmarks=tuple(values["medhelm_benchmark"] or ()),
            max_instances=values["medhelm_max_instances"],
            max_tokens=values["medhelm_max_tokens"],
            reasoning_budget=values["medhelm_reasoning_budget"],
            reasoning_effort=values["medhelm_reasoning_effort"],
            data_dir=data_dir,
            cache_dir=cache_dir,
            cache=values["medhelm_cache"],
            cache_url=values["medhelm_cache_url"],
            concurrency=values["medhelm_concurrency"],
            timeout=values["medhelm_timeout"],
            retries=values["medhelm_retries"],
            thresholds=tuple(gates),
            json_path=values["medhelm_json"],
            markdown_path=values["medhelm_markdown"],
            strict=bool(values["medhelm_strict"]),
            strict_gates=bool(values["medhelm_strict_gates"]),
            compat=values["medhelm_compat"],
            local_ctx=values["medhelm_local_ctx"],
            local_threads=values["medhelm_local_threads"],
            judges=tuple(values["medhelm_jury"] or ()),
            jury_api_base=values["medhelm_jury_api_base"],
            bertscore_model=values["medhelm_bertscore_model"],
            save=values["medhelm_save"],
            autosave=bool(values["medhelm_autosave"]),
            compare=values["medhelm_compare"],
            compare_fail=tuple(values["medhelm_compare_fail"] or ()),
            power=bool(values["medhelm_power"]),
            shard=values["medhelm_shard"],
            dry_run=bool(values["medhelm_dry_run"]),
            budget=values["medhelm_budget"],
            prices=values["medhelm_prices"],
            html_path=values["medhelm_html"],
            local_only=bool(values["medhelm_local_only"]),
            data_unverified=tuple(values["medhelm_data_unverified"] or ()),
            report_text=bool(values["medhelm_report_text"]),
            grader=values["medhelm_grader"] or "openai/gpt-4.1-2025-04-14",
            professional_grader=values["medhelm_grader"] or "openai/gpt-5.4-2026-03-05",
            healthbench_subset=values["medhelm_healthbench_subset"] or "full",
            benchmark_args=benchmark_args,
            batch=bool(values["medhelm_batch"]),
            batch_timeout=values["medhelm_batch_timeout"],
        )
    except ValidationError as exc:
        problems = "; ".join(f"{_field_name(config, err['loc'])}: {err['msg']}" for err in exc.errors())
        raise _usage(problems) from None
    check_endpoints(rc, endpoints_cli, endpoints_ini, config, sending=getattr(config, "workerinput", None) is None)
    return rc


def _check_benchmark_args(config: pytest.Config, given: tuple, known_benchmarks: set[str], compat: str,
                          registry: Any) -> None:
    """Each --medhelm-benchmark-args names a known benchmark that takes arguments, and its values read (a usage
    error otherwise, before anything is collected)."""
    where = _where(config, OPTION["medhelm_benchmark_args"])
    for slug in dict(given):
        if slug not in known_benchmarks:
            raise _usage(f"{where} {slug!r}: unknown benchmark; known: {', '.join(sorted(known_benchmarks))}")
    if not given:
        return
    if registry is None:
        from pytest_medhelm.catalogue import builtin_benchmarks

        registry = builtin_benchmarks()
    by_slug = {bench.slug: bench for bench in registry}
    for slug in dict(given):
        bench = by_slug.get(slug)
        pairs = tuple(pair for name, p in given if name == slug for pair in p)
        if bench is None or bench.read_arguments is None:
            raise _usage(f"{where} {slug}: this benchmark takes no arguments")
        try:
            bench.read_arguments(pairs, compat)
        except ValueError as exc:
            accepted = "; ".join(f"{name}: {meaning}" for name, meaning in bench.arguments)
            raise _usage(f"{where}: {exc} ({slug} takes {accepted})") from None


def _source(config: pytest.Config, option: str) -> str:
    """``--medhelm-x`` when the value came from the command line, else ``ini key medhelm_x``."""
    dest = "medhelm_" + option.removeprefix("--medhelm-").replace("-", "_")
    return option if config.getoption(dest) not in (None, []) else f"ini key {dest}"


def check_endpoints(rc: RunConfig, endpoints_cli: list[tuple[str, str]], endpoints_ini: list[tuple[str, str]],
                    config: pytest.Config, sending: bool) -> None:
    """Endpoints, key variables and model strings, before anything is sent (usage errors naming the option).

    ``sending``: this process may send requests (not an xdist worker, which only reads answers): then a model
    string litellm cannot route is refused here, once, instead of failing every item with litellm's paragraph."""
    from pytest_medhelm.endpoints import resolve as ep
    from pytest_medhelm.jury import DEFAULT_JUDGES

    # the rubric graders are reached as judges are (HealthBench's and HealthBench Professional's, the last one the
    # --medhelm-grader when given)
    graders = tuple(dict.fromkeys((rc.professional_grader, rc.grader)))
    judges = (*(rc.judges or DEFAULT_JUDGES), *graders)
    problems = ep.endpoint_problems(endpoints_cli, source="--medhelm-endpoint", models=rc.models, judges=judges,
                                    strict_names=True)
    problems += ep.endpoint_problems(endpoints_ini, source=f"ini key {INI_ENDPOINTS}", models=rc.models,
                                     judges=judges, strict_names=False)
    if problems:
        raise _usage("; ".join(problems))
    models = [ep.spec_for(rc, m, "model") for m in rc.models]
    judge_specs = [ep.spec_for(rc, j, "judge") for j in judges]
    key_checks: tuple[tuple[Literal["model", "judge"], str | None, list[ModelSpec]], ...] = (
        ("model", rc.api_key_env, models), ("judge", rc.jury_api_key_env, judge_specs))
    for role, env, specs in key_checks:
        problem = ep.key_problem(role, env, specs, _source(config, ep.ROLE_OPTIONS[role][1]))
        if problem:
            raise _usage(problem)
    if not sending or config.getoption("medhelm_list") or config.getoption("medhelm_tree"):
        return
    foreign = ep.foreign_key_problems(models, "model", rc.endpoint_map)
    foreign += ep.foreign_key_problems(judge_specs, "judge", rc.endpoint_map)
    if foreign:
        raise _usage("a provider's key would go to a URL that is not its API: " + "; ".join(foreign))
    for spec in models:
        problem = ep.route_problem(spec, _source(config, "--medhelm-model"))
        if problem:
            raise _usage(problem)
    for spec in judge_specs[:-len(graders)] if rc.judges else ():  # the paper's judges are routable by construction
        problem = ep.route_problem(spec, _source(config, "--medhelm-jury"))
        if problem:
            raise _usage(problem)
    if config.getoption("medhelm_grader") is not None or config.getini("medhelm_grader"):  # given: checked too
        problem = ep.route_problem(judge_specs[-1], _source(config, "--medhelm-grader"))
        if problem:
            raise _usage(problem)
    if not config.getoption("medhelm_dry_run", False):  # (a dry run starts no model)
        _check_local_models(rc, rc.models, list(rc.judges or ()), config)


def _check_local_models(rc: RunConfig, models: Sequence[str], judges: Sequence[str], config: pytest.Config) -> None:
    """A ``local/...`` model or judge that cannot run here (llama-cpp-python's server or the model's package not
    installed, the GGUF file missing) is a usage error at start-up, not a run whose every item is skipped.

    Each name is resolved as the run resolves it (the ``pytest_medhelm_model_spec`` hook): a plugin that serves a
    ``local/...`` name from a server of its own needs no llama.cpp here."""
    from pytest_medhelm.endpoints.llama.gguf import unavailable_reason
    from pytest_medhelm.values import is_llama_cpp_model

    # the users' implementations only: the built-in one ("medhelm-endpoints") reads the run configuration being built
    users_resolution = config.pluginmanager.subset_hook_caller(
        "pytest_medhelm_model_spec",
        [p for p in (config.pluginmanager.get_plugin("medhelm-endpoints"),) if p is not None])
    for option, role, api_base, names in (("--medhelm-model", "model", rc.api_base, models),
                                          ("--medhelm-jury", "judge", rc.jury_api_base, judges),
                                          ("--medhelm-grader", "judge", rc.jury_api_base, [rc.grader])):
        for name in names:
            if not is_llama_cpp_model(name):
                continue
            spec = users_resolution(name=name, api_base=api_base, config=config, role=role)
            if spec is None or (is_llama_cpp_model(spec.name) and spec.api_base is None):
                name = spec.name if spec is not None else name
                reason = unavailable_reason(name)
                if reason:
                    raise _usage(f"{_source(config, option)} {name!r} cannot run on this machine: {reason}")


OPTION = {opt.dest: opt for opt in OPTIONS}
#: RunConfig fields whose name is not the option's
_FIELD_OPTION = {"models": "model", "benchmarks": "benchmark", "thresholds": "threshold", "json_path": "json",
                 "markdown_path": "markdown", "html_path": "html", "list_benchmarks": "list", "judges": "jury"}


def _where(config: pytest.Config, opt: Option) -> str:
    """``--medhelm-<name>``, or ``ini key medhelm_<name> (in FILE)`` when the value came from the ini file."""
    if from_ini(config, opt):
        return f"ini key {opt.dest} (in {config.inipath})" if config.inipath else f"ini key {opt.dest}"
    return f"--medhelm-{opt.name}"


def _named(config: pytest.Config, dest: str, given: dict[str, Any], path: Path) -> str:
    """The option or ini key, the value as written, and the path it was resolved to when that differs."""
    text = f"{_where(config, OPTION[dest])} {str(given[dest])!r}"
    return text if str(given[dest]) == str(path) else f"{text} (resolved to {path})"


def _field_name(config: pytest.Config, loc: tuple) -> str:
    field = str(loc[0]) if loc else ""
    opt = OPTION.get("medhelm_" + _FIELD_OPTION.get(field, field))
    return _where(config, opt) if opt is not None else ".".join(str(p) for p in loc)


def _resolve(config: pytest.Config, opt: Option, value: str | Path) -> Path:
    """A path option as an absolute path: relative to the ini file's directory when it came from the ini file
    (as pytest resolves its own path options), else to the directory pytest was invoked from."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    if from_ini(config, opt) and config.inipath is not None:
        return Path(config.inipath).parent / path
    return Path(config.invocation_params.dir) / path


def _threshold(name: str, value: float, known_benchmarks: set[str], what: str = "") -> Threshold:
    from pytest_medhelm.catalogue.taxonomy import CATEGORIES, gate_target

    spec = f"{name}>={value:g}"
    target = gate_target(name, known_benchmarks)
    if target is None:
        raise _usage(
            f"{what or 'threshold ' + repr(spec)}: {name!r} is not a benchmark slug, a category or 'overall'; "
            "categories: " + ", ".join(c.slug for c in CATEGORIES))
    return Threshold(name=target, value=value, spec=spec)
