"""``pytest-medhelm agreement RATINGS.csv --jury-rater NAME [--json OUT]``: does the jury agree with clinicians?

The MedHELM paper's Table 2 method (ICC(3,k) after rater-wise z-scoring: jury 0.47 against the clinicians,
clinician-clinician 0.43):

1. **Ratings**, one CSV in long format with a header: ``instance_id,rater,score``, ``score`` being that rater's
   composite for the instance; or, instead of ``score``, the axis columns (``accuracy``, ``completeness``,
   ``clarity``; ``structure`` for NoteExtract), which are averaged. Other columns are ignored. The jury is one more
   rater, named by ``--jury-rater`` (its composite is the jury score of the instance). A missing rating is simply a
   missing row; an empty or non-numeric cell, a row without an id or a rater, or the same (instance, rater) twice
   is an error naming the file and the row (exit status 4).
2. **z-scores**: each rater's scores minus that rater's mean, divided by that rater's standard deviation
   (population, ``ddof=0``, as ``scipy.stats.zscore``), so that a lenient or a strict rater counts the same. A rater
   with fewer than two ratings or no variation cannot be z-scored and is left out (listed in
   ``excluded_raters``); the jury rater must be usable.
3. **Jury vs clinicians**: over the instances the jury and at least one clinician rated, ICC(3,k) with k = 2
   between the mean of the clinicians' z-scores and the jury's z-score (:func:`pytest_medhelm.jury.agreement.icc3`).
4. **Clinician vs clinician**: ICC(3,2) of every pair of clinicians over the instances both rated, for the pairs
   sharing at least two instances; their plain mean.
5. **95% confidence intervals**: percentile bootstrap over instances (``--bootstrap`` replicates, default 1000,
   ``--seed`` 0); the z-scores are computed once, on all the data. A replicate whose ICC is undefined (all sampled
   instances alike) is left out; a pair whose resample holds fewer than two distinct instances is left out of
   that replicate's mean.

JSON (``--json OUT``): ``icc3k_jury_vs_clinicians``, ``ci`` ([low, high]), ``clinician_pairwise_icc3k_mean``,
``ci_pairwise``, ``n_instances`` (instances in step 3), ``n_raters`` (clinicians, the jury not counted), and
``n_clinician_pairs``, ``jury_rater``, ``clinicians``, ``excluded_raters``, ``bootstrap``. A value that cannot be
computed is ``null``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

AXES = ("accuracy", "completeness", "clarity", "structure")
EXIT_OK = 0
EXIT_USAGE = 4
PROG = "pytest-medhelm agreement"


class RatingsError(ValueError):
    """A ratings file that cannot be read; the message names the file and the row."""


def _cell(value: str | None) -> str:
    return (value or "").strip()


def read_ratings(path: str | Path) -> dict[str, dict[str, float]]:
    """rater -> instance id -> composite score, from a long-format CSV (see the module docstring)."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise RatingsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    ratings: dict[str, dict[str, float]] = {}
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise RatingsError(f"{path}: the file is empty (expected a header instance_id,rater,score)") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise RatingsError(f"{path}, row 1: not readable as CSV ({exc})") from None
        names = [_cell(h).lower() for h in header]
        for required in ("instance_id", "rater"):
            if required not in names:
                raise RatingsError(f"{path}, row 1: no column {required!r} in the header {header!r} "
                                   "(expected instance_id,rater,score or instance_id,rater,accuracy,completeness,"
                                   "clarity)")
        id_col, rater_col = names.index("instance_id"), names.index("rater")
        if "score" in names:
            score_cols = [("score", names.index("score"))]
        else:
            score_cols = [(axis, names.index(axis)) for axis in AXES if axis in names]
            if not score_cols:
                raise RatingsError(f"{path}, row 1: no 'score' column and no axis columns ({', '.join(AXES)}) in "
                                   f"the header {header!r}")
        row_number = 1
        try:
            for row in reader:
                row_number += 1
                if not any(_cell(c) for c in row):
                    continue
                where = f"{path}, row {row_number}"
                if len(row) < len(header):
                    row = row + [""] * (len(header) - len(row))
                instance, rater = _cell(row[id_col]), _cell(row[rater_col])
                if not instance:
                    raise RatingsError(f"{where}: empty instance_id")
                if not rater:
                    raise RatingsError(f"{where}: empty rater")
                values = []
                for name, col in score_cols:
                    text = _cell(row[col])
                    try:
                        value = float(text)
                    except ValueError:
                        raise RatingsError(f"{where}: {name} {text!r} is not a number") from None
                    if not math.isfinite(value):
                        raise RatingsError(f"{where}: {name} {text!r} is not a finite number")
                    values.append(value)
                by_rater = ratings.setdefault(rater, {})
                if instance in by_rater:
                    raise RatingsError(f"{where}: rater {rater!r} rated instance {instance!r} twice")
                by_rater[instance] = sum(values) / len(values)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise RatingsError(f"{path}, row {row_number}: not readable as CSV ({exc})") from None
    if not ratings:
        raise RatingsError(f"{path}: no ratings after the header")
    return ratings


def zscores(ratings: dict[str, dict[str, float]]) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Each rater's scores z-scored (ddof=0); and the raters that cannot be, with the reason."""
    out: dict[str, dict[str, float]] = {}
    excluded: dict[str, str] = {}
    for rater, scores in ratings.items():
        values = list(scores.values())
        if len(values) < 2:
            excluded[rater] = "fewer than two ratings"
            continue
        mean = math.fsum(values) / len(values)
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
        if sd <= 1e-12 * max(1.0, abs(mean)):
            excluded[rater] = "the same score everywhere (cannot be z-scored)"
            continue
        out[rater] = {instance: (value - mean) / sd for instance, value in scores.items()}
    return out, excluded


def _percentile_ci(values: list[float], confidence: float) -> list[float] | None:
    import numpy as np

    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 10:
        return None
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return [float(low), float(high)]


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def analyse(ratings: dict[str, dict[str, float]], jury_rater: str, n_boot: int = 1000, seed: int = 0,
            confidence: float = 0.95) -> dict[str, Any]:
    """The agreement statistics of the module docstring, as the JSON dict. Raises ValueError for an unknown or
    unusable jury rater."""
    import numpy as np

    from pytest_medhelm.jury.agreement import icc3k

    if jury_rater not in ratings:
        raise ValueError(f"--jury-rater {jury_rater!r}: no such rater in the file (raters: "
                         f"{', '.join(sorted(ratings))})")
    z, excluded = zscores(ratings)
    if jury_rater in excluded:
        raise ValueError(f"--jury-rater {jury_rater!r}: {excluded[jury_rater]}")
    clinicians = sorted(r for r in z if r != jury_rater)
    jury = z[jury_rater]

    # jury vs the clinicians' mean
    instances = sorted(i for i in jury if any(i in z[c] for c in clinicians))
    matrix = np.array([[float(np.mean([z[c][i] for c in clinicians if i in z[c]])), jury[i]] for i in instances],
                      dtype=float).reshape(-1, 2)
    point = icc3k(matrix) if len(instances) >= 2 else math.nan

    # clinician pairs
    pairs = []
    for a, b in itertools.combinations(clinicians, 2):
        shared = sorted(set(z[a]) & set(z[b]))
        if len(shared) >= 2:
            pairs.append((a, b, np.array([[z[a][i], z[b][i]] for i in shared], dtype=float), shared))
    pair_values = [icc3k(m) for _a, _b, m, _s in pairs]
    defined = [v for v in pair_values if math.isfinite(v)]
    pair_mean = math.fsum(defined) / len(defined) if defined else math.nan

    rng = np.random.default_rng(seed)
    boot_jury: list[float] = []
    boot_pairs: list[float] = []
    universe = sorted({i for _a, _b, _m, shared in pairs for i in shared})
    position = {i: n for n, i in enumerate(universe)}
    pair_rows = [np.array([position[i] for i in shared]) for _a, _b, _m, shared in pairs]
    for _ in range(max(0, n_boot)):
        if len(instances) >= 2:
            take = rng.integers(0, len(instances), len(instances))
            boot_jury.append(icc3k(matrix[take]) if len(set(take.tolist())) >= 2 else math.nan)
        if pairs:
            counts = np.bincount(rng.integers(0, len(universe), len(universe)), minlength=len(universe))
            values = []
            for (_a, _b, m, _s), rows in zip(pairs, pair_rows):
                repeat = counts[rows]
                if int((repeat > 0).sum()) < 2:
                    continue
                value = icc3k(np.repeat(m, repeat, axis=0))
                if math.isfinite(value):
                    values.append(value)
            boot_pairs.append(math.fsum(values) / len(values) if values else math.nan)

    return {
        "icc3k_jury_vs_clinicians": _number(point),
        "ci": _percentile_ci(boot_jury, confidence),
        "clinician_pairwise_icc3k_mean": _number(pair_mean),
        "ci_pairwise": _percentile_ci(boot_pairs, confidence),
        "n_instances": len(instances),
        "n_raters": len(clinicians),
        "n_clinician_pairs": len(defined),
        "jury_rater": jury_rater,
        "clinicians": clinicians,
        "excluded_raters": excluded,
        "pairwise": [{"raters": [a, b], "n_shared": len(s), "icc3k": _number(v)}
                     for (a, b, _m, s), v in zip(pairs, pair_values)],
        "bootstrap": {"replicates": n_boot, "seed": seed, "confidence": confidence},
    }


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Agreement of the LLM jury with clinicians (MedHELM Table 2 method: "
                                            "ICC(3,k) after rater-wise z-scoring, bootstrap 95% CIs).")
    parser.add_argument("ratings", metavar="RATINGS.csv",
                        help="long format: instance_id,rater,score (or accuracy,completeness,clarity columns)")
    parser.add_argument("--jury-rater", required=True, metavar="NAME", help="the rater name of the jury's scores")
    parser.add_argument("--json", dest="json_path", metavar="OUT", help="write the results as JSON here")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap replicates for the confidence intervals (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--calibration-judge", action="append", default=[], metavar="MODEL",
                        help="write a calibration record for the jury of these judges (repeatable: every judge of "
                             "the jury, as the run names them) for --medhelm-require-calibrated")
    parser.add_argument("--calibration-prompt-sha256", metavar="HASH",
                        help="the judge prompt template's sha256 the record is for (a gate that is not evaluated "
                             "names the one it needs)")
    parser.add_argument("--rootdir", default=".", metavar="DIR",
                        help="the project whose .medhelm/calibration/ gets the record (default: .)")
    return parser


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _fmt_ci(ci: list[float] | None) -> str:
    return "" if ci is None else f"  95% CI [{ci[0]:.3f}, {ci[1]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    """The ``agreement`` subcommand; ``argv`` without the program name (a leading ``agreement`` is skipped)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["agreement"]:
        args_list = args_list[1:]
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if args.bootstrap < 0:
        print(f"{PROG}: error: --bootstrap must be 0 or more, got {args.bootstrap}", file=sys.stderr)
        return EXIT_USAGE
    if bool(args.calibration_judge) != bool(args.calibration_prompt_sha256):
        print(f"{PROG}: error: --calibration-judge and --calibration-prompt-sha256 go together", file=sys.stderr)
        return EXIT_USAGE
    try:
        ratings = read_ratings(args.ratings)
        result = analyse(ratings, args.jury_rater, n_boot=args.bootstrap, seed=args.seed)
    except (RatingsError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    out = sys.stdout
    out.write(f"{PROG}: {args.ratings}: {result['n_raters']} clinicians, jury rater {args.jury_rater!r}, "
              f"{result['n_instances']} instances\n")
    out.write(f"  ICC(3,k) jury vs clinicians' mean (k=2): {_fmt(result['icc3k_jury_vs_clinicians'])}"
              f"{_fmt_ci(result['ci'])}\n")
    out.write(f"  ICC(3,2) clinician pairs, mean of {result['n_clinician_pairs']}: "
              f"{_fmt(result['clinician_pairwise_icc3k_mean'])}{_fmt_ci(result['ci_pairwise'])}\n")
    for rater, reason in result["excluded_raters"].items():
        out.write(f"  left out: rater {rater!r}: {reason}\n")
    if args.calibration_judge:
        problem = _write_calibration(args, result)
        if problem:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    if args.json_path:
        path = Path(args.json_path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"{PROG}: error: cannot write {path}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK


def _write_calibration(args: argparse.Namespace, result: dict[str, Any]) -> str | None:
    """The jury's calibration record (pytest_medhelm.jury.calibration); the problem, or None when written."""
    from pytest_medhelm.jury.calibration import CalibrationError, CalibrationRecord, jury_rater, parse_record

    value = result["icc3k_jury_vs_clinicians"]
    if value is None:
        return "no calibration record: the jury's ICC(3,k) against the clinicians is undefined"
    record = CalibrationRecord(rater=jury_rater(args.calibration_judge), prompt_sha256=args.calibration_prompt_sha256,
                               statistic="icc3k", value=value, human=result["clinician_pairwise_icc3k_mean"],
                               n=result["n_instances"], source=f"pytest-medhelm agreement {Path(args.ratings).name}")
    try:
        parse_record(record.as_json(), "--calibration-prompt-sha256")  # (checks the hash as a reader would)
    except CalibrationError as exc:
        return str(exc)
    from pytest_medhelm.jury.calibration import write_record

    try:
        path = write_record(record, args.rootdir)
    except OSError as exc:
        return f"cannot write the calibration record under {args.rootdir}: {exc}"
    verdict = "calibrated" if record.calibrated else "NOT calibrated (below the clinicians' own agreement)"
    sys.stdout.write(f"  calibration record {path}: jury {record.rater}: {verdict}\n")
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
