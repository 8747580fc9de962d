"""One validated run configuration from options and ini keys.

Built once per process, and only when the plugin is used (a medhelm option is given or a medhelm item is
collected): pydantic is imported here and nowhere at plugin load. Any problem raises ``pytest.UsageError``, whose
message names the option and what was expected; pytest turns it into exit status 4 before any model is called.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_medhelm.options import INI_THRESHOLDS, OPTIONS, parse_threshold, raw_value


class Threshold(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # a benchmark slug, a category slug, or "overall" (normalized in from_pytest)
    value: float = Field(ge=0.0, le=1.0)
    spec: str  # as the user wrote it

    @property
    def label(self) -> str:
        return f"{self.name}>={self.value:g}"


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[str, ...] = ()
    api_base: str | None = None
    benchmarks: tuple[str, ...] = ()
    max_instances: int | None = Field(default=None, ge=1)
    data_dir: Path | None = None
    cache_dir: Path
    cache: Literal["on", "off", "refresh"] = "on"
    concurrency: int = Field(default=16, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    retries: int = Field(default=3, ge=0)
    thresholds: tuple[Threshold, ...] = ()
    json_path: Path | None = None
    markdown_path: Path | None = None
    strict: bool = False
    compat: Literal["default", "helm"] = "default"
    list_benchmarks: bool = False
    local_ctx: int = Field(default=8192, ge=256)
    local_threads: int | None = Field(default=None, ge=1)
    judges: tuple[str, ...] = ()  # empty: the paper's three (pytest_medhelm.jury)
    jury_api_base: str | None = None
    bertscore_model: str | None = None
    save: str | None = None
    autosave: bool = False
    compare: str | None = None  # "latest", a saved run's name, or a path
    compare_fail: tuple[tuple[str, float], ...] = ()
    shard: tuple[int, int] | None = None
    dry_run: bool = False
    budget: float | None = Field(default=None, ge=0)
    prices: Path | None = None
    html_path: Path | None = None
    local_only: bool = False

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

    def public_options(self) -> dict[str, Any]:
        """The options for the results JSON (no secrets are ever in here: keys come from the environment)."""
        data = self.model_dump(mode="json")
        data["thresholds"] = [t.spec for t in self.thresholds]
        return data


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"pytest-medhelm: {message}")


def from_pytest(config: pytest.Config, known_benchmarks: set[str]) -> RunConfig:
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

    for slug in values["medhelm_benchmark"] or []:
        if slug not in known_benchmarks:
            raise _usage(f"--medhelm-benchmark {slug!r}: unknown benchmark; known: {', '.join(sorted(known_benchmarks))}")

    rootdir = Path(str(config.rootpath))
    for name, _drop in values["medhelm_compare_fail"] or []:
        if name.lower() != "overall":
            _threshold(name, 0.0, known_benchmarks, what=f"--medhelm-compare-fail {name}:{_drop:g}")
    prices = values["medhelm_prices"]
    if prices is not None and not Path(prices).is_file():
        raise _usage(f"--medhelm-prices {prices!r}: no such file (expected a TOML file of model prices)")
    if prices is not None:
        from pytest_medhelm.cost import PricesError, parse_prices

        try:
            parse_prices(prices)
        except PricesError as exc:
            raise _usage(str(exc)) from None

    data_dir = values["medhelm_data_dir"]
    if data_dir is not None:
        data_dir = Path(data_dir)
        if not data_dir.is_absolute():
            data_dir = Path.cwd() / data_dir
        if not data_dir.is_dir():
            raise _usage(f"--medhelm-data-dir {values['medhelm_data_dir']!r}: not a directory")
    cache_dir = values["medhelm_cache_dir"]
    cache_dir = Path(cache_dir) if cache_dir else rootdir / ".medhelm_cache"

    try:
        return RunConfig(
            models=tuple(values["medhelm_model"] or ()),
            api_base=values["medhelm_api_base"],
            benchmarks=tuple(values["medhelm_benchmark"] or ()),
            max_instances=values["medhelm_max_instances"],
            data_dir=data_dir,
            cache_dir=cache_dir,
            cache=values["medhelm_cache"],
            concurrency=values["medhelm_concurrency"],
            timeout=values["medhelm_timeout"],
            retries=values["medhelm_retries"],
            thresholds=tuple(gates),
            json_path=values["medhelm_json"],
            markdown_path=values["medhelm_markdown"],
            strict=bool(values["medhelm_strict"]),
            compat=values["medhelm_compat"],
            list_benchmarks=bool(values["medhelm_list"]),
            local_ctx=values["medhelm_local_ctx"],
            local_threads=values["medhelm_local_threads"],
            judges=tuple(values["medhelm_jury"] or ()),
            jury_api_base=values["medhelm_jury_api_base"],
            bertscore_model=values["medhelm_bertscore_model"],
            save=values["medhelm_save"],
            autosave=bool(values["medhelm_autosave"]),
            compare=values["medhelm_compare"],
            compare_fail=tuple(values["medhelm_compare_fail"] or ()),
            shard=values["medhelm_shard"],
            dry_run=bool(values["medhelm_dry_run"]),
            budget=values["medhelm_budget"],
            prices=values["medhelm_prices"],
            html_path=values["medhelm_html"],
            local_only=bool(values["medhelm_local_only"]),
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise _usage(problems) from None


def _threshold(name: str, value: float, known_benchmarks: set[str], what: str = "") -> Threshold:
    from pytest_medhelm.catalogue.taxonomy import CATEGORIES, category_named

    spec = f"{name}>={value:g}"
    if name.lower() == "overall":
        return Threshold(name="overall", value=value, spec=spec)
    if name in known_benchmarks:
        return Threshold(name=name, value=value, spec=spec)
    category = category_named(name)
    if category is not None:
        return Threshold(name=category.slug, value=value, spec=spec)
    raise _usage(
        f"{what or 'threshold ' + repr(spec)}: {name!r} is not a benchmark slug, a category or 'overall'; categories: "
        + ", ".join(c.slug for c in CATEGORIES))
