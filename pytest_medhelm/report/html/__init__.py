"""``--medhelm-html PATH``: the run's results as one self-contained HTML file.

Everything is inline (the style sheet, a little JavaScript, SVG charts); the page loads nothing from anywhere, and
its Content-Security-Policy forbids it to (``default-src 'none'``, the one style sheet and the one script allowed by
their sha256 hashes), so it opens offline and leaks nothing.

Sections, after the paper's figures:

* the leaderboard: Table 1's columns (win rate, Win SD, macro-average, SD) plus tokens and cost, the model's and
  the jury's apart and their total (Table 3);
* a heatmap of normalized scores, benchmarks × models (Figure 3), in the viridis palette (colour-blind safe,
  monotonic in lightness so it reads in greyscale) with the number printed in every cell;
* category scores per model (Figure 4) as labelled bars, each model with its own colour (Okabe-Ito) *and* fill
  pattern, the value printed beside every bar;
* cost versus win rate (Figure 5), labelled points;
* a per-benchmark drill-down of instances (the question, or the prompt's hash when the question is not included
  (see :mod:`pytest_medhelm.report.texts`), answer, expected, score, judge explanations) with a search box and a
  "misses only" filter. Instances are embedded as JSON objects, one ``<script type="application/json">`` block per
  benchmark, parsed and turned into table rows only when that benchmark is shown, a page of rows at a time: a run
  of 100,000 instances stays usable. Long texts are cut at ``max_text`` characters (the JSON results file keeps
  them whole).

The modules: views.py reads the results into typed records (``results_mapping`` is the input boundary),
charts.py computes the charts' geometry, render.py renders the templates (templates/) with the style sheet and the
script (static/). Every string from the run is escaped by the templates' autoescaping; inside the JSON blocks
``<``, ``>`` and ``&`` are ``\\u003c``-style escapes; the script only ever sets ``textContent``.
"""

from __future__ import annotations

from pytest_medhelm.report.html.colours import contrast_ratio, viridis
from pytest_medhelm.report.html.render import PAGE_ROWS, build_view, content_security_policy, render_html, write_html
from pytest_medhelm.report.html.verdicts import MAX_TEXT, JudgeVerdict, jury_entries
from pytest_medhelm.report.html.views import InstanceView, script_json

__all__ = ["MAX_TEXT", "PAGE_ROWS", "InstanceView", "JudgeVerdict", "build_view", "content_security_policy",
           "contrast_ratio", "jury_entries", "render_html", "script_json", "viridis", "write_html"]
