"""One validated run configuration from options and ini keys.

Built once per process, and only when the plugin is used (a medhelm option is given or a medhelm item is
collected): pydantic is imported here and nowhere at plugin load. Any problem raises ``pytest.UsageError``, whose
message names the option and what was expected; pytest turns it into exit status 4 before any model is called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, create_model, field_validator

from pytest_medhelm.options import (
    DERIVED,
    FIELDS,
    Option,
    RunOptions,
    Threshold,
    from_ini,
    ini_lines,
    raw_value,
)

if TYPE_CHECKING:
    from pytest_medhelm.catalogue import Registry
    from pytest_medhelm.values import ModelSpec

    _Declared = RunOptions  # a type checker reads the fields from their declarations; pydantic is given them below
else:
    _Declared = object


class _RunConfigBase(BaseModel, _Declared):
    """What the run configuration does; its fields are declared in :class:`pytest_medhelm.options.RunOptions`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # (the rule is the engine's, a layer above the declarations: so checked here rather than by the option)
    @field_validator("cache_url", check_fields=False)
    @classmethod
    def _cache_url(cls, value: str | None) -> str | None:
        from pytest_medhelm.cache.shared import url_problem

        problem = None if value is None else url_problem(value)
        if problem:
            raise ValueError(problem)
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

        # (--medhelm-list and --medhelm-tree print and exit: never a measured run's)
        data = self.model_dump(mode="json", exclude={"list_benchmarks", "tree"})
        data["thresholds"] = [t.spec for t in self.thresholds]
        for name in ("api_base", "jury_api_base", "cache_url"):  # (URLs may carry credentials: never stored)
            if isinstance(data.get(name), str):
                data[name] = redact_url(data[name])
        data["endpoints"] = [[model, redact_url(url)] for model, url in self.endpoints]
        return data


def _field_definitions() -> dict[str, Any]:
    """pydantic's field definitions from the declarations: each field's type (with its option's check) and default."""
    definitions: dict[str, Any] = {}
    for name, annotation in get_type_hints(RunOptions).items():
        opt = FIELDS.get(name)
        if opt is None:
            definitions[name] = (annotation, DERIVED[name].default)
            continue
        if opt.check is not None:
            annotation = Annotated[annotation, AfterValidator(opt.check)]
        definitions[name] = (annotation, opt.field_default)
    return definitions


if TYPE_CHECKING:
    RunConfig = _RunConfigBase
else:
    RunConfig = create_model("RunConfig", __base__=_RunConfigBase, __module__=__name__, **_field_definitions())


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"pytest-medhelm: {message}")


def from_pytest(config: pytest.Config, known_benchmarks: set[str],
                registry: Registry | None = None) -> RunConfig:
    """``registry`` (the run's benchmarks) checks --medhelm-benchmark-args; without it, the built-in ones."""
    values: dict[str, Any] = {name: derived.default for name, derived in DERIVED.items()}
    for name, opt in FIELDS.items():
        try:
            values[name] = raw_value(config, opt)
        except argparse.ArgumentTypeError as exc:
            raise _usage(f"ini key {opt.dest}: {exc}") from None
    # the ini lists of their own name (medhelm_thresholds, medhelm_endpoints) add to the command line's values
    from_ini_lists: dict[str, list[Any]] = {}
    for name, opt in FIELDS.items():
        try:
            from_ini_lists[name] = ini_lines(config, opt)
        except argparse.ArgumentTypeError as exc:
            raise _usage(f"ini key {opt.ini}: {exc}") from None

    thresholds = [*values["thresholds"], *from_ini_lists["thresholds"]]
    gates = [_threshold(name, value, known_benchmarks) for name, value in thresholds]
    endpoints_cli, endpoints_ini = list(values["endpoints"]), from_ini_lists["endpoints"]

    for slug in values["benchmarks"]:
        if slug not in known_benchmarks:
            raise _usage(f"{_where(config, FIELDS['benchmarks'])} {slug!r}: unknown benchmark; known: "
                         f"{', '.join(sorted(known_benchmarks))}")
    for slug in values["data_unverified"]:
        if slug not in known_benchmarks:
            raise _usage(f"--medhelm-data-unverified {slug!r} (ini key medhelm_data_unverified): unknown benchmark; "
                         f"known: {', '.join(sorted(known_benchmarks))}")

    _check_benchmark_args(config, tuple(values["benchmark_args"]), known_benchmarks, values["compat"], registry)

    rootdir = Path(str(config.rootpath))
    for name, _drop in values["compare_fail"]:
        if name.lower() != "overall":
            _threshold(name, 0.0, known_benchmarks, what=f"--medhelm-compare-fail {name}:{_drop:g}")
    given = dict(values)
    for name, opt in FIELDS.items():
        if opt.path and values[name] is not None:
            values[name] = _resolve(config, opt, values[name])
    prices = values["prices"]
    if prices is not None and not prices.is_file():
        raise _usage(f"{_named(config, 'prices', given, prices)}: no such file (expected a TOML file of "
                     "model prices)")
    if prices is not None:
        from pytest_medhelm.cost import PricesError, parse_prices

        try:
            parse_prices(prices)
        except PricesError as exc:
            raise _usage(str(exc)) from None

    data_dir = values["data_dir"]
    if data_dir is not None and not data_dir.is_dir():
        raise _usage(f"{_named(config, 'data_dir', given, data_dir)}: not a directory")

    values.update(
        cache_dir=values["cache_dir"] or rootdir / ".medhelm_cache",
        thresholds=tuple(gates),
        # the command line wins over the ini file, model by model
        endpoints=tuple(dict([*endpoints_ini, *endpoints_cli]).items()),
    )
    if config.getoption("medhelm_grader") is not None or from_ini(config, FIELDS["grader"]):
        values["professional_grader"] = values["grader"]  # one grader given: it grades both HealthBenches
    try:
        rc = RunConfig(**values)
    except ValidationError as exc:
        problems = "; ".join(f"{_field_name(config, err['loc'])}: {err['msg']}" for err in exc.errors())
        raise _usage(problems) from None
    check_endpoints(rc, endpoints_cli, endpoints_ini, config, sending=getattr(config, "workerinput", None) is None)
    return rc


def _check_benchmark_args(config: pytest.Config, given: tuple, known_benchmarks: set[str], compat: str,
                          registry: Registry | None) -> None:
    """Each --medhelm-benchmark-args names a known benchmark that takes arguments, and its values read (a usage
    error otherwise, before anything is collected)."""
    where = _where(config, FIELDS["benchmark_args"])
    for slug in dict(given):
        if slug not in known_benchmarks:
            raise _usage(f"{where} {slug!r}: unknown benchmark; known: {', '.join(sorted(known_benchmarks))}")
    if not given:
        return
    if registry is None:
        from pytest_medhelm.catalogue import build_registry

        registry = build_registry()
    for slug in dict(given):  # (only the named benchmarks' definitions are read)
        bench = registry.get(slug) if slug in registry else None
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
    problems += ep.endpoint_problems(endpoints_ini, source=f"ini key {FIELDS['endpoints'].ini}", models=rc.models,
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


def _where(config: pytest.Config, opt: Option) -> str:
    """``--medhelm-<name>``, or ``ini key medhelm_<name> (in FILE)`` when the value came from the ini file."""
    if from_ini(config, opt):
        return f"ini key {opt.dest} (in {config.inipath})" if config.inipath else f"ini key {opt.dest}"
    return f"--medhelm-{opt.name}"


def _named(config: pytest.Config, field: str, given: dict[str, Any], path: Path) -> str:
    """The option or ini key, the value as written, and the path it was resolved to when that differs."""
    text = f"{_where(config, FIELDS[field])} {str(given[field])!r}"
    return text if str(given[field]) == str(path) else f"{text} (resolved to {path})"


def _field_name(config: pytest.Config, loc: tuple) -> str:
    opt = FIELDS.get(str(loc[0])) if loc else None
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
