"""The command-line options and ini keys of the interface contract (docs/contract.md), declared once.

:class:`RunOptions` holds one declaration per option: its field of the run configuration (name and type) and the
option that sets it. The command-line option, the ini key, the field of :class:`pytest_medhelm.config.RunConfig`,
its default and its checks are all derived from that one line. Every option ``--medhelm-<name>`` has an ini key
``medhelm_<name>`` unless noted. The command line wins over the ini file. Cheap syntax checks run as argparse
``type=`` functions so that a bad value is a usage error (exit 4) before anything else happens; checks that need the
catalogue run in :mod:`pytest_medhelm.config`. This module imports nothing heavy: it is loaded by every pytest
session that has the plugin installed.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple


def parse_threshold(text: str) -> tuple[str, float]:
    """``NAME>=VALUE`` → (NAME, VALUE). NAME is checked against the catalogue later."""
    name, sep, value = text.partition(">=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"threshold {text!r}: expected NAME>=VALUE, NAME a benchmark slug, a category or 'overall', "
            "VALUE a normalized score in [0, 1] (e.g. 'pubmedqa>=0.6')")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"threshold {text!r}: {value!r} is not a number; expected a normalized score in [0, 1]") from None
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {number:g} is outside [0, 1]")
    return name, number


def _number(what: str, kind: type = int, minimum: float = 0, strict: bool = False) -> Callable[[str], Any]:
    """A parser of ``kind`` values >= ``minimum`` (> when ``strict``), whose errors name the option."""
    noun = "a whole number" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not math.isfinite(value):  # float("inf") and float("nan") parse; neither is a budget nor a timeout
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"expected a number {'>' if strict else '>='} {minimum:g}, "
                                             f"got {text}")
        return value

    parse.__name__ = what
    return parse


def _choice(what: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{what}: expected one of {', '.join(choices)}, got {text!r}")
        return text

    parse.__name__ = what
    return parse


def parse_compare_fail(text: str) -> tuple[str, float]:
    """``NAME:DROP`` → (NAME, DROP): fail on significant evidence that NAME's score dropped by more than DROP."""
    name, sep, value = text.rpartition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"--medhelm-compare-fail {text!r}: expected NAME:DROP, NAME a benchmark slug, a category or 'overall', "
            "DROP a normalized score difference in (0, 1] (e.g. 'pubmedqa:0.05')")
    try:
        drop = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--medhelm-compare-fail {text!r}: {value!r} is not a number") from None
    if not 0.0 < drop <= 1.0:
        raise argparse.ArgumentTypeError(f"--medhelm-compare-fail {text!r}: DROP {drop:g} is outside (0, 1]")
    return name, drop


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` → (I, N) with 1 <= I <= N."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--medhelm-shard {text!r}: expected I/N with 1 <= I <= N (e.g. 2/4)")
    return i, n


def parse_endpoint(text: str) -> tuple[str, str]:
    """``MODEL=URL`` → (MODEL, URL without a trailing slash): the endpoint of one model under test or judge.

    ``MODEL=URL1,URL2,...``: several endpoints serving the same model (replicas); the URL part is then their one
    canonical value (:func:`pytest_medhelm.values.replica_group`: sorted, so the order they are listed in does not
    change the cache identity)."""
    name, sep, urls = text.partition("=")
    name = name.strip()
    parts = [url.strip() for url in urls.split(",")]
    expected = ("expected MODEL=URL or MODEL=URL1,URL2,... (replicas of one model), MODEL a model under test or a "
                "judge as named in --medhelm-model / --medhelm-jury, each URL an http:// or https:// "
                "OpenAI-compatible endpoint (e.g. 'hosted_vllm/my-ft=http://10.0.0.5:8000/v1')")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: {expected}")
    for url in parts:
        if not url.startswith(("http://", "https://")) or not url.split("://", 1)[1].strip("/"):
            raise argparse.ArgumentTypeError(f"{text!r}: {expected}; {url!r} is not one")
    bare = [url.rstrip("/") for url in parts]
    twice = sorted({url for url in bare if bare.count(url) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{text!r}: {expected}; {', '.join(twice)} is listed twice")
    from pytest_medhelm.values import replica_group  # (not at module level: every pytest start loads this module)

    return name, replica_group(bare)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env_name(text: str) -> str:
    """The NAME of an environment variable (never its value: a key given here by mistake is not repeated)."""
    name = text.strip()
    if not _ENV_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            "expected the NAME of an environment variable that holds the API key (letters, digits and _, e.g. "
            "MY_ENDPOINT_API_KEY), not the key itself; the value given is not repeated here")
    return name


def parse_benchmark_args(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``SLUG:NAME=VALUE[,NAME=VALUE]`` (a HELM run entry's arguments) → (SLUG, ((NAME, VALUE), ...)); values are
    kept as written (the benchmark reads them)."""
    slug, sep, rest = text.partition(":")
    pairs = [part.partition("=") for part in rest.split(",")] if rest.strip() else []
    if not sep or not slug.strip() or not pairs or any(not eq or not name.strip() for name, eq, _ in pairs):
        raise argparse.ArgumentTypeError(
            f"--medhelm-benchmark-args {text!r}: expected SLUG:NAME=VALUE[,NAME=VALUE], as in HELM's run entries "
            "(e.g. sct_bench:reason=true,few_shot=true)")
    return slug.strip(), tuple((name.strip(), value.strip()) for name, _, value in pairs)


# checks of a value as the run configuration holds it (pydantic runs them; their errors name the option)
def http_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/") if value else value


def model_string(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise ValueError(f"expected a litellm model string like 'openai/gpt-4.1-2025-04-14', got {value!r}")
    return value


def distinct_model_strings(value: tuple[str, ...]) -> tuple[str, ...]:
    for name in value:
        if not name.strip() or name != name.strip():
            raise ValueError(f"expected a litellm model string like 'openai/gpt-4o', got {name!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"a model is given twice: {list(value)}")
    return value


class Option(NamedTuple):  # (not a frozen dataclass: building one costs milliseconds at every pytest start)
    name: str  # without the --medhelm- prefix
    help: str
    repeat: bool = False  # repeatable on the command line; "linelist" in the ini file
    flag: bool = False
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    #: True: an ini key medhelm_<name> that the command line overrides; False: none; a key's own name: a list whose
    #: lines add to the command line's values (``ini_help`` then says what a line is)
    ini: bool | str = True
    ini_help: str = ""
    default: Any = None
    #: "?" for an option whose value may be left out (then ``const``)
    nargs: str | None = None
    const: Any = None
    #: a file or directory: relative to the invocation directory on the command line, to the ini file's directory
    #: in the ini file (as pytest does for its own path options)
    path: bool = False
    #: a check of the value as the run configuration holds it, raising ValueError (run by pydantic)
    check: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        return "medhelm_" + self.name.replace("-", "_")

    @property
    def ini_key(self) -> str | None:
        return self.dest if self.ini is True else (self.ini or None)

    @property
    def field_default(self) -> Any:
        """The run configuration's value when neither the command line nor the ini file gives one."""
        return () if self.repeat else (False if self.flag else self.default)


def option(name: str, help: str, **details: Any) -> Any:
    """``--medhelm-<name>`` declared as its :class:`RunOptions` field's value (``Any``, as ``dataclasses.field``)."""
    return Option(name, help, **details)


class Derived:
    """A field that no option sets by itself: :func:`pytest_medhelm.config.from_pytest` computes it from others."""

    __slots__ = ("default",)

    def __init__(self, default: Any) -> None:
        self.default = default


def derived(default: Any) -> Any:
    return Derived(default)


class Threshold(NamedTuple):
    name: str  # a benchmark slug, a category slug, or "overall" (normalized in config.from_pytest)
    value: float
    spec: str  # as the user wrote it


class RunOptions:
    """The options of the interface contract (docs/contract.md), declared once: each annotated attribute is a field
    of :class:`pytest_medhelm.config.RunConfig` (its name and type) and its value the option that sets it (its
    command line, ini key, default, help and checks). ``pytest --help`` lists the options in this order."""

    models: tuple[str, ...] = option(
        "model", "model under test, a litellm string (openai/gpt-4o, hosted_vllm/..., local/smollm2); "
        "repeatable: items are parametrized per model", repeat=True, metavar="MODEL", check=distinct_model_strings)
    api_base: str | None = option(
        "api-base", "OpenAI-compatible endpoint for the models under test (vLLM, llama.cpp, a gateway)",
        metavar="URL", check=http_url)
    #: (model or judge name, its own URL), from --medhelm-endpoint and the ini key medhelm_endpoints
    endpoints: tuple[tuple[str, str], ...] = option(
        "endpoint", "one model's (or judge's) own endpoint, MODEL=URL; MODEL=URL1,URL2,... for several replicas of "
        "it (each request to the least busy); wins over --medhelm-api-base and --medhelm-jury-api-base; "
        "repeatable; ini key medhelm_endpoints, one per line", repeat=True,
        parse=parse_endpoint, metavar="MODEL=URL[,URL...]", ini="medhelm_endpoints",
        ini_help="endpoints of models and judges, one MODEL=URL (or MODEL=URL1,URL2,... for replicas) per line "
        "(see --medhelm-endpoint)")
    #: NAMES of environment variables holding the keys of the models' / the judges' endpoints (never keys)
    api_key_env: str | None = option(
        "api-key-env", "the NAME of the environment variable holding the API key of the models under test's "
        "endpoints (not the key); default: the provider's own variable (litellm's convention), and never "
        "OpenAI's key to a server of someone else's", parse=parse_env_name, metavar="NAME")
    benchmarks: tuple[str, ...] = option(
        "benchmark", "run only this benchmark (repeatable)", repeat=True, metavar="SLUG")
    #: HELM run-entry arguments per benchmark (--medhelm-benchmark-args SLUG:NAME=VALUE,...): (slug, ((name, value),))
    benchmark_args: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = option(
        "benchmark-args", "a benchmark's arguments as in HELM's run entries, SLUG:NAME=VALUE[,NAME=VALUE] "
        "(sct_bench: reason, few_shot); repeatable; ini key one per line", repeat=True,
        parse=parse_benchmark_args, metavar="SLUG:ARGS")
    max_instances: int | None = option(
        "max-instances", "per benchmark: HELM's deterministic sample of N instances",
        parse=_number("--medhelm-max-instances", int, 1), metavar="N")
    max_tokens: int | None = option(
        "max-tokens", "cap every benchmark's answer at N tokens: a departure from MedHELM's generation settings "
        "(said in the header, the summary and every report; recorded as run.generation_cap), for demonstrations "
        "on small machines", parse=_number("--medhelm-max-tokens", int, 1), metavar="N")
    #: None: not given (the reasoning models' own default then applies)
    reasoning_budget: int | None = option(
        "reasoning-budget", "reasoning tokens a reasoning model may spend on top of each request's answer limit "
        "(OpenAI o-series and gpt-5: max_completion_tokens = N + limit; Claude: thinking budget_tokens = N; a "
        "served reasoner: max_tokens = N + limit); default 4096 for the models known to think, none under "
        "--medhelm-compat helm/medhelm; given, it also applies to every model sent to a URL; 0: none",
        parse=_number("--medhelm-reasoning-budget", int, 0), metavar="N")
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = option(
        "reasoning-effort", "reasoning_effort sent to reasoning models (minimal is the gpt-5 family's); given, "
        "it also turns Claude's extended thinking on",
        parse=_choice("--medhelm-reasoning-effort", ("minimal", "low", "medium", "high")),
        metavar="minimal|low|medium|high")
    data_dir: Path | None = option(
        "data-dir", "local benchmark data laid out DIR/<slug>/<upstream file name> (offline)", metavar="DIR",
        path=True)
    data_unverified: tuple[str, ...] = option(
        "data-unverified", "accept files of this benchmark under --medhelm-data-dir that differ from the pinned "
        "sha256 (repeatable; recorded in the results as run.data_unverified)", repeat=True, metavar="SLUG")
    #: (not given: .medhelm_cache in the rootdir, set by config.from_pytest)
    cache_dir: Path = option(
        "cache-dir", "answer cache directory (default .medhelm_cache beside .pytest_cache)", metavar="DIR",
        path=True)
    cache: Literal["on", "off", "refresh"] = option(
        "cache", "on: read and write; refresh: ask again once; off: keep nothing",
        parse=_choice("--medhelm-cache", ("on", "off", "refresh")), metavar="on|off|refresh", default="on")
    #: the shared answer cache behind the local one, a redis:// URL (checked in config: the rule is the engine's)
    cache_url: str | None = option(
        "cache-url", "a shared answer cache behind the local one, redis://HOST:PORT/DB: runners of a CI matrix "
        "and retried jobs share answers and judgements (unreachable: said once, the local cache goes on)",
        metavar="URL")
    concurrency: int = option(
        "concurrency", "requests in flight at once (default 16)",
        parse=_number("--medhelm-concurrency", int, 1), metavar="N", default=16)
    timeout: float = option(
        "timeout", "seconds per request (default 120)", parse=_number("--medhelm-timeout", float, 0, strict=True),
        metavar="S", default=120.0)
    retries: int = option(
        "retries", "retries per request after the first attempt (default 3)",
        parse=_number("--medhelm-retries", int, 0), metavar="N", default=3)
    thresholds: tuple[Threshold, ...] = option(
        "threshold", "a gate NAME>=VALUE (benchmark slug, category or 'overall'; VALUE in [0, 1]); "
        "repeatable; ini key medhelm_thresholds, one per line", repeat=True, parse=parse_threshold,
        metavar="SPEC", ini="medhelm_thresholds", ini_help="gates, one NAME>=VALUE per line (see --medhelm-threshold)")
    json_path: Path | None = option(
        "json", "write the run's results as JSON", metavar="PATH", path=True)
    markdown_path: Path | None = option(
        "markdown", "write a Markdown summary (for a pull-request comment)", metavar="PATH", path=True)
    strict: bool = option("strict", "misses count as failures", flag=True)
    strict_gates: bool = option(
        "strict-gates", "a gate on a benchmark or category that was deselected (-k, -m, --medhelm-benchmark) "
        "fails instead of being reported as not evaluated", flag=True)
    compat: Literal["default", "helm", "medhelm"] = option(
        "compat", "helm: reproduce HELM 0.5.16's numbers, bugs included; medhelm: reproduce medhelm 0.8.0's; "
        "default: corrected metrics", parse=_choice("--medhelm-compat", ("default", "helm", "medhelm")),
        metavar="default|helm|medhelm", default="default")
    local_ctx: int = option(
        "local-ctx", "context size of local/... llama.cpp servers (default 8192: a judge's prompt with an "
        "aci_bench conversation, its note and the gold note reaches ~5,100 tokens)",
        parse=_number("--medhelm-local-ctx", int, 256), metavar="N", default=8192)
    local_threads: int | None = option(
        "local-threads", "threads of local/... llama.cpp servers (default: the CPU's cores)",
        parse=_number("--medhelm-local-threads", int, 1), metavar="N")
    list_benchmarks: bool = option(
        "list", "list the benchmarks (slug, category, access, data, instances) and exit", flag=True, ini=False)
    tree: bool = option(
        "tree", "show the taxonomy (category > subcategory > benchmarks, with data present or not; -v: the "
        "tasks too) and exit", flag=True, ini=False)
    # the jury and secondary metrics of open-ended benchmarks
    judges: tuple[str, ...] = option(  # empty: the paper's three (pytest_medhelm.jury)
        "jury", "a judge model for open-ended benchmarks (repeatable; default: the paper's three, GPT-4o, "
        "Claude 3.7 Sonnet, Llama 3.3 70B)", repeat=True, metavar="MODEL")
    jury_api_base: str | None = option(
        "jury-api-base", "OpenAI-compatible endpoint for the judges", metavar="URL", check=http_url)
    jury_api_key_env: str | None = option(
        "jury-api-key-env", "the NAME of the environment variable holding the API key of the judges' "
        "endpoints (not the key)", parse=parse_env_name, metavar="NAME")
    # HealthBench's rubric grader and subsets
    grader: str = option(
        "grader", "the rubric grader of HealthBench and HealthBench Professional (one call per rubric criterion; "
        "a judge for endpoints and keys); default each one's reference: openai/gpt-4.1-2025-04-14 for HealthBench, "
        "openai/gpt-5.4-2026-03-05 at low reasoning effort for HealthBench Professional", metavar="MODEL",
        default="openai/gpt-4.1-2025-04-14", check=model_string)
    #: HealthBench Professional's grader: its reference's (simple-evals PR #108), or --medhelm-grader when given
    professional_grader: str = derived("openai/gpt-5.4-2026-03-05")
    healthbench_subset: Literal["full", "hard", "consensus"] = option(
        "healthbench-subset", "HealthBench's examples: full (5,000), hard (1,000) or consensus (3,671)",
        parse=_choice("--medhelm-healthbench-subset", ("full", "hard", "consensus")),
        metavar="full|hard|consensus", default="full")
    bertscore_model: str | None = option(
        "bertscore-model", "BERTScore model name or local folder (needs the [bertscore] extra); off: no BERTScore "
        "(nothing of torch is loaded)", metavar="NAME|off")
    # saved runs, comparisons, shards
    save: str | None = option("save", "save this run's results under .medhelm/runs/ with this name", metavar="NAME")
    autosave: bool = option("autosave", "save every run under .medhelm/runs/", flag=True)
    compare: str | None = option(  # "latest", a saved run's name, or a path
        "compare", "compare with a saved run (the latest when no value) or a results JSON", nargs="?",
        const="latest", metavar="NAME|PATH")
    compare_fail: tuple[tuple[str, float], ...] = option(
        "compare-fail", "fail when there is significant evidence that NAME's score dropped by more than DROP "
        "(one-sided test at the margin, Holm-adjusted, alpha 0.05; repeatable)", repeat=True,
        parse=parse_compare_fail, metavar="NAME:DROP")
    power: bool = option(
        "power", "a line per gate in the summary (and a power record on each gate of the results): its minimum "
        "detectable drop at this run's n against the --medhelm-compare baseline (without one: from this run's "
        "scores) and the instances a margin needs (alpha 0.05 one-sided, power 0.8)", flag=True)
    require_calibrated: bool = option(
        "require-calibrated", "a gate reading a judged benchmark is evaluated only when a calibration record "
        "(.medhelm/calibration/) shows each of its judges or graders, with its prompt, agreeing with humans at "
        "least as well as they agree with each other; otherwise it fails as not evaluated", flag=True)
    shard: tuple[int, int] | None = option(
        "shard", "run the I-th of N deterministic slices of the items (CI matrix)", parse=parse_shard,
        metavar="I/N", ini=False)
    # cost
    dry_run: bool = option(
        "dry-run", "estimate tokens and cost of the collected items, call nothing, and exit", flag=True, ini=False)
    budget: float | None = option(
        "budget", "stop sending requests before spending more than USD",
        parse=_number("--medhelm-budget", float, 0), metavar="USD")
    prices: Path | None = option(
        "prices", "TOML file of prices for models litellm does not know: [\"model\"] input_per_million, "
        "output_per_million (USD)", metavar="FILE", path=True)
    batch: bool = option(
        "batch", "send the run's requests to endpoints with a Batch API (OpenAI's Files + Batches) as batches: "
        "resumable, priced at the batch rate; other models are sent directly", flag=True)
    batch_timeout: float = option(
        "batch-timeout", "--medhelm-batch: seconds a run waits for a submitted batch to end (default 86400, the "
        "provider's 24 h window); a batch not ended by then is its items' errors and stays collectable by the next "
        "run", parse=_number("--medhelm-batch-timeout", float, 0, strict=True), metavar="S", default=86400.0)
    html_path: Path | None = option("html", "write a self-contained HTML report", metavar="PATH", path=True)
    report_text: bool = option(
        "report-text", "put each instance's question and reference text in the results JSON and the HTML "
        "report (off by default: they may hold patient data)", flag=True)
    # data governance
    local_only: bool = option(
        "local-only", "refuse to send gated or private benchmark data to an endpoint or a shared cache "
        "(--medhelm-cache-url) that is not on loopback or a private network", flag=True)


def declared(declaration: type) -> tuple[dict[str, Option], dict[str, Derived]]:
    """The fields of a declaration class: those an option sets, and those computed from others. Every annotated
    attribute is one or the other, and nothing else is declared (a TypeError names the one that is not)."""
    annotated = declaration.__dict__.get("__annotations__", {})
    values = {name: value for name, value in vars(declaration).items() if isinstance(value, Option | Derived)}
    for name in annotated.keys() ^ values.keys():
        raise TypeError(f"{declaration.__name__}.{name}: " + ("a field without its option (= option(...) or "
                        "derived(...))" if name in annotated else "an option without its field's type annotation"))
    fields = {name: value for name, value in values.items() if isinstance(value, Option)}
    return fields, {name: value for name, value in values.items() if isinstance(value, Derived)}


#: field name -> its option; field name -> its default, for the fields computed from other options
FIELDS, DERIVED = declared(RunOptions)
OPTIONS: tuple[Option, ...] = tuple(FIELDS.values())


def add_options(parser: Any) -> None:
    group = parser.getgroup("medhelm", "MedHELM benchmarks (pytest-medhelm)")
    for opt in OPTIONS:
        kwargs: dict[str, Any] = {"dest": opt.dest, "help": opt.help}
        if opt.flag:
            kwargs.update(action="store_true", default=None)
        else:
            kwargs.update(action="append" if opt.repeat else "store", default=None, metavar=opt.metavar)
            if opt.nargs:
                kwargs.update(nargs=opt.nargs, const=opt.const)
            if opt.parse is not None:
                kwargs["type"] = opt.parse
        group.addoption(f"--medhelm-{opt.name}", **kwargs)
        if opt.ini is True:
            ini_type = "linelist" if opt.repeat else ("bool" if opt.flag else "string")
            parser.addini(opt.dest, f"default for --medhelm-{opt.name}" + (" (relative to the ini file)" if opt.path
                                                                               else ""), type=ini_type, default=None)
    # the lists of their own name after the others, the later declared first (as pytest --help has always shown them)
    for opt in reversed(OPTIONS):
        if isinstance(opt.ini, str):
            parser.addini(opt.ini, opt.ini_help, type="linelist", default=[])


def option_given(config: Any) -> bool:
    """Did the user set any medhelm option or ini key? (If not, the plugin stays asleep.)"""
    for opt in OPTIONS:
        if config.getoption(opt.dest) not in (None, [], False):
            return True
        if opt.ini_key and config.getini(opt.ini_key) not in (None, [], "", False):
            return True
    return False


def from_ini(config: Any, opt: Option) -> bool:
    """Does the option's value come from the ini file (not given on the command line, set in the ini file)?"""
    return (config.getoption(opt.dest) in (None, []) and opt.ini is True
            and config.getini(opt.dest) not in (None, [], ""))


def raw_value(config: Any, opt: Option) -> Any:
    """The command line's value, else the ini file's (parsed with the option's own parser), else the default.
    (An ini list of its own name is read by :func:`ini_lines`: its lines add to the command line's values.)"""
    value = config.getoption(opt.dest)
    if value not in (None, []):
        return value
    if opt.ini is True:
        ini = config.getini(opt.dest)
        if ini not in (None, [], ""):
            if opt.repeat:
                return [opt.parse(v) if opt.parse else v for v in ini]
            if opt.flag:
                return bool(ini)
            return opt.parse(ini) if opt.parse else ini
    return [] if opt.repeat else opt.field_default


def ini_lines(config: Any, opt: Option) -> list[Any]:
    """The lines of the option's ini list of its own name (``medhelm_thresholds``), parsed; [] for other options."""
    if not isinstance(opt.ini, str):
        return []
    return [opt.parse(line) if opt.parse else line for line in config.getini(opt.ini)]


# what xdist's options and hand-over say about this process (the run's role is chosen from these, once:
# pytest_medhelm.run.choose_role)
def is_xdist_worker(config: Any) -> bool:
    """An xdist worker: xdist handed it its ``workerinput``."""
    return getattr(config, "workerinput", None) is not None


def starts_xdist_workers(config: Any) -> bool:
    """xdist's controlling process about to start workers (xdist's pytest_cmdline_main has set its options)."""
    return getattr(config.option, "dist", "no") != "no" and bool(getattr(config.option, "tx", None))
