"""``pytest-medhelm agreement --healthbench-meta META.jsonl --grader-labels LABELS.jsonl [--json OUT]``: does a
HealthBench rubric grader agree with physicians, as much as physicians agree with each other?

HealthBench's meta-evaluation file (``2025-05-07-06-14-12_oss_meta_eval.jsonl``, OpenAI's public blob) holds, per
line, one (conversation, completion, rubric criterion) with physicians' verdicts: ``binary_labels`` (met or not,
one per physician), ``anonymized_physician_ids`` (who gave each) and ``category`` (the criterion's cluster); the
grader is given ``prompt``, ``completion`` and ``rubric`` and answers ``criteria_met``. The grader's verdicts come in
``LABELS.jsonl``: one JSON object per line, ``{"row": N, "criteria_met": true|false}``, ``N`` the line of the
meta-evaluation file (1-based) it judges. Rows without a verdict are left out of the grader's figures (counted).

Computed as simple-evals' ``healthbench_meta_eval.py`` (commit ``5e623c2b``) computes it: a rater (the grader, or
one physician) is compared, on every row it labelled, with each *other* physician's label on that row (every pair
counts once). Per class c (met = ``pos``, not met = ``neg``): precision_c = the share of agreeing pairs among the
pairs where the rater said c; recall_c = the share among the pairs where the other physician said c; F1_c =
2·P·R / (P + R) (0 when both are 0; undefined when either has no pair); ``f1_balanced`` = the mean of F1_pos and
F1_neg (the macro-F1; undefined when either is). The grader's ``pairwise_model_f1_balanced`` is HealthBench's
reported meta-evaluation score; beside it, each physician's ``pairwise_physician_f1_balanced`` (against the other
physicians) and their plain mean over the physicians where it is defined; both also per ``category``.

Malformed input (a line that is not a JSON object, ``binary_labels`` not a non-empty list of booleans, ids of
another length, a verdict that is not a boolean or names no row) is an error naming the file and the line (exit
status 4). No grader verdict at all: the grader's agreement is not measured, said so, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLASSES = ("pos", "neg")


class MetaEvalError(ValueError):
    """A malformed meta-evaluation or verdicts file (the message names the file and the line)."""


@dataclass(frozen=True)
class LabelledRow:
    """One line of the meta-evaluation file: the physicians' verdicts on one criterion for one completion."""

    line: int
    category: str
    labels: tuple[bool, ...]
    physicians: tuple[str, ...]


@dataclass(frozen=True)
class Rated:
    """One verdict of a rater beside the other physicians' verdicts on the same row."""

    own: bool
    others: tuple[bool, ...]
    category: str


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    if precision == 0 and recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _share(agreements: list[bool]) -> float | None:
    return sum(agreements) / len(agreements) if agreements else None


def pairwise_f1(rated: Iterable[Rated]) -> dict[str, Any]:
    """Precision, recall and F1 per class, and the balanced (macro) F1, of one rater against the other physicians,
    overall and per category (module docstring)."""
    pairs: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for item in rated:
        for other in item.others:
            agree = item.own == other
            for scope in ("all", item.category):
                pairs[scope]["precision_" + ("pos" if item.own else "neg")].append(agree)
                pairs[scope]["recall_" + ("pos" if other else "neg")].append(agree)

    def figures(lists: dict[str, list[bool]]) -> dict[str, Any]:
        out: dict[str, Any] = {f"{m}_{c}": _share(lists.get(f"{m}_{c}", [])) for m in ("precision", "recall")
                               for c in CLASSES}
        for c in CLASSES:
            out[f"f1_{c}"] = _f1(out[f"precision_{c}"], out[f"recall_{c}"])
        out["f1_balanced"] = (None if out["f1_pos"] is None or out["f1_neg"] is None
                              else (out["f1_pos"] + out["f1_neg"]) / 2)
        out["n_pairs"] = sum(len(lists.get(f"precision_{c}", [])) for c in CLASSES)
        return out

    result = figures(pairs.get("all", {}))
    result["by_category"] = {cat: figures(lists) for cat, lists in sorted(pairs.items()) if cat != "all"}
    return result


def read_meta_eval(path: Path) -> list[LabelledRow]:
    rows = []
    for line, record in _json_lines(path):
        labels = record.get("binary_labels")
        ids = record.get("anonymized_physician_ids")
        category = record.get("category", "")
        if not (isinstance(labels, list) and labels and all(isinstance(x, bool) for x in labels)):
            raise MetaEvalError(f"{path}, line {line}: 'binary_labels' must be a non-empty list of true/false, "
                                f"got {labels!r:.80}")
        if not (isinstance(ids, list) and len(ids) == len(labels)):
            raise MetaEvalError(f"{path}, line {line}: 'anonymized_physician_ids' must list one physician per label "
                                f"({len(labels)}), got {ids!r:.80}")
        if not isinstance(category, str):
            raise MetaEvalError(f"{path}, line {line}: 'category' must be a string, got {category!r:.80}")
        rows.append(LabelledRow(line, category, tuple(labels), tuple(str(i) for i in ids)))
    if not rows:
        raise MetaEvalError(f"{path}: no rows")
    return rows


def read_grader_labels(path: Path, rows: Sequence[LabelledRow]) -> dict[int, bool]:
    lines = {row.line for row in rows}
    verdicts: dict[int, bool] = {}
    for line, record in _json_lines(path):
        row, met = record.get("row"), record.get("criteria_met")
        if not isinstance(row, int) or isinstance(row, bool) or row not in lines:
            raise MetaEvalError(f"{path}, line {line}: 'row' must be the line of a row of the meta-evaluation file, "
                                f"got {row!r:.40}")
        if not isinstance(met, bool):
            raise MetaEvalError(f"{path}, line {line}: 'criteria_met' must be true or false, got {met!r:.40}")
        if row in verdicts:
            raise MetaEvalError(f"{path}, line {line}: a second verdict for row {row}")
        verdicts[row] = met
    return verdicts


def _json_lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MetaEvalError(f"{path}: cannot be read ({exc})") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MetaEvalError(f"{path}, line {number}: invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise MetaEvalError(f"{path}, line {number}: expected a JSON object, got {type(record).__name__}")
        yield number, record


def agreement(rows: Sequence[LabelledRow], grader: dict[int, bool]) -> dict[str, Any]:
    """The grader's pairwise figures against the physicians, and each physician's against the others."""
    graded = [row for row in rows if row.line in grader]
    model = pairwise_f1(Rated(grader[row.line], row.labels, row.category) for row in graded) if graded else None
    by_physician: dict[str, list[Rated]] = defaultdict(list)
    for row in rows:
        for i, physician in enumerate(row.physicians):
            by_physician[physician].append(Rated(row.labels[i], row.labels[:i] + row.labels[i + 1:], row.category))
    physicians = {pid: pairwise_f1(items) for pid, items in sorted(by_physician.items())}
    defined = [p["f1_balanced"] for p in physicians.values() if p["f1_balanced"] is not None]
    return {
        "pairwise_model_f1_balanced": model["f1_balanced"] if model else None,
        "physician_f1_balanced_mean": sum(defined) / len(defined) if defined else None,
        "model": model,
        "physicians": physicians,
        "n_rows": len(rows),
        "n_rows_graded": len(graded),
        "n_physicians": len(physicians),
        "n_physicians_defined": len(defined),
    }


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"HealthBench meta-evaluation: {result['n_rows']} rows, {result['n_rows_graded']} with a grader verdict, "
             f"{result['n_physicians']} physicians"]
    model = result["model"]
    if model is None:
        lines.append("grader vs physicians: NOT MEASURED (no grader verdict for any row: --grader-labels)")
    else:
        lines.append(f"grader vs physicians: macro-F1 {_fmt(model['f1_balanced'])} (F1 met {_fmt(model['f1_pos'])}, "
                     f"not met {_fmt(model['f1_neg'])}; {model['n_pairs']} pairs)")
    lines.append(f"physician vs physicians: macro-F1 {_fmt(result['physician_f1_balanced_mean'])} (mean over "
                 f"{result['n_physicians_defined']} of {result['n_physicians']} physicians where defined)")
    if model is not None:
        for category, figures in model["by_category"].items():
            lines.append(f"  {category}: grader macro-F1 {_fmt(figures['f1_balanced'])} ({figures['n_pairs']} pairs)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pytest-medhelm agreement", description="A HealthBench rubric grader against physicians: macro-F1 "
        "as simple-evals' meta-evaluation computes it, beside physician-physician agreement.")
    parser.add_argument("--healthbench-meta", required=True, metavar="META.jsonl", type=Path,
                        help="HealthBench's meta-evaluation file (2025-05-07-06-14-12_oss_meta_eval.jsonl)")
    parser.add_argument("--grader-labels", metavar="LABELS.jsonl", type=Path,
                        help='the grader\'s verdicts, one {"row": N, "criteria_met": true|false} per line')
    parser.add_argument("--json", dest="json_path", metavar="OUT", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    try:
        rows = read_meta_eval(args.healthbench_meta)
        grader = read_grader_labels(args.grader_labels, rows) if args.grader_labels else {}
    except MetaEvalError as exc:
        print(f"pytest-medhelm agreement: error: {exc}", file=sys.stderr)
        return 4
    result = agreement(rows, grader)
    for line in summary_lines(result):
        print(line)
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["pairwise_model_f1_balanced"] is not None else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
