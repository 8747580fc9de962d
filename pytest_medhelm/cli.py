"""The ``pytest-medhelm`` console script: work on results files and saved runs without running pytest.

    pytest-medhelm merge A.json B.json ... --json OUT [--markdown OUT] [--threshold NAME>=VALUE ...] [--save NAME]
    pytest-medhelm runs [--rootdir DIR]   (the saved runs; ``list`` is its older name, kept as an alias)
    pytest-medhelm compare BASELINE CURRENT [--compare-fail NAME:DROP ...] [--json OUT] [--markdown OUT]
    pytest-medhelm power RUN [--baseline BASE] [--threshold NAME>=VALUE ...] [--margin M] [--alpha A] [--power P]
                                          (each gate's minimum detectable effect and the n for a margin)
    pytest-medhelm agreement ...          (clinician agreement of the jury; see its own --help)
    pytest-medhelm agreement --healthbench-meta META.jsonl --grader-labels LABELS.jsonl
                                          (a HealthBench grader against physicians, as simple-evals' meta-eval)

BASELINE, CURRENT: a saved run of ``DIR/.medhelm/runs`` (a name, a number, ``latest``) or the path of any results
JSON. Exit status: 0 when done; 1 when a gate fails (``merge``: a threshold on the merged run; ``compare``: a
``--compare-fail`` gate); 2 for a usage error or a file that cannot be used (the message says which and why).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROG = "pytest-medhelm"


class CliError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    from pytest_medhelm.options import parse_compare_fail, parse_threshold

    parser = argparse.ArgumentParser(prog=PROG, description="MedHELM results: merge shards, list saved runs, "
                                                            "compare runs with paired statistics.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    merge = sub.add_parser("merge", help="combine shard results (or runs of other models) into one run",
                           description="Combine results JSON files (e.g. the shards of --medhelm-shard I/N) into "
                                       "one run: instances concatenated, every table recomputed, thresholds "
                                       "evaluated on the whole.")
    merge.add_argument("files", nargs="+", metavar="FILE", help="results JSON files (--medhelm-json)")
    merge.add_argument("--json", required=True, metavar="OUT", help="write the merged results here")
    merge.add_argument("--markdown", metavar="OUT", help="also write the Markdown summary")
    merge.add_argument("--threshold", action="append", default=[], metavar="NAME>=VALUE",
                       help="a gate on the merged run (repeatable), besides the inputs' own thresholds")
    merge.add_argument("--save", metavar="NAME", help="also save the merged run under ROOTDIR/.medhelm/runs/")
    merge.add_argument("--rootdir", default=".", metavar="DIR", help="where .medhelm/runs lives (default: .)")
    merge.add_argument("-q", "--quiet", action="store_true", help="do not print the tables")
    merge.set_defaults(func=cmd_merge)

    # (named for what it lists: pytest's --medhelm-list lists the benchmarks; "list" was its first name)
    saved = sub.add_parser("runs", aliases=["list"], help="list the saved runs (alias: list)",
                           description="List the runs saved under ROOTDIR/.medhelm/runs/.")
    saved.add_argument("--rootdir", default=".", metavar="DIR", help="where .medhelm/runs lives (default: .)")
    saved.set_defaults(func=cmd_runs)

    cmp = sub.add_parser("compare", help="compare two runs (paired tests per benchmark and category)",
                         description="Compare CURRENT with BASELINE: per benchmark, category and overall, the "
                                     "delta, its paired test (exact McNemar or paired bootstrap), 95%% CI and "
                                     "minimum detectable effect.")
    cmp.add_argument("baseline", metavar="BASELINE", help="saved run name or number, 'latest', or a results JSON")
    cmp.add_argument("current", metavar="CURRENT", help="saved run name or number, 'latest', or a results JSON")
    cmp.add_argument("--compare-fail", action="append", default=[], type=parse_compare_fail, metavar="NAME:DROP",
                     help="exit 1 on significant evidence that NAME dropped by more than DROP (one-sided test at "
                          "the margin, Holm-adjusted p < 0.05)")
    cmp.add_argument("--json", metavar="OUT", help="write CURRENT with the comparison and its gates")
    cmp.add_argument("--markdown", metavar="OUT", help="write CURRENT's Markdown summary with the comparison")
    cmp.add_argument("--rootdir", default=".", metavar="DIR", help="where .medhelm/runs lives (default: .)")
    cmp.set_defaults(func=cmd_compare)

    pw = sub.add_parser("power", help="what a run's gates can detect, and the n a margin needs",
                        description="For each gate of RUN (the thresholds and compare-fail gates it recorded, and "
                                    "any given here) and each benchmark: the minimum detectable effect at the run's "
                                    "n and the n needed for a margin, one-sided, by the normal approximation on the "
                                    "paired differences from BASE (without --baseline: on RUN's own scores, the "
                                    "binomial variance for 0/1 scores). Categories and overall are macro-averages: "
                                    "Var = sum of the benchmarks' mean variances / k^2. See docs/comparing.md.")
    pw.add_argument("run", metavar="RUN", help="saved run name or number, 'latest', or a results JSON")
    pw.add_argument("--baseline", metavar="BASE", help="plan against this run's instances (paired differences)")
    pw.add_argument("--threshold", action="append", default=[], type=parse_threshold, metavar="NAME>=VALUE",
                    help="a gate to plan (repeatable), besides the run's own")
    pw.add_argument("--compare-fail", action="append", default=[], type=parse_compare_fail, metavar="NAME:DROP",
                    help="a compare-fail gate to plan (repeatable), besides the run's own")
    pw.add_argument("--margin", type=_open_unit("--margin"), metavar="M",
                    help="the effect to plan n for (default: per gate, the reference score minus the threshold, or "
                         "a compare-fail gate's DROP)")
    pw.add_argument("--alpha", type=_open_unit("--alpha"), default=0.05, metavar="A",
                    help="one-sided significance (default 0.05)")
    pw.add_argument("--power", type=_open_unit("--power"), default=0.8, metavar="P", help="power (default 0.8)")
    pw.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    pw.add_argument("--rootdir", default=".", metavar="DIR", help="where .medhelm/runs lives (default: .)")
    pw.set_defaults(func=cmd_power)

    sub.add_parser("agreement", help="agreement of the LLM jury with clinicians (see 'agreement --help')",
                   add_help=False)
    return parser


def _open_unit(what: str):
    """A parser of numbers in (0, 1), whose errors name the option."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}: expected a number, got {text!r}") from None
        if not 0.0 < value < 1.0:
            raise argparse.ArgumentTypeError(f"{what}: expected a number in (0, 1), got {text}")
        return value

    parse.__name__ = what
    return parse


# ---------------------------------------------------------------------------------------------------- commands
def _print_sections(sections: Sequence[tuple[str, str]]) -> None:
    for title, text in sections:
        print(f"{title}:")
        print(text)
        print()


def _gate_lines(results: dict[str, Any], kinds: set[str | None]) -> int:
    failed = [g for g in results.get("gates", []) if g.get("kind") in kinds and g.get("passed") is False]
    for g in failed:
        value = "no score" if g["value"] is None else f"{g['value']:.3f}"
        why = f" ({g['reason']})" if g.get("reason") else ""
        print(f"medhelm gate FAILED: {g['spec']} for {g['model']}: {value}{why}")
    return len(failed)


def cmd_merge(args: argparse.Namespace) -> int:
    from pytest_medhelm.compare.merge import MergeError, merge_files
    from pytest_medhelm.report.results import write_json
    from pytest_medhelm.report.tables import markdown, terminal_sections

    try:
        results = merge_files(args.files, args.threshold)
    except MergeError as exc:
        raise CliError(str(exc)) from None
    write_json(results, Path(args.json))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown(results), encoding="utf-8")
    if not args.quiet:
        _print_sections(terminal_sections(results))
    print(f"merged {len(args.files)} file(s), {len(results['instances'])} instances, into {args.json}")
    if args.save:
        from pytest_medhelm.compare.storage import save

        print(f"saved as {save(results, args.save, args.rootdir)}")
    return 1 if _gate_lines(results, {None}) else 0


def cmd_runs(args: argparse.Namespace) -> int:
    from pytest_medhelm.compare.storage import list_runs, runs_dir
    from pytest_medhelm.report.tables import render

    runs = list_runs(args.rootdir)
    if not runs:
        print(f"no saved runs in {runs_dir(args.rootdir)} (pytest --medhelm-save NAME or --medhelm-autosave)")
        return 0
    rows = []
    for run in runs:
        info = run.describe()
        if "problem" in info:
            rows.append([f"{run.number:04d}", run.name, "-", "-", "-", "-", "-", info["problem"]])
            continue
        commit = (info.get("commit") or "-")[:10] + ("+dirty" if info.get("dirty") else "")
        rows.append([f"{run.number:04d}", run.name, info.get("saved_at") or "-", ", ".join(info["models"]) or "-",
                     str(info["benchmarks"]), str(info["instances"]), commit, info.get("branch") or "-"])
    print(render(["#", "name", "saved", "models", "benchmarks", "instances", "commit", "branch"], rows))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_medhelm.compare.compare import build_comparison, markdown_section, terminal_sections
    from pytest_medhelm.compare.storage import load
    from pytest_medhelm.report.results import write_json
    from pytest_medhelm.report.tables import markdown

    baseline = load(args.baseline, args.rootdir)
    current = load(args.current, args.rootdir)
    current.pop("source", None)
    current["gates"] = [g for g in current.get("gates", []) if g.get("kind") != "compare_fail"]
    comparison, gates = build_comparison(baseline, current, compare_fail=args.compare_fail)
    if not comparison["pairs"]:
        from pytest_medhelm.compare.compare import run_models

        raise CliError(f"nothing to compare: no model of {args.current} ({', '.join(run_models(current)) or 'none'})"
                       f" has a baseline model in {args.baseline} ({', '.join(run_models(baseline)) or 'none'})")
    current["comparison"] = comparison
    current["gates"].extend(gates)
    _print_sections(terminal_sections(current))
    if args.json:
        write_json(current, Path(args.json))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown(current, [markdown_section(current)]), encoding="utf-8")
    return 1 if _gate_lines(current, {"compare_fail"}) else 0


def cmd_power(args: argparse.Namespace) -> int:
    import json

    from pytest_medhelm.compare import power
    from pytest_medhelm.compare.compare import baseline_info, baseline_label, run_models
    from pytest_medhelm.compare.storage import load
    from pytest_medhelm.report.records import Results
    from pytest_medhelm.report.tables import render

    run = Results.read(load(args.run, args.rootdir))
    base = Results.read(load(args.baseline, args.rootdir)) if args.baseline else None
    if base is not None and not power.pairs_for(run, base):
        raise CliError(f"nothing to pair: no model of {args.run} ({', '.join(run_models(run)) or 'none'}) has a "
                       f"baseline model in {args.baseline} ({', '.join(run_models(base)) or 'none'})")
    try:
        gates = power.recorded_gates(run, [f"{name}>={value:g}" for name, value in args.threshold],
                                     args.compare_fail)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    rows = power.plan_rows(run, base, gates, margin=args.margin, alpha=args.alpha, power=args.power)
    against = f" against {baseline_label(baseline_info(base))}" if base is not None else " (no baseline)"
    print(f"power of {baseline_label(baseline_info(run))}{against}: alpha {args.alpha:g} one-sided, "
          f"power {args.power:g}" + (f", margin {args.margin:g}" if args.margin is not None else "") + ":")
    print(render(*power.table(rows)) if rows else "(no gate and no benchmark with scores)")
    print(power.note())
    if args.json:
        Path(args.json).write_text(json.dumps({"alpha": args.alpha, "power": args.power, "margin": args.margin,
                                               "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


def cmd_agreement(argv: Sequence[str]) -> int:
    import importlib
    import importlib.util

    # HealthBench's meta-evaluation (a rubric grader against physicians) or the jury against clinicians
    healthbench = any(a == "--healthbench-meta" or a.startswith("--healthbench-meta=") for a in argv)
    name = "pytest_medhelm.jury.healthbench_meta" if healthbench else "pytest_medhelm.jury.clinician_agreement"
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise CliError(f"the agreement command needs {name}, which this installation does not have")
    module = importlib.import_module(name)
    try:
        result = module.main(list(argv))
    except SystemExit as exc:  # its argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return int(result or 0)


# ---------------------------------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> int:
    from pytest_medhelm.compare.storage import StorageError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "agreement":
            return cmd_agreement(argv[1:])
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help (0) or a usage error (2, argparse printed the message)
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        return args.func(args)
    except (CliError, StorageError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
