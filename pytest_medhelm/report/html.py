"""``--medhelm-html PATH``: the run's results as one self-contained HTML file.

Everything is inline (CSS, a little JavaScript, SVG charts); the page loads nothing from anywhere, and its
Content-Security-Policy forbids it to (``default-src 'none'``), so it opens offline and leaks nothing.

Sections, after the paper's figures:

* the leaderboard: Table 1's columns (win rate, Win SD, macro-average, SD) plus tokens and cost, the model's and
  the jury's apart and their total (Table 3);
* a heatmap of normalized scores, benchmarks × models (Figure 3), in the viridis palette (colour-blind safe,
  monotonic in lightness so it reads in greyscale) with the number printed in every cell;
* category scores per model (Figure 4) as labelled bars, each model with its own colour (Okabe-Ito) *and* fill
  pattern, the value printed beside every bar;
* cost versus win rate (Figure 5), labelled points;
* a per-benchmark drill-down of instances (the question, or the prompt's hash when the question is not included
  (see :mod:`pytest_medhelm.report.texts`), answer, expected, score, judge explanations) with a search box and a "misses only" filter. Instance rows are embedded as JSON, one ``<script
  type="application/json">`` block per benchmark, parsed and turned into table rows only when that benchmark is
  shown, a page of rows at a time: a run of 100,000 instances stays usable. Long texts are cut at ``max_text``
  characters (the JSON results file keeps them whole).

Every string from the run (answers may contain HTML) is escaped: ``html.escape`` in markup and SVG, ``<``, ``>``
and ``&`` as ``\\u003c``-style escapes inside the JSON blocks, and the script only ever sets ``textContent``.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

#: matplotlib's viridis at 9 evenly spaced stops (interpolated linearly in between)
VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725")
#: Okabe & Ito's colour-blind safe qualitative palette
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000", "#999999")
#: fill patterns, so that bars differ without colour too (print, greyscale)
PATTERNS = ("solid", "diag", "dots", "cross", "horiz", "anti", "vert", "grid")
MAX_TEXT = 4000
PAGE_ROWS = 500


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: Any, digits: int = 3) -> str:
    v = _finite(value)
    return "–" if v is None else f"{v:.{digits}f}"


def _usd(value: Any) -> str:
    from pytest_medhelm.cost import format_usd

    return format_usd(_finite(value))


def _int(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def viridis(t: float) -> str:
    t = min(1.0, max(0.0, t))
    pos = t * (len(VIRIDIS) - 1)
    i = min(int(pos), len(VIRIDIS) - 2)
    frac = pos - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    rgb = [round(int(a[k:k + 2], 16) + (int(b[k:k + 2], 16) - int(a[k:k + 2], 16)) * frac) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(int(colour[k:k + 2], 16)) for k in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21; 4.5 is the minimum for normal text)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _ink(t: float) -> str:
    """Text colour on viridis(t): white or black, whichever contrasts more (at least 4.58:1 on any colour)."""
    background = viridis(t)
    return max(("#ffffff", "#000000"), key=lambda ink: contrast_ratio(ink, background))


def _text_width(text: str, size: float = 11.0) -> float:
    return len(text) * size * 0.6


def _clip(text: Any, limit: int) -> str:
    if text is None:
        return ""
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    if len(text) > limit:
        return text[:limit] + f" … [cut: {len(text):,} characters in all; the results JSON has the whole text]"
    return text


def script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``, no line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# ----------------------------------------------------------------------------------------------- the data
def _models(results: Mapping[str, Any]) -> list[str]:
    models = list(results.get("run", {}).get("models") or [])
    for group in ("models", "benchmarks", "categories"):
        for row in results.get(group) or []:
            if row.get("model") is not None and row["model"] not in models:
                models.append(row["model"])
    return models


def _category_order() -> dict[str, int]:
    try:
        from pytest_medhelm.catalogue.taxonomy import CATEGORIES
    except Exception:  # pragma: no cover
        return {}
    order = {}
    for i, cat in enumerate(CATEGORIES):
        order[cat.name] = i
        order[cat.slug] = i
    return order


def _benchmarks(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(slug, category display name) of the run's benchmarks, grouped by category in the paper's order."""
    order = _category_order()
    seen: dict[str, str] = {}
    for row in results.get("benchmarks") or []:
        seen.setdefault(row["slug"], row.get("category") or "")
    for inst in results.get("instances") or []:
        seen.setdefault(inst.get("benchmark"), "")
    return sorted(seen.items(), key=lambda kv: (order.get(kv[1], len(order)), kv[1], kv[0]))


def _leaderboard_rows(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return sorted(results.get("models") or [], key=lambda r: (
        -(_finite(r.get("win_rate")) if _finite(r.get("win_rate")) is not None else -1.0),
        -(_finite(r.get("macro_avg")) or 0.0), str(r.get("model"))))


def _total_cost(row: Mapping[str, Any]) -> float | None:
    from pytest_medhelm.cost import add_costs

    return add_costs([_finite(row.get("cost_usd")), _finite(row.get("jury_cost_usd", 0.0))])


def _is_miss(inst: Mapping[str, Any]) -> bool:
    if inst.get("error"):
        return False
    missed = inst.get("missed")
    if missed is not None:
        return bool(missed)
    score = _finite(inst.get("score"))
    return score is not None and score == 0.0


def jury_entries(inst: Mapping[str, Any], limit: int = MAX_TEXT) -> list[list[Any]]:
    """The judges' verdicts in an instance record, flattened to ``[label, score, explanation]``.

    Looks in ``inst["jury"]`` and ``inst["metrics"]["jury"]``, whatever their nesting: judge → criterion →
    ``{"score": ..., "explanation": ...}``, a list of ``{"judge": ..., "score": ..., "explanation": ...}``, or
    plain numbers."""
    sources = []
    if inst.get("jury") is not None:
        sources.append(inst["jury"])
    metrics = inst.get("metrics")
    if isinstance(metrics, Mapping) and metrics.get("jury") is not None:
        sources.append(metrics["jury"])
    out: list[list[Any]] = []
    for source in sources:
        if isinstance(source, Mapping) and isinstance(source.get("per_judge"), Mapping):
            _jury_record(source, out, limit)  # pytest_medhelm.jury's JuryResult.to_record()
        else:
            _walk_jury(source, [], out, limit)
    return out[:200]


def _jury_record(record: Mapping[str, Any], out: list[list[Any]], limit: int) -> None:
    for judge, criteria in record["per_judge"].items():
        if isinstance(criteria, Mapping):
            for criterion, verdict in criteria.items():
                if isinstance(verdict, Mapping):
                    out.append([f"{judge} / {criterion}", _score_value(verdict.get("score")),
                                _clip(verdict.get("explanation") or "", limit)])
                else:
                    out.append([f"{judge} / {criterion}", _score_value(verdict), ""])
    for judge, reason in (record.get("failures") or {}).items():
        out.append([str(judge), None, _clip(f"excluded: {reason}", limit)])
    if record.get("raw") is not None or record.get("flagged"):
        out.append(["jury mean (1-5)", _score_value(record.get("raw")),
                    _clip(f"flagged: {record['flagged']}" if record.get("flagged") else "", limit)])


def _score_value(score: Any) -> Any:
    if score is None or _finite(score) is not None or isinstance(score, str):
        return score
    return json.dumps(score, default=str)


_LEAF_KEYS = ("explanation", "score", "rating", "reason", "reasoning", "rationale")
_NAME_KEYS = ("judge", "model", "name", "criterion", "annotator")


def _walk_jury(node: Any, path: list[str], out: list[list[Any]], limit: int) -> None:
    if isinstance(node, Mapping):
        name = next((str(node[k]) for k in _NAME_KEYS if isinstance(node.get(k), str)), None)
        here = path + [name] if name and name not in path else path
        if any(k in node for k in _LEAF_KEYS):
            score = next((node[k] for k in ("score", "rating") if k in node), None)
            expl = next((node[k] for k in ("explanation", "reason", "reasoning", "rationale") if k in node), "")
            out.append([" / ".join(here) or "jury", _score_value(score), _clip(expl, limit)])
            for key, value in node.items():
                if isinstance(value, (Mapping, list)) and key not in _LEAF_KEYS:
                    _walk_jury(value, here + [str(key)], out, limit)
            return
        for key, value in node.items():
            if key in _NAME_KEYS and isinstance(value, str):
                continue
            _walk_jury(value, here + [str(key)], out, limit)
    elif isinstance(node, (list, tuple)):
        for value in node:
            _walk_jury(value, path, out, limit)
    elif node is not None:
        finite = _finite(node)
        out.append([" / ".join(path) or "jury", finite if finite is not None else None,
                    "" if finite is not None else _clip(node, limit)])


def _instance_rows(results: Mapping[str, Any], max_text: int) -> dict[str, list[list[Any]]]:
    rows: dict[str, list[list[Any]]] = defaultdict(list)
    for inst in results.get("instances") or []:
        answer = inst.get("answer")
        rows[inst.get("benchmark")].append([
            inst.get("model") or "", str(inst.get("instance_id") or ""), inst.get("prompt_sha256") or "",
            _clip(answer, max_text), _clip(inst.get("expected"), max_text), _finite(inst.get("score")),
            _finite(inst.get("raw_score")), 1 if _is_miss(inst) else 0, _clip(inst.get("error"), max_text) or None,
            jury_entries(inst, max_text), _clip(inst.get("question"), max_text) or None,
            _clip(inst.get("reference"), max_text) or None])
    return rows


# ----------------------------------------------------------------------------------------------- sections
def _meta(results: Mapping[str, Any]) -> str:
    run = results.get("run") or {}
    items = [("models", ", ".join(run.get("models") or []) or "–"),
             ("judges", ", ".join(run.get("judges") or []) or "–"),
             ("started", run.get("started") or "–"), ("finished", run.get("finished") or "–"),
             ("compat", run.get("compat") or "default"), ("judge prompts", run.get("jury_prompts") or "–"),
             ("git commit", run.get("git_commit") or "n/a"),
             ("pytest-medhelm", run.get("plugin_version") or "?"),
             ("instances", f"{len(results.get('instances') or []):,}")]
    cap = run.get("generation_cap")
    if cap:
        items.append(("answers capped at", f"{cap.get('max_tokens')} tokens (--medhelm-max-tokens)"))
    meta = "<dl class=\"meta\">" + "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in items) + "</dl>"
    from pytest_medhelm.report.generation_cap import cap_note

    note = cap_note(cap)
    return meta + (f"<p class=\"note\" id=\"generation-cap\"><strong>{_e(note)}</strong></p>" if note else "")


def _leaderboard(results: Mapping[str, Any]) -> str:
    head = ["Rank", "Model", "Win rate", "Win SD", "Macro avg", "SD", "Tokens in", "Tokens out", "Model cost",
            "Jury tokens in", "Jury tokens out", "Jury cost", "Total cost"]
    body = []
    from pytest_medhelm.cost import model_row_costs

    for rank, r in enumerate(_leaderboard_rows(results), 1):
        model_cost, jury_cost, total_cost = ("–" if text == "-" else _e(text) for text in model_row_costs(r))
        cells = [str(rank), _e(r.get("model")), _fmt(r.get("win_rate"), 2), _fmt(r.get("win_sd"), 2),
                 _fmt(r.get("macro_avg")), _fmt(r.get("macro_sd")), _int(r.get("tokens_in")),
                 _int(r.get("tokens_out")), model_cost, _int(r.get("jury_tokens_in")),
                 _int(r.get("jury_tokens_out")), jury_cost, total_cost]
        body.append("<tr>" + "".join(("<td class=\"name\">" if i == 1 else "<td>") + c + "</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    if not body:
        body.append(f"<tr><td colspan=\"{len(head)}\">no model was scored</td></tr>")
    note = ("<p class=\"note\">Win rate: HELM's mean win rate over the benchmark columns (needs two models or "
            "more). Macro avg: the unweighted mean of the benchmark scores. Cost in USD; <em>unknown</em> where a "
            "price is unknown (never counted as 0; give it with <code>--medhelm-prices FILE</code>); – for the jury "
            "when no judge was asked.</p>")
    return ("<table class=\"data\" id=\"leaderboard-table\"><thead><tr>" + "".join(f"<th scope=\"col\">{h}</th>"
                                                                                 for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>" + note)


def _heatmap(results: Mapping[str, Any]) -> str:
    models = _models(results)
    benches = _benchmarks(results)
    cells = {(r["slug"], r["model"]): r for r in results.get("benchmarks") or []}
    if not benches or not models:
        return "<p>no benchmark was scored</p>"
    cw, ch, gap_cat = 86, 26, 20
    label_w = max(max(_text_width(slug) for slug, _ in benches),
                  max(_text_width(cat or "other", 12) for _, cat in benches) - 2 * cw + 16) + 16
    longest = max(_text_width(m) for m in models)
    # column labels are turned 35 degrees: they rise sin(35°) and reach cos(35°) of their length to the right
    top = longest * 0.574 + 24
    right = max(40.0, longest * 0.819 - cw / 2 + 12, 280 - len(models) * cw)
    parts = []
    y = top
    current_cat = None
    for slug, cat in benches:
        if cat != current_cat:
            current_cat = cat
            y += 4
            parts.append(f"<text class=\"cat\" x=\"4\" y=\"{y + 12:.0f}\">{_e(cat or 'other')}</text>")
            y += gap_cat
        parts.append(f"<text class=\"rowlabel\" x=\"{label_w - 8:.0f}\" y=\"{y + ch / 2 + 4:.0f}\" "
                     f"text-anchor=\"end\">{_e(slug)}</text>")
        for j, model in enumerate(models):
            x = label_w + j * cw
            r = cells.get((slug, model))
            mean = _finite(r.get("mean")) if r else None
            if mean is None:
                tip = f"{slug} × {model}: no score"
                parts.append(f"<g class=\"cell empty\"><title>{_e(tip)}</title><rect x=\"{x}\" y=\"{y:.0f}\" "
                             f"width=\"{cw - 2}\" height=\"{ch - 2}\" fill=\"url(#hatch)\" stroke=\"#999\"/>"
                             f"<text x=\"{x + cw / 2 - 1:.0f}\" y=\"{y + ch / 2 + 3:.0f}\" text-anchor=\"middle\">–"
                             f"</text></g>")
                continue
            tip = (f"{slug} × {model}: {mean:.3f} [{_fmt(r.get('ci_low'))}, {_fmt(r.get('ci_high'))}] "
                   f"n={r.get('n')}")
            parts.append(f"<g class=\"cell\"><title>{_e(tip)}</title><rect x=\"{x}\" y=\"{y:.0f}\" "
                         f"width=\"{cw - 2}\" height=\"{ch - 2}\" fill=\"{viridis(mean)}\"/>"
                         f"<text class=\"{'on-dark' if _ink(mean) == '#ffffff' else 'on-light'}\" "
                         f"x=\"{x + cw / 2 - 1:.0f}\" y=\"{y + ch / 2 + 3:.0f}\" text-anchor=\"middle\" "
                         f"fill=\"{_ink(mean)}\">{mean:.3f}</text></g>")
        y += ch
    for j, model in enumerate(models):
        x = label_w + j * cw + cw / 2
        parts.append(f"<text class=\"collabel\" transform=\"translate({x:.0f},{top - 8:.0f}) rotate(-35)\">"
                     f"{_e(model)}</text>")
    # legend: 0 → 1 in ten steps
    ly = y + 18
    legend = [f"<text class=\"axis\" x=\"{label_w:.0f}\" y=\"{ly - 4:.0f}\">normalized score</text>"]
    for k in range(10):
        t = (k + 0.5) / 10
        legend.append(f"<rect x=\"{label_w + k * 24:.0f}\" y=\"{ly:.0f}\" width=\"24\" height=\"12\" "
                      f"fill=\"{viridis(t)}\"/>")
    for k, t in enumerate((0.0, 0.5, 1.0)):
        legend.append(f"<text class=\"axis\" x=\"{label_w + t * 240:.0f}\" y=\"{ly + 26:.0f}\" "
                      f"text-anchor=\"middle\">{t:.1f}</text>")
    width = label_w + len(models) * cw + right
    height = ly + 36
    defs = ("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fff\"/>"
            "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbb\" stroke-width=\"2\"/></pattern></defs>")
    return (f"<svg class=\"chart\" id=\"heatmap-chart\" role=\"img\" aria-labelledby=\"heatmap-title\" "
            f"viewBox=\"0 0 {width:.0f} {height:.0f}\" width=\"{width:.0f}\" height=\"{height:.0f}\" "
            f"xmlns=\"http://www.w3.org/2000/svg\"><title id=\"heatmap-title\">Normalized score per benchmark and "
            f"model</title>{defs}{''.join(parts)}{''.join(legend)}</svg>")


def _pattern_defs(models: Sequence[str], prefix: str) -> str:
    defs = []
    for i, _model in enumerate(models):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        kind = PATTERNS[i % len(PATTERNS)]
        ink = "#ffffff" if colour in ("#000000", "#0072B2", "#D55E00", "#009E73") else "#000000"
        marks = {
            "solid": "",
            "diag": f"<path d=\"M-2,2 l4,-4 M0,8 l8,-8 M6,10 l4,-4\" stroke=\"{ink}\" stroke-width=\"1.4\"/>",
            "anti": f"<path d=\"M-2,6 l4,4 M0,0 l8,8 M6,-2 l4,4\" stroke=\"{ink}\" stroke-width=\"1.4\"/>",
            "dots": f"<circle cx=\"4\" cy=\"4\" r=\"1.6\" fill=\"{ink}\"/>",
            "cross": f"<path d=\"M0,0 l8,8 M8,0 l-8,8\" stroke=\"{ink}\" stroke-width=\"1.1\"/>",
            "horiz": f"<path d=\"M0,4 h8\" stroke=\"{ink}\" stroke-width=\"1.6\"/>",
            "vert": f"<path d=\"M4,0 v8\" stroke=\"{ink}\" stroke-width=\"1.6\"/>",
            "grid": f"<path d=\"M0,4 h8 M4,0 v8\" stroke=\"{ink}\" stroke-width=\"1.1\"/>",
        }[kind]
        defs.append(f"<pattern id=\"{prefix}{i}\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\">"
                    f"<rect width=\"8\" height=\"8\" fill=\"{colour}\"/>{marks}</pattern>")
    return "<defs>" + "".join(defs) + "</defs>"


def _categories(results: Mapping[str, Any]) -> str:
    models = _models(results)
    rows = results.get("categories") or []
    if not rows or not models:
        return "<p>no category was scored</p>"
    order = _category_order()
    cats = sorted({r["category"] for r in rows}, key=lambda c: (order.get(c, len(order)), c))
    cells = {(r["category"], r["model"]): r for r in rows}
    label_w = max(_text_width(m) for m in models) + 16
    bar_w, bar_h = 360, 16
    parts = []
    y = 8
    for cat in cats:
        parts.append(f"<text class=\"cat\" x=\"4\" y=\"{y + 12}\">{_e(cat)}</text>")
        y += 20
        for i, model in enumerate(models):
            r = cells.get((cat, model))
            score = _finite(r.get("score")) if r else None
            parts.append(f"<text class=\"rowlabel\" x=\"{label_w - 8:.0f}\" y=\"{y + 12}\" text-anchor=\"end\">"
                         f"{_e(model)}</text>")
            parts.append(f"<rect x=\"{label_w:.0f}\" y=\"{y}\" width=\"{bar_w}\" height=\"{bar_h}\" "
                         f"fill=\"none\" stroke=\"#ddd\"/>")
            if score is None:
                value = "no score"
            else:
                value = f"{score:.3f} ({r.get('n_benchmarks')} benchmark{'s' if r.get('n_benchmarks') != 1 else ''})"
                parts.append(f"<rect class=\"bar\" x=\"{label_w:.0f}\" y=\"{y}\" width=\"{score * bar_w:.1f}\" "
                             f"height=\"{bar_h}\" fill=\"url(#cat-pat-{i})\" stroke=\"#333\" stroke-width=\"0.6\">"
                             f"<title>{_e(f'{cat}, {model}: {score:.3f}')}</title></rect>")
            parts.append(f"<text class=\"value\" x=\"{label_w + bar_w + 6:.0f}\" y=\"{y + 12}\">{_e(value)}</text>")
            y += bar_h + 4
        y += 10
    axis_y = y
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + t * bar_w
        parts.append(f"<line x1=\"{x:.0f}\" y1=\"{axis_y - 4}\" x2=\"{x:.0f}\" y2=\"{axis_y + 2}\" stroke=\"#333\"/>"
                     f"<text class=\"axis\" x=\"{x:.0f}\" y=\"{axis_y + 14}\" text-anchor=\"middle\">{t:.2f}</text>")
    width = label_w + bar_w + 170
    height = axis_y + 24
    return (f"<svg class=\"chart\" id=\"category-chart\" role=\"img\" aria-labelledby=\"category-title\" "
            f"viewBox=\"0 0 {width:.0f} {height}\" width=\"{width:.0f}\" height=\"{height}\" "
            f"xmlns=\"http://www.w3.org/2000/svg\"><title id=\"category-title\">Category scores per model "
            f"(unweighted mean of the category's benchmarks)</title>{_pattern_defs(models, 'cat-pat-')}"
            f"{''.join(parts)}</svg>")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        top = step * 10 ** exp
        if top >= value:
            return top
    return 10 ** (exp + 1)


def _scatter(results: Mapping[str, Any]) -> str:
    rows = _leaderboard_rows(results)
    use_win = sum(1 for r in rows if _finite(r.get("win_rate")) is not None) >= 2
    y_key, y_label = ("win_rate", "win rate") if use_win else ("macro_avg", "macro-average score")
    points, missing = [], []
    models = _models(results)
    for r in rows:
        cost, y = _total_cost(r), _finite(r.get(y_key))
        if cost is None or y is None:
            missing.append(f"{r.get('model')} ({'cost unknown' if cost is None else 'no ' + y_label})")
        else:
            points.append((r.get("model"), cost, y))
    if not points:  # nothing to plot: a sentence, not an empty chart with a made-up axis
        why = "; ".join(missing) if missing else "no model was scored"
        return (f"<p class=\"note\" id=\"cost-none\">No cost chart: {_e(why)}. A cost is never counted as 0 when "
                "its price is unknown: give the prices of the models and judges with <code>--medhelm-prices "
                "FILE</code>.</p>")
    w, h, left, bottom, top, right = 560, 300, 64, 46, 16, 190
    x_max = _nice_max(max((p[1] for p in points), default=0.0) * 1.05)
    parts = [f"<rect x=\"{left}\" y=\"{top}\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#999\"/>"]
    for k in range(6):
        t = k / 5
        x = left + t * w
        parts.append(f"<line x1=\"{x:.1f}\" y1=\"{top}\" x2=\"{x:.1f}\" y2=\"{top + h}\" stroke=\"#e3e3e3\"/>"
                     f"<text class=\"axis\" x=\"{x:.1f}\" y=\"{top + h + 16}\" text-anchor=\"middle\">"
                     f"{_e(_usd(t * x_max))}</text>")
    for k in range(5):
        t = k / 4
        yy = top + h - t * h
        parts.append(f"<line x1=\"{left}\" y1=\"{yy:.1f}\" x2=\"{left + w}\" y2=\"{yy:.1f}\" stroke=\"#e3e3e3\"/>"
                     f"<text class=\"axis\" x=\"{left - 6}\" y=\"{yy + 4:.1f}\" text-anchor=\"end\">{t:.2f}</text>")
    parts.append(f"<text class=\"axis\" x=\"{left + w / 2:.0f}\" y=\"{top + h + 36}\" text-anchor=\"middle\">"
                 f"total cost (model + jury, USD)</text>")
    parts.append(f"<text class=\"axis\" transform=\"translate(16,{top + h / 2:.0f}) rotate(-90)\" "
                 f"text-anchor=\"middle\">{_e(y_label)}</text>")
    shapes = ("circle", "square", "triangle", "diamond")
    def centre(cost: float, y: float) -> tuple[float, float]:
        return left + cost / x_max * w, top + h - min(1.0, max(0.0, y)) * h

    markers = {model: centre(cost, y) for model, cost, y in points}
    placed: list[tuple[float, float, float]] = []  # label boxes (x0, x1, baseline) already drawn
    for model, cost, y in sorted(points, key=lambda p: (-p[2], p[1])):
        i = models.index(model) if model in models else 0
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        cx, cy = markers[model]
        shape = shapes[i % len(shapes)]
        tip = f"<title>{_e(f'{model}: {y_label} {y:.3f}, total cost {_usd(cost)}')}</title>"
        if shape == "circle":
            mark = f"<circle cx=\"{cx:.1f}\" cy=\"{cy:.1f}\" r=\"6\""
        elif shape == "square":
            mark = f"<rect x=\"{cx - 5.5:.1f}\" y=\"{cy - 5.5:.1f}\" width=\"11\" height=\"11\""
        elif shape == "triangle":
            mark = f"<path d=\"M{cx:.1f},{cy - 7:.1f} L{cx + 6.5:.1f},{cy + 5:.1f} L{cx - 6.5:.1f},{cy + 5:.1f} Z\""
        else:
            mark = f"<path d=\"M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} L{cx - 7:.1f},{cy:.1f} Z\""
        # a label that would overlap one already drawn moves down a line (labels of close points stay legible)
        lx, ly = cx + 9, cy + 4
        lw = _text_width(str(model), 11.5)
        others = [(mx - 8, mx + 8, my + 4) for other, (mx, my) in markers.items() if other != model]
        while any(lx < x1 and x0 < lx + lw and abs(ly - base) < 13 for x0, x1, base in placed + others):
            ly += 14
        placed.append((lx, lx + lw, ly))
        leader = (f"<line x1=\"{cx:.1f}\" y1=\"{cy:.1f}\" x2=\"{lx - 2:.1f}\" y2=\"{ly - 4:.1f}\" "
                  f"stroke=\"#666\" stroke-width=\"0.7\"/>" if ly != cy + 4 else "")
        parts.append(f"<g class=\"point\">{tip}{leader}{mark} fill=\"{colour}\" stroke=\"#000\" "
                     f"stroke-width=\"1\"/><text class=\"pointlabel\" x=\"{lx:.1f}\" y=\"{ly:.1f}\">"
                     f"{_e(model)}</text></g>")
    width, height = left + w + right, top + h + bottom + 8
    svg = (f"<svg class=\"chart\" id=\"cost-chart\" role=\"img\" aria-labelledby=\"cost-title\" "
           f"viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" "
           f"xmlns=\"http://www.w3.org/2000/svg\"><title id=\"cost-title\">Total cost versus {_e(y_label)}</title>"
           f"{''.join(parts)}</svg>")
    if missing:
        svg += "<p class=\"note\">Not plotted: " + _e("; ".join(missing)) + ".</p>"
    if not use_win:
        svg += "<p class=\"note\">A win rate needs two models or more: the vertical axis shows the macro-average.</p>"
    return svg


def _gates(results: Mapping[str, Any]) -> str:
    gates = results.get("gates") or []
    if not gates:
        return ""
    body = "".join(f"<tr class=\"{'pass' if g.get('passed') else 'fail'}\"><td>{_e(g.get('spec'))}</td>"
                   f"<td class=\"name\">{_e(g.get('model'))}</td><td>{_fmt(g.get('value'))}</td>"
                   f"<td>{'PASS' if g.get('passed') else 'FAIL'}</td></tr>" for g in gates)
    return ("<section id=\"gates\"><h2>Gates</h2><table class=\"data\"><thead><tr><th>gate</th><th>model</th>"
            "<th>value</th><th>verdict</th></tr></thead><tbody>" + body + "</tbody></table></section>")


def _jury_agreement(results: Mapping[str, Any]) -> str:
    """The judges' agreement per benchmark with a jury (report/agreement.py); empty when the run had no jury."""
    from pytest_medhelm.report.agreement import agreement_table

    header, rows = agreement_table(results)
    if not rows:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return ("<section id=\"jury-agreement\"><h2>Jury agreement</h2><p class=\"note\">How far the judges agree: "
            "ICC(3,k) (consistency of the judges' mean) and Krippendorff's alpha (interval) over each judge's mean "
            "score per instance; the instances every judge graded; each judge's failures (replies that could not "
            "be read, or requests that failed).</p><table class=\"data\"><thead><tr>" + head
            + "</tr></thead><tbody>" + body + "</tbody></table></section>")


def _rubric_breakdown(results: Mapping[str, Any]) -> str:
    """HealthBench's theme and axis breakdowns (report/rubric_breakdown.py); empty without them."""
    from pytest_medhelm.report.rubric_breakdown import breakdown_table

    header, rows = breakdown_table(results)
    if not rows:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return ("<section id=\"rubric-breakdown\"><h2>HealthBench themes and axes</h2><p class=\"note\">The reference's "
            "breakdowns: per theme (the examples' <code>theme:*</code> tags) and per axis (the criteria's "
            "<code>axis:*</code> tags), the mean score clipped to [0, 1] with the bootstrap standard deviation of "
            "the clipped mean.</p><table class=\"data\"><thead><tr>" + head + "</tr></thead><tbody>" + body
            + "</tbody></table></section>")


def _drilldown(results: Mapping[str, Any], max_text: int) -> str:
    rows = _instance_rows(results, max_text)
    benches = [slug for slug, _cat in _benchmarks(results) if slug in rows]
    benches += sorted(s for s in rows if s not in benches and s is not None)
    if not benches:
        return "<p>no instance was recorded</p>"
    options, blocks = [], []
    for i, slug in enumerate(benches):
        n = len(rows[slug])
        misses = sum(r[7] for r in rows[slug])
        options.append(f"<option value=\"{i}\">{_e(slug)} ({n:,} instances, {misses:,} misses)</option>")
        blocks.append(f"<script type=\"application/json\" id=\"medhelm-data-{i}\" class=\"medhelm-data\">"
                      f"{script_json({'slug': slug, 'rows': rows[slug]})}</script>")
    controls = (
        "<div class=\"controls\">"
        "<label>Benchmark <select id=\"bench-select\">" + "".join(options) + "</select></label> "
        "<label>Search <input type=\"search\" id=\"search\" placeholder=\"question, answer, expected, id, model…\" "
        "autocomplete=\"off\"></label> "
        "<label><input type=\"checkbox\" id=\"misses-only\"> misses only</label> "
        "<span id=\"row-count\" aria-live=\"polite\"></span></div>")
    from pytest_medhelm.report.texts import HOW

    if any(r[10] is not None or r[11] is not None for slug in benches for r in rows[slug]):
        texts = (f"<p class=\"note\" id=\"texts-note\">This report holds each instance's question and reference "
                 f"({_e(HOW)}): they may be patient data; share the report as you would the data.</p>")
    else:
        texts = ("<p class=\"note\" id=\"texts-note\">Questions and references are not in this report (benchmark "
                 "data may be patient data): the Question column shows the sha256 of the prompt sent, and Expected "
                 f"the gold answer. To show them, run with {_e(HOW)}.</p>")
    table = ("<table class=\"data instances\" id=\"instances-table\"><thead><tr><th>Model</th><th>Instance</th>"
             "<th>Question</th><th>Answer</th><th>Expected</th><th>Score</th><th>Judges</th></tr></thead>"
             "<tbody></tbody></table><button type=\"button\" id=\"show-more\" hidden>show more</button>"
             "<noscript><p>The instance table needs JavaScript; every instance is in the results JSON.</p>"
             "</noscript>")
    return texts + controls + table + "".join(blocks)


CSS = """
:root { color-scheme: light; --ink: #1a1a1a; --muted: #555; --line: #d0d0d0; --miss: #fff3cd; --err: #fde2e1; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1400px; }
h1 { font-size: 1.6rem; margin: .2rem 0 .6rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .6rem;
     border-bottom: 2px solid var(--ink); padding-bottom: .2rem; }
nav a { margin-right: 1rem; color: #0b5394; }
dl.meta { display: flex; flex-wrap: wrap; gap: .3rem 1.6rem; margin: .4rem 0 1rem; }
dl.meta div { display: flex; gap: .4rem; } dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; }
table.data { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: .4rem 0; }
table.data th, table.data td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: right;
                               vertical-align: top; }
table.data th { background: #f1f1f1; } table.data td.name { text-align: left; font-weight: 600; }
table.instances td, table.instances th { text-align: left; max-width: 32rem; }
table.instances td .text { white-space: pre-wrap; word-break: break-word; max-height: 14rem; overflow: auto; }
table.instances td.hash { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
table.instances tr.miss td { background: var(--miss); } table.instances tr.error td { background: var(--err); }
table.instances td.score { white-space: nowrap; text-align: right; }
table.instances ul { margin: .3rem 0 0 1rem; padding: 0; }
tr.fail td { background: var(--err); }
.controls { display: flex; flex-wrap: wrap; gap: .6rem 1.2rem; align-items: center; margin: .5rem 0; }
.controls input[type=search] { width: 22rem; padding: .25rem; }
.note { color: var(--muted); font-size: 12.5px; max-width: 60rem; }
svg.chart { max-width: 100%; height: auto; display: block; margin: .4rem 0; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: #1a1a1a; }
svg text.cat { font-weight: 700; font-size: 12px; } svg .cell text { font-size: 11px; }
svg .cell text.on-dark { fill: #ffffff; } svg .cell text.on-light { fill: #000000; }
svg text.pointlabel { font-size: 11.5px; font-weight: 600; }
button { margin: .4rem 0; }
@media print {
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav, .controls, #show-more, noscript { display: none !important; }
  section { break-inside: avoid-page; } #instances { break-inside: auto; }
  table.instances td .text { max-height: none; overflow: visible; }
  h2 { break-after: avoid; } tr { break-inside: avoid; }
}
"""

JS = r"""
(function () {
  "use strict";
  var PAGE = %(page)d;
  var select = document.getElementById("bench-select");
  if (!select) { return; }
  var search = document.getElementById("search"), misses = document.getElementById("misses-only");
  var tbody = document.querySelector("#instances-table tbody"), counter = document.getElementById("row-count");
  var more = document.getElementById("show-more");
  var parsed = {}, haystacks = {}, limit = PAGE, timer = null;
  function rows(idx) {
    if (!(idx in parsed)) {
      var el = document.getElementById("medhelm-data-" + idx);
      parsed[idx] = el ? JSON.parse(el.textContent).rows : [];
      haystacks[idx] = parsed[idx].map(function (r) {
        var judges = r[9].map(function (j) { return j[0] + " " + (j[2] || ""); }).join(" ");
        return [r[0], r[1], r[2], r[3], r[4], r[8] || "", judges, r[10] || "", r[11] || ""].join("\u0000")
          .toLowerCase();
      });
    }
    return parsed[idx];
  }
  function text(td, value) {
    var div = document.createElement("div");
    div.className = "text";
    div.textContent = value;
    td.appendChild(div);
  }
  function fmt(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(3); }
  function row(r) {
    var tr = document.createElement("tr"), td;
    if (r[8]) { tr.className = "error"; } else if (r[7]) { tr.className = "miss"; }
    td = document.createElement("td"); td.textContent = r[0]; tr.appendChild(td);
    td = document.createElement("td"); td.textContent = r[1]; tr.appendChild(td);
    td = document.createElement("td");
    if (r[10]) { text(td, r[10]); td.title = "prompt sha256 " + r[2]; } else {
      td.className = "hash"; td.title = "prompt sha256 " + r[2] + " (the question is not in this report)";
      td.textContent = r[2] ? "sha256 " + r[2].slice(0, 12) + "…" : "–";
    }
    tr.appendChild(td);
    td = document.createElement("td"); text(td, r[8] ? "error: " + r[8] : r[3]); tr.appendChild(td);
    td = document.createElement("td"); text(td, r[11] || r[4]); tr.appendChild(td);
    td = document.createElement("td"); td.className = "score";
    td.textContent = r[8] ? "error" : fmt(r[5]) + (r[7] ? " ✗ miss" : "");
    if (r[6] !== null && r[6] !== r[5]) { td.title = "raw " + r[6]; }
    tr.appendChild(td);
    td = document.createElement("td");
    if (r[9].length) {
      var details = document.createElement("details"), summary = document.createElement("summary");
      summary.textContent = r[9].length + " verdict" + (r[9].length === 1 ? "" : "s");
      details.appendChild(summary);
      var ul = document.createElement("ul");
      r[9].forEach(function (j) {
        var li = document.createElement("li"), b = document.createElement("b");
        b.textContent = j[0] + (j[1] === null || j[1] === undefined ? "" : ": " + j[1]);
        li.appendChild(b);
        if (j[2]) { li.appendChild(document.createTextNode(" — " + j[2])); }
        ul.appendChild(li);
      });
      details.appendChild(ul);
      td.appendChild(details);
    } else { td.textContent = "–"; }
    tr.appendChild(td);
    return tr;
  }
  function render() {
    var idx = select.value, all = rows(idx), hay = haystacks[idx];
    var needle = search.value.trim().toLowerCase(), onlyMisses = misses.checked;
    var frag = document.createDocumentFragment(), shown = 0, matching = 0;
    for (var i = 0; i < all.length; i++) {
      if (onlyMisses && !all[i][7]) { continue; }
      if (needle && hay[i].indexOf(needle) < 0) { continue; }
      matching++;
      if (shown < limit) { frag.appendChild(row(all[i])); shown++; }
    }
    tbody.textContent = "";
    tbody.appendChild(frag);
    counter.textContent = "showing " + shown + " of " + matching + " matching (" + all.length + " instances)";
    more.hidden = matching <= shown;
  }
  function reset() { limit = PAGE; render(); }
  select.addEventListener("change", reset);
  misses.addEventListener("change", reset);
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(reset, 120); });
  more.addEventListener("click", function () { limit += PAGE; render(); });
  render();
  document.documentElement.setAttribute("data-medhelm-ready", "1");
})();
"""

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")


def render_html(results: Mapping[str, Any], *, title: str = "MedHELM results", max_text: int = MAX_TEXT,
                page_rows: int = PAGE_ROWS) -> str:
    """The whole report as one HTML string (no external resource of any kind)."""
    sections = [
        ("leaderboard", "Leaderboard", _leaderboard(results)),
        ("heatmap", "Scores per benchmark", "<p class=\"note\">Normalized score (0–1) of each benchmark × model, "
         "the number in every cell; hatched: no score.</p>" + _heatmap(results)),
        ("categories", "Categories", _categories(results)),
        ("cost", "Cost versus win rate", _scatter(results)),
    ]
    body = [f"<header><h1>{_e(title)}</h1>{_meta(results)}<nav>"
            + "".join(f"<a href=\"#{sid}\">{_e(name)}</a>" for sid, name, _ in sections)
            + "<a href=\"#instances\">Instances</a></nav></header>"]
    for sid, name, content in sections:
        body.append(f"<section id=\"{sid}\"><h2>{_e(name)}</h2>{content}</section>")
    body.append(_gates(results))
    body.append(_jury_agreement(results))
    body.append(_rubric_breakdown(results))
    body.append("<section id=\"instances\"><h2>Instances</h2>" + _drilldown(results, max_text) + "</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"generator\" content=\"pytest-medhelm {_e((results.get('run') or {}).get('plugin_version'))}\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "".join(body)
            + f"<script>{JS % {'page': int(page_rows)}}</script></body></html>\n")


def write_html(results: Mapping[str, Any], path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Write the report atomically (a temporary file beside it, then a rename): never a half-written page."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        from pytest_medhelm.report.texts import open_report

        with open_report(tmp, results) as fh:  # (0600 when it holds instance texts: possibly patient data)
            fh.write(render_html(results, **kwargs))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
