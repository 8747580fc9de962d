"""The charts' geometry: where every mark of the heatmap, the category bars and the cost chart goes, and its colour.

Computed here, in Python, from the typed scores of views.py; the templates only write the SVG elements out.
Coordinates are in SVG user units; text widths are estimated (0.6 em a character) for the layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_medhelm.cost import format_usd
from pytest_medhelm.report.html.colours import BLACK, DARK_OKABE_ITO, OKABE_ITO, PATTERNS, WHITE, ink_on, viridis
from pytest_medhelm.report.html.views import BenchmarkScore, CategoryScore, ModelSummary, fmt


@dataclass(frozen=True)
class Label:
    """An SVG text; ``rotate`` turns it about its anchor point (degrees)."""

    x: float
    y: float
    text: str
    css_class: str = ""
    anchor: str = "start"
    rotate: float = 0.0


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float
    fill: str = "none"


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class Tick:
    line: Line
    label: Label


@dataclass(frozen=True)
class HeatCell:
    box: Box
    value: Label
    tooltip: str
    ink: str | None  # None: no score (a hatched cell)


@dataclass(frozen=True)
class Heatmap:
    width: float
    height: float
    category_labels: list[Label]
    row_labels: list[Label]
    column_labels: list[Label]
    cells: list[HeatCell]
    legend_title: Label
    legend_swatches: list[Box]
    legend_ticks: list[Label]


@dataclass(frozen=True)
class FillPattern:
    """A model's bar fill: its Okabe-Ito colour and a pattern of marks (``kind``) in a contrasting ink."""

    id: str
    colour: str
    kind: str
    ink: str


@dataclass(frozen=True)
class CategoryBar:
    model_label: Label
    track: Box
    bar: Box | None  # None: no score
    tooltip: str
    value: Label


@dataclass(frozen=True)
class CategoryChart:
    width: float
    height: float
    patterns: list[FillPattern]
    category_labels: list[Label]
    bars: list[CategoryBar]
    ticks: list[Tick]


@dataclass(frozen=True)
class CostPoint:
    """A model's marker: ``shape`` circle (``cx``, ``cy``, r 6), square (``box``) or a polygon (``path``)."""

    shape: str
    cx: float
    cy: float
    colour: str
    tooltip: str
    label: Label
    leader: Line | None
    box: Box | None = None
    path: str = ""


@dataclass(frozen=True)
class CostChart:
    width: float
    height: float
    y_label: str
    frame: Box
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_title: Label
    y_title: Label
    points: list[CostPoint]


def text_width(text: str, size: float = 11.0) -> float:
    return len(text) * size * 0.6


# ----------------------------------------------------------------------------------------------- heatmap
def heatmap(models: Sequence[str], benches: Sequence[tuple[str, str]], scores: Sequence[BenchmarkScore]) -> Heatmap:
    """Benchmarks × models, grouped by category; every cell with its number, in a readable ink."""
    cells_by_key = {(s.slug, s.model): s for s in scores}
    cw, ch, gap_cat = 86, 26, 20
    label_w = max(max(text_width(slug) for slug, _ in benches),
                  max(text_width(cat or "other", 12) for _, cat in benches) - 2 * cw + 16) + 16
    longest = max(text_width(m) for m in models)
    # column labels are turned 35 degrees: they rise sin(35°) and reach cos(35°) of their length to the right
    top = round(longest * 0.574 + 24)
    right = max(40.0, longest * 0.819 - cw / 2 + 12, 280 - len(models) * cw)
    categories, rows, cells = [], [], []
    y, current = top, None
    for slug, cat in benches:
        if cat != current:
            current = cat
            y += 4
            categories.append(Label(4, y + 12, cat or "other", "cat"))
            y += gap_cat
        rows.append(Label(label_w - 8, y + ch / 2 + 4, slug, "rowlabel", "end"))
        for j, model in enumerate(models):
            x = label_w + j * cw
            score = cells_by_key.get((slug, model))
            mean = score.mean if score else None
            centre = Label(x + cw / 2 - 1, y + ch / 2 + 3, "–" if mean is None else f"{mean:.3f}", anchor="middle")
            if score is None or mean is None:
                cells.append(HeatCell(Box(x, y, cw - 2, ch - 2, "url(#hatch)"), centre, f"{slug} × {model}: no score",
                                      None))
                continue
            ink = ink_on(viridis(mean))
            tip = f"{slug} × {model}: {mean:.3f} [{fmt(score.ci_low)}, {fmt(score.ci_high)}] n={score.n}"
            value = Label(centre.x, centre.y, centre.text, "on-dark" if ink == WHITE else "on-light", "middle")
            cells.append(HeatCell(Box(x, y, cw - 2, ch - 2, viridis(mean)), value, tip, ink))
        y += ch
    columns = [Label(label_w + j * cw + cw / 2, top - 8, model, "collabel", rotate=-35)
               for j, model in enumerate(models)]
    ly = y + 18  # the legend: 0 → 1 in ten steps
    swatches = [Box(label_w + k * 24, ly, 24, 12, viridis((k + 0.5) / 10)) for k in range(10)]
    ticks = [Label(label_w + t * 240, ly + 26, f"{t:.1f}", "axis", "middle") for t in (0.0, 0.5, 1.0)]
    return Heatmap(width=label_w + len(models) * cw + right, height=ly + 36, category_labels=categories,
                   row_labels=rows, column_labels=columns, cells=cells,
                   legend_title=Label(label_w, ly - 4, "normalized score", "axis"), legend_swatches=swatches,
                   legend_ticks=ticks)


# ----------------------------------------------------------------------------------------------- categories
def fill_patterns(models: Sequence[str], prefix: str) -> list[FillPattern]:
    """Each model's colour and pattern (in the models' order), so that bars differ without colour too."""
    out = []
    for i, _model in enumerate(models):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        out.append(FillPattern(f"{prefix}{i}", colour, PATTERNS[i % len(PATTERNS)],
                               WHITE if colour in DARK_OKABE_ITO else BLACK))
    return out


def category_chart(models: Sequence[str], categories: Sequence[str],
                   scores: Sequence[CategoryScore]) -> CategoryChart:
    """Labelled bars: for each category, one bar per model, its value printed beside it."""
    by_key = {(s.category, s.model): s for s in scores}
    label_w = max(text_width(m) for m in models) + 16
    bar_w, bar_h = 360, 16
    patterns = fill_patterns(models, "cat-pat-")
    labels, bars = [], []
    y = 8
    for cat in categories:
        labels.append(Label(4, y + 12, cat, "cat"))
        y += 20
        for i, model in enumerate(models):
            row = by_key.get((cat, model))
            score = row.score if row else None
            track = Box(label_w, y, bar_w, bar_h)
            if row is None or score is None:
                value, bar, tip = "no score", None, ""
            else:
                plural = "s" if row.n_benchmarks != 1 else ""
                value = f"{score:.3f} ({row.n_benchmarks} benchmark{plural})"
                bar = Box(label_w, y, round(score * bar_w, 1), bar_h, f"url(#{patterns[i].id})")
                tip = f"{cat}, {model}: {score:.3f}"
            bars.append(CategoryBar(Label(label_w - 8, y + 12, model, "rowlabel", "end"), track, bar, tip,
                                    Label(label_w + bar_w + 6, y + 12, value, "value")))
            y += bar_h + 4
        y += 10
    ticks = [Tick(Line(label_w + t * bar_w, y - 4, label_w + t * bar_w, y + 2),
                  Label(label_w + t * bar_w, y + 14, f"{t:.2f}", "axis", "middle"))
             for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return CategoryChart(label_w + bar_w + 170, y + 24, patterns, labels, bars, ticks)


# ----------------------------------------------------------------------------------------------- cost
def nice_max(value: float) -> float:
    """The axis' end: the first of 1, 2, 2.5, 5, 10 × a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        top = step * 10 ** exp
        if top >= value:
            return float(top)
    return float(10 ** (exp + 1))


SHAPES = ("circle", "square", "triangle", "diamond")


def _marker(shape: str, cx: float, cy: float) -> tuple[Box | None, str]:
    if shape == "square":
        return Box(cx - 5.5, cy - 5.5, 11, 11), ""
    if shape == "triangle":
        return None, f"M{cx:.1f},{cy - 7:.1f} L{cx + 6.5:.1f},{cy + 5:.1f} L{cx - 6.5:.1f},{cy + 5:.1f} Z"
    if shape == "diamond":
        return None, (f"M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} "
                      f"L{cx - 7:.1f},{cy:.1f} Z")
    return None, ""


@dataclass(frozen=True)
class _Plotted:
    model: str
    cost: float
    value: float


@dataclass(frozen=True)
class _LabelBox:
    """The horizontal extent and baseline of a label (or a marker) already on the chart."""

    x0: float
    x1: float
    baseline: float


def cost_chart(models: Sequence[str], plotted: Sequence[ModelSummary], use_win: bool) -> CostChart:
    """Total cost (model + jury) against win rate (macro-average with fewer than two win rates), labelled points;
    ``plotted``: the models whose cost and value are known, in the leaderboard's order."""
    y_label = "win rate" if use_win else "macro-average score"
    points = [_Plotted(m.model, m.total_cost or 0.0, (m.win_rate if use_win else m.macro_avg) or 0.0)
              for m in plotted]
    w, h, left, bottom, top, right = 560, 300, 64, 46, 16, 190
    x_max = nice_max(max((p.cost for p in points), default=0.0) * 1.05)
    x_ticks = [Tick(Line(left + k / 5 * w, top, left + k / 5 * w, top + h),
                    Label(left + k / 5 * w, top + h + 16, format_usd(k / 5 * x_max), "axis", "middle"))
               for k in range(6)]
    y_ticks = [Tick(Line(left, top + h - k / 4 * h, left + w, top + h - k / 4 * h),
                    Label(left - 6, top + h - k / 4 * h + 4, f"{k / 4:.2f}", "axis", "end")) for k in range(5)]
    markers = {p.model: (left + p.cost / x_max * w, top + h - min(1.0, max(0.0, p.value)) * h) for p in points}
    placed: list[_LabelBox] = []
    out = []
    for p in sorted(points, key=lambda p: (-p.value, p.cost)):
        i = models.index(p.model) if p.model in models else 0
        cx, cy = markers[p.model]
        shape = SHAPES[i % len(SHAPES)]
        # a label that would overlap one already drawn moves down a line (labels of close points stay legible)
        lx, ly = cx + 9, cy + 4
        lw = text_width(p.model, 11.5)
        others = [_LabelBox(mx - 8, mx + 8, my + 4) for other, (mx, my) in markers.items() if other != p.model]
        while any(lx < b.x1 and b.x0 < lx + lw and abs(ly - b.baseline) < 13 for b in placed + others):
            ly += 14
        placed.append(_LabelBox(lx, lx + lw, ly))
        leader = Line(cx, cy, lx - 2, ly - 4) if ly != cy + 4 else None
        box, path = _marker(shape, cx, cy)
        out.append(CostPoint(shape, cx, cy, OKABE_ITO[i % len(OKABE_ITO)],
                             f"{p.model}: {y_label} {p.value:.3f}, total cost {format_usd(p.cost)}",
                             Label(lx, ly, p.model, "pointlabel"), leader, box, path))
    return CostChart(width=left + w + right, height=top + h + bottom + 8, y_label=y_label,
                     frame=Box(left, top, w, h, "#fafafa"), x_ticks=x_ticks, y_ticks=y_ticks,
                     x_title=Label(left + w / 2, top + h + 36, "total cost (model + jury, USD)", "axis", "middle"),
                     y_title=Label(16, top + h / 2, y_label, "axis", "middle", rotate=-90), points=out)
