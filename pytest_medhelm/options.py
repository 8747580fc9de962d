"""The command-line options and ini keys of the interface contract (docs/contract.md), declared once.

Every option ``--medhelm-<name>`` has an ini key ``medhelm_<name>`` unless noted. The command line wins over the
ini file. Cheap syntax checks run as argparse ``type=`` functions so that a bad value is a usage error (exit 4)
before anything else happens; checks that need the catalogue run in :mod:`pytest_medhelm.config`.
This module imports nothing heavy: it is loaded by every pytest session that has the plugin installed.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple


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


def _positive_int(what: str) -> Callable[[str], int]:
    return _number(what, int, 1)


def _non_negative_int(what: str) -> Callable[[str], int]:
    return _number(what, int, 0)


def _positive_float(what: str) -> Callable[[str], float]:
    return _number(what, float, 0, strict=True)


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


def _non_negative_float(what: str) -> Callable[[str], float]:
    return _number(what, float, 0)


class Option(NamedTuple):  # (not a frozen dataclass: building one costs milliseconds at every pytest start)
    name: str  # without the --medhelm- prefix
    help: str
    repeat: bool = False  # repeatable on the command line; "linelist" in the ini file
    flag: bool = False
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    ini: bool = True
    default: Any = None
    #: "?" for an option whose value may be left out (then ``const``)
    nargs: str | None = None
    const: Any = None
    #: a file or directory: relative to the invocation directory on the command line, to the ini file's directory
    #: in the ini file (as pytest does for its own path options)
    path: bool = False

    @property
    def dest(self) -> str:
        return "medhelm_" + self.name.replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("model", "model under test, a litellm string (openai/gpt-4o, hosted_vllm/..., local/smollm2); "
           "repeatable: items are parametrized per model", repeat=True, metavar="MODEL"),
    Option("api-base", "OpenAI-compatible endpoint for the models under test (vLLM, llama.cpp, a gateway)",
           metavar="URL"),
    Option("endpoint", "one model's (or judge's) own endpoint, MODEL=URL; MODEL=URL1,URL2,... for several replicas of "
           "it (each request to the least busy); wins over --medhelm-api-base and --medhelm-jury-api-base; "
           "repeatable; ini key medhelm_endpoints, one per line", repeat=True,
           parse=parse_endpoint, metavar="MODEL=URL[,URL...]", ini=False),
    Option("api-key-env", "the NAME of the environment variable holding the API key of the models under test's "
           "endpoints (not the key); default: the provider's own variable (litellm's convention), and never "
           "OpenAI's key to a server of someone else's",
           parse=parse_env_name, metavar="NAME"),
    Option("benchmark", "run only this benchmark (repeatable)", repeat=True, metavar="SLUG"),
    Option("benchmark-args", "a benchmark's arguments as in HELM's run entries, SLUG:NAME=VALUE[,NAME=VALUE] "
           "(sct_bench: reason, few_shot); repeatable; ini key one per line", repeat=True,
           parse=parse_benchmark_args, metavar="SLUG:ARGS"),
    Option("max-instances", "per benchmark: HELM's deterministic sample of N instances",
           parse=_positive_int("--medhelm-max-instances"), metavar="N"),
    Option("max-tokens", "cap every benchmark's answer at N tokens: a departure from MedHELM's generation settings "
           "(said in the header, the summary and every report; recorded as run.generation_cap), for demonstrations "
           "on small machines", parse=_positive_int("--medhelm-max-tokens"), metavar="N"),
    Option("reasoning-budget", "reasoning tokens a reasoning model may spend on top of each request's answer limit "
           "(OpenAI o-series and gpt-5: max_completion_tokens = N + limit; Claude: thinking budget_tokens = N; a "
           "served reasoner: max_tokens = N + limit); default 4096 for the models known to think, none under "
           "--medhelm-compat helm/medhelm; given, it also applies to every model sent to a URL; 0: none",
           parse=_non_negative_int("--medhelm-reasoning-budget"), metavar="N"),
    Option("reasoning-effort", "reasoning_effort sent to reasoning models (minimal is the gpt-5 family's); given, "
           "it also turns Claude's extended thinking on",
           parse=_choice("--medhelm-reasoning-effort", ("minimal", "low", "medium", "high")),
           metavar="minimal|low|medium|high"),
    Option("data-dir", "local benchmark data laid out DIR/<slug>/<upstream file name> (offline)", metavar="DIR",
           path=True),
    Option("data-unverified", "accept files of this benchmark under --medhelm-data-dir that differ from the pinned "
           "sha256 (repeatable; recorded in the results as run.data_unverified)", repeat=True, metavar="SLUG"),
    Option("cache-dir", "answer cache directory (default .medhelm_cache beside .pytest_cache)", metavar="DIR",
           path=True),
    Option("cache", "on: read and write; refresh: ask again once; off: keep nothing",
           parse=_choice("--medhelm-cache", ("on", "off", "refresh")), metavar="on|off|refresh", default="on"),
    Option("cache-url", "a shared answer cache behind the local one, redis://HOST:PORT/DB: runners of a CI matrix "
           "and retried jobs share answers and judgements (unreachable: said once, the local cache goes on)",
           metavar="URL"),
    Option("concurrency", "requests in flight at once (default 16)",
           parse=_positive_int("--medhelm-concurrency"), metavar="N", default=16),
    Option("timeout", "seconds per request (default 120)", parse=_positive_float("--medhelm-timeout"),
           metavar="S", default=120.0),
    Option("retries", "retries per request after the first attempt (default 3)",
           parse=_non_negative_int("--medhelm-retries"), metavar="N", default=3),
    Option("threshold", "a gate NAME>=VALUE (benchmark slug, category or 'overall'; VALUE in [0, 1]); "
           "repeatable; ini key medhelm_thresholds, one per line", repeat=True, parse=parse_threshold,
           metavar="SPEC", ini=False),
    Option("json", "write the run's results as JSON", metavar="PATH", path=True),
    Option("markdown", "write a Markdown summary (for a pull-request comment)", metavar="PATH", path=True),
    Option("strict", "misses count as failures", flag=True, default=False),
    Option("strict-gates", "a gate on a benchmark or category that was deselected (-k, -m, --medhelm-benchmark) "
           "fails instead of being reported as not evaluated", flag=True, default=False),
    Option("compat", "helm: reproduce HELM 0.5.16's numbers, bugs included; medhelm: reproduce medhelm 0.8.0's; "
           "default: corrected metrics", parse=_choice("--medhelm-compat", ("default", "helm", "medhelm")),
           metavar="default|helm|medhelm", default="default"),
    Option("local-ctx", "context size of local/... llama.cpp servers (default 8192: a judge's prompt with an "
           "aci_bench conversation, its note and the gold note reaches ~5,100 tokens)",
           parse=_positive_int("--medhelm-local-ctx"), metavar="N", default=8192),
    Option("local-threads", "threads of local/... llama.cpp servers (default: the CPU's cores)",
           parse=_positive_int("--medhelm-local-threads"), metavar="N"),
    Option("list", "list the benchmarks (slug, category, access, data, instances) and exit", flag=True,
           ini=False, default=False),
    Option("tree", "show the taxonomy (category > subcategory > benchmarks, with data present or not; -v: the "
           "tasks too) and exit", flag=True, ini=False, default=False),
    # the jury and secondary metrics of open-ended benchmarks
    Option("jury", "a judge model for open-ended benchmarks (repeatable; default: the paper's three, GPT-4o, "
           "Claude 3.7 Sonnet, Llama 3.3 70B)", repeat=True, metavar="MODEL"),
    Option("jury-api-base", "OpenAI-compatible endpoint for the judges", metavar="URL"),
    Option("jury-api-key-env", "the NAME of the environment variable holding the API key of the judges' "
           "endpoints (not the key)", parse=parse_env_name, metavar="NAME"),
    # HealthBench's rubric grader and subsets
    Option("grader", "the rubric grader of HealthBench and HealthBench Professional (one call per rubric criterion; "
           "a judge for endpoints and keys); default each one's reference: openai/gpt-4.1-2025-04-14 for HealthBench, "
           "openai/gpt-5.4-2026-03-05 at low reasoning effort for HealthBench Professional", metavar="MODEL"),
    Option("healthbench-subset", "HealthBench's examples: full (5,000), hard (1,000) or consensus (3,671)",
           parse=_choice("--medhelm-healthbench-subset", ("full", "hard", "consensus")),
           metavar="full|hard|consensus", default="full"),
    Option("bertscore-model", "BERTScore model name or local folder (needs the [bertscore] extra); off: no BERTScore "
           "(nothing of torch is loaded)", metavar="NAME|off"),
    # saved runs, comparisons, shards
    Option("save", "save this run's results under .medhelm/runs/ with this name", metavar="NAME"),
    Option("autosave", "save every run under .medhelm/runs/", flag=True, default=False),
    Option("compare", "compare with a saved run (the latest when no value) or a results JSON", nargs="?",
           const="latest", metavar="NAME|PATH"),
    Option("compare-fail", "fail when there is significant evidence that NAME's score dropped by more than DROP "
           "(one-sided test at the margin, Holm-adjusted, alpha 0.05; repeatable)", repeat=True,
           parse=parse_compare_fail, metavar="NAME:DROP"),
    Option("power", "a line per gate in the summary (and a power record on each gate of the results): its minimum "
           "detectable drop at this run's n against the --medhelm-compare baseline (without one: from this run's "
           "scores) and the instances a margin needs (alpha 0.05 one-sided, power 0.8)", flag=True, default=False),
    Option("require-calibrated", "a gate reading a judged benchmark is evaluated only when a calibration record "
           "(.medhelm/calibration/) shows each of its judges or graders, with its prompt, agreeing with humans at "
           "least as well as they agree with each other; otherwise it fails as not evaluated", flag=True,
           default=False),
    Option("shard", "run the I-th of N deterministic slices of the items (CI matrix)", parse=parse_shard,
           metavar="I/N", ini=False),
    # cost
    Option("dry-run", "estimate tokens and cost of the collected items, call nothing, and exit", flag=True,
           ini=False, default=False),
    Option("budget", "stop sending requests before spending more than USD", parse=_non_negative_float(
        "--medhelm-budget"), metavar="USD"),
    Option("prices", "TOML file of prices for models litellm does not know: [\"model\"] input_per_million, "
           "output_per_million (USD)", metavar="FILE", path=True),
    Option("batch", "send the run's requests to endpoints with a Batch API (OpenAI's Files + Batches) as batches: "
           "resumable, priced at the batch rate; other models are sent directly", flag=True, default=False),
    Option("batch-timeout", "--medhelm-batch: seconds a run waits for a submitted batch to end (default 86400, the "
           "provider's 24 h window); a batch not ended by then is its items' errors and stays collectable by the next "
           "run", parse=_positive_float("--medhelm-batch-timeout"), metavar="S", default=86400.0),
    Option("html", "write a self-contained HTML report", metavar="PATH", path=True),
    Option("report-text", "put each instance's question and reference text in the results JSON and the HTML "
           "report (off by default: they may hold patient data)", flag=True, default=False),
    # data governance
    Option("local-only", "refuse to send gated or private benchmark data to an endpoint or a shared cache "
           "(--medhelm-cache-url) that is not on loopback or a private network", flag=True, default=False),
)

INI_THRESHOLDS = "medhelm_thresholds"
INI_ENDPOINTS = "medhelm_endpoints"


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
        if opt.ini:
            ini_type = "linelist" if opt.repeat else ("bool" if opt.flag else "string")
            parser.addini(opt.dest, f"default for --medhelm-{opt.name}" + (" (relative to the ini file)" if opt.path
                                                                               else ""), type=ini_type, default=None)
    parser.addini(INI_THRESHOLDS, "gates, one NAME>=VALUE per line (see --medhelm-threshold)", type="linelist",
                  default=[])
    parser.addini(INI_ENDPOINTS, "endpoints of models and judges, one MODEL=URL (or MODEL=URL1,URL2,... for "
                  "replicas) per line (see --medhelm-endpoint)",
                  type="linelist", default=[])


def option_given(config: Any) -> bool:
    """Did the user set any medhelm option or ini key? (If not, the plugin stays asleep.)"""
    for opt in OPTIONS:
        if config.getoption(opt.dest) not in (None, [], False):
            return True
        if opt.ini and config.getini(opt.dest) not in (None, [], "", False):
            return True
    return bool(config.getini(INI_THRESHOLDS)) or bool(config.getini(INI_ENDPOINTS))


def from_ini(config: Any, opt: Option) -> bool:
    """Does the option's value come from the ini file (not given on the command line, set in the ini file)?"""
    return (config.getoption(opt.dest) in (None, []) and opt.ini
            and config.getini(opt.dest) not in (None, [], ""))


def raw_value(config: Any, opt: Option) -> Any:
    """The command line's value, else the ini file's (parsed with the option's own parser), else the default."""
    value = config.getoption(opt.dest)
    if value not in (None, []):
        return value
    if opt.ini:
        ini = config.getini(opt.dest)
        if ini not in (None, [], ""):
            if opt.repeat:
                return [opt.parse(v) if opt.parse else v for v in ini]
            if opt.flag:
                return bool(ini)
            return opt.parse(ini) if opt.parse else ini
    return opt.default if not opt.repeat else []


# what xdist's options and hand-over say about this process (the run's role is chosen from these, once:
# pytest_medhelm.run.choose_role)
def is_xdist_worker(config: Any) -> bool:
    """An xdist worker: xdist handed it its ``workerinput``."""
    return getattr(config, "workerinput", None) is not None


def starts_xdist_workers(config: Any) -> bool:
    """xdist's controlling process about to start workers (xdist's pytest_cmdline_main has set its options)."""
    return getattr(config.option, "dist", "no") != "no" and bool(getattr(config.option, "tx", None))
