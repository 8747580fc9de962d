"""The HTML report rendered (pytest_medhelm.report.html.render): the page, as markup and in a headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from report_fixtures import BENCHMARKS, HOSTILE_ANSWER, JUDGES, MODELS, sample_results

from pytest_medhelm.report.html import render_html, write_html


@pytest.fixture(scope="module")
def results():
    return sample_results()


@pytest.fixture(scope="module")
def page(results):
    return render_html(results)


def data_blocks(page: str) -> list[dict]:
    """The drill-down's JSON blocks, each as ``{"slug", "instances"}`` with the model in every instance (the page
    groups them by model)."""
    blocks = [json.loads(m) for m in re.findall(r'<script type="application/json" id="medhelm-data-\d+" '
                                                r'class="medhelm-data">(.*?)</script>', page, re.S)]
    return [{"slug": block["slug"], "instances": [dict(inst, model=group["model"]) for group in block["models"]
                                                  for inst in group["instances"]]}
            for block in blocks]


def csp_of(page: str) -> dict[str, list[str]]:
    """The page's Content-Security-Policy, directive → sources."""
    [policy] = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    return {name: sources for name, *sources in (d.split() for d in policy.split(";") if d.strip())}


def inline(page: str, tag: str) -> list[str]:
    """The text of the page's inline ``<script>`` (without a type) or ``<style>`` elements."""
    return re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def test_all_sections_are_present(page, results):
    for section in ("leaderboard", "heatmap", "categories", "cost", "instances"):
        assert f'<section id="{section}">' in page
    for chart in ("heatmap-chart", "category-chart", "cost-chart"):
        assert f'<svg class="chart" id="{chart}"' in page
    assert page.count("<svg") == 3
    assert 'id="search"' in page and 'id="misses-only"' in page and 'id="bench-select"' in page
    # leaderboard: Table 1's columns plus tokens and cost
    for column in ("Win rate", "Win SD", "Macro avg", "SD", "Model cost", "Jury cost", "Total cost"):
        assert f"<th scope=\"col\">{column}</th>" in page
    for model in MODELS:
        assert model in page
    # every heatmap cell prints its number
    for row in results["benchmarks"]:
        assert f">{row['mean']:.3f}</text>" in page
    # category bars carry their value as text, and each model its own fill pattern
    assert 'fill="url(#cat-pat-0)"' in page and 'fill="url(#cat-pat-1)"' in page
    assert "Clinical Decision Support" in page and "Medical Research Assistance" in page
    assert "@media print" in page


def test_the_page_loads_nothing_from_anywhere(page):
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # no src/href pointing outside the page (the SVG namespace URI is a name, never fetched)
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?(?:https?:|//)""", page, re.I)
    assert "@import" not in page and "url(http" not in page
    markup = re.sub(r'<script type="application/json".*?</script>', "", page, flags=re.S)
    assert re.findall(r"https?://[^\s\"'<]+", markup) == ["http://www.w3.org/2000/svg"] * 3


def test_the_policy_allows_the_pages_own_script_and_style_by_hash_only(page):
    policy = csp_of(page)
    assert policy["default-src"] == ["'none'"]
    assert "'unsafe-inline'" not in page and "'unsafe-eval'" not in page  # in no directive
    [script], [style] = inline(page, "script"), inline(page, "style")
    assert policy["script-src"] == [sha256_source(script)]  # exactly the one script of the page, byte for byte
    assert policy["style-src"] == [sha256_source(style)]
    assert "data-medhelm-ready" in script and "@media print" in style
    # no inline event handler or style attribute, which a hash cannot allow
    assert not re.search(r"<[^>]*\s(?:on[a-z]+|style)\s*=", page, re.I)


def test_everything_is_escaped(page):
    # the hostile answer is only ever data: no live tag of it anywhere in the page
    assert "<img" not in page and "window.__pwned=2</script>" not in page
    assert page.count("<script") == 1 + len(BENCHMARKS)  # the page's own script + one data block per benchmark
    assert "upstream <overloaded>" not in page  # the error message, escaped in the JSON
    blocks = data_blocks(page)
    answers = [inst["answer"] for block in blocks for inst in block["instances"]]
    assert HOSTILE_ANSWER in answers  # round-trips intact through the \u003c escapes
    assert "\\u003cimg" in page


def test_instance_rows_carry_hash_answer_expected_score_and_jury(page, results):
    blocks = {b["slug"]: b["instances"] for b in data_blocks(page)}
    assert set(blocks) == set(BENCHMARKS)
    mts = blocks["mtsamples"]
    assert len(mts) == 12
    first = mts[0]
    assert set(first) == {"model", "instance_id", "prompt_sha256", "answer", "expected", "score", "raw_score",
                          "missed", "judges"}  # no error, and no question or reference: not asked for
    assert first["model"] in MODELS and len(first["prompt_sha256"]) == 64
    assert first["answer"].startswith("Plan") and first["expected"].startswith("Reference")
    raw = first["raw_score"]
    assert 0 <= first["score"] <= 1 and 1 <= raw <= 5 and first.get("error") is None
    jury = first["judges"]
    labels = {j["label"] for j in jury}
    assert {f"{judge} / {c}" for judge in JUDGES[:2] for c in ("accuracy", "completeness", "clarity")} <= labels
    assert any(j["explanation"].endswith("accurate <b>dose</b>") for j in jury)
    assert {"label": JUDGES[2], "score": None, "explanation": "excluded: malformed JSON"} in jury
    assert {"label": "jury mean (1-5)", "score": raw, "explanation": ""} in jury and len(jury) == 2 * 3 + 2
    misses = {slug: sum(inst["missed"] for inst in instances) for slug, instances in blocks.items()}
    expected_misses = {slug: sum(1 for i in results["instances"] if i["benchmark"] == slug and i.get("missed"))
                       for slug in BENCHMARKS}
    assert misses == expected_misses
    [err] = [inst for inst in blocks["medqa"] if inst.get("error")]
    assert err["missed"] is False and "HTTP 500" in err["error"]


def test_unknown_costs_show_as_unknown(results):
    import copy

    changed = copy.deepcopy(results)
    changed["models"][0]["cost_usd"] = None
    html = render_html(changed)
    table = html.split('id="leaderboard-table"')[1].split("</table>")[0]
    assert table.count("unknown") == 2  # model cost and total
    assert "cost unknown" in html  # and the scatter says which point is missing


def test_a_single_model_and_an_empty_run_still_render():
    from report_fixtures import catalogue, sample_records

    from pytest_medhelm.report.results import build_results

    one = [r for r in sample_records() if r["model"] == MODELS[0]]
    html = render_html(build_results(one, catalogue(), models=[MODELS[0]]))
    assert "the vertical axis shows the macro-average" in html and html.count("<svg") == 3
    empty = render_html(build_results([], catalogue(), models=[]))
    assert "no model was scored" in empty and "no instance was recorded" in empty


def test_the_report_names_the_models_as_the_results_do(results):
    """Models the run's list does not name (a hand-made or merged file) come after it as Results.model_names gives
    them: sorted, those only the instances name included."""
    import copy

    from pytest_medhelm.report.html import build_view
    from pytest_medhelm.report.records import Results

    changed = copy.deepcopy(results)
    changed["run"]["models"] = []
    changed["instances"].append(dict(changed["instances"][0], model="anthropic/instances-only"))
    expected = ["anthropic/instances-only", "hosted_vllm/llama-3.3-70b", "openai/gpt-4o"]
    assert Results.read(changed).model_names() == expected
    view = build_view(changed)
    assert view.heatmap is not None and [label.text for label in view.heatmap.column_labels] == expected


def test_long_texts_are_cut_and_big_runs_stay_compact(results):
    import copy

    big = copy.deepcopy(results)
    template = big["instances"][0]
    big["instances"] = [dict(template, instance_id=f"x{i}", answer="word " * 2000 if i == 0 else f"A{i}")
                        for i in range(100_000)]
    started = time.perf_counter()
    html = render_html(big)
    elapsed = time.perf_counter() - started
    assert "the results JSON has the whole text" in html
    assert len(html) < 20_000_000  # about 140 bytes an instance with a 64-hex prompt hash
    assert elapsed < 30  # generous: a sanity bound, not a benchmark


def test_write_html_is_atomic(tmp_path, results):
    path = tmp_path / "out" / "report.html"
    write_html(results, path)
    first = path.read_text(encoding="utf-8")
    assert first.startswith("<!DOCTYPE html>")
    write_html(results, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.html"]


# ------------------------------------------------------------------------------------------ real Chromium
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


COLLECT_VIOLATIONS = """
window.__medhelmViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__medhelmViolations.push(e.effectiveDirective + " " + (e.blockedURI || "") + " " + (e.sample || ""));
});
"""


def csp_violations(driver) -> list[str]:
    """The Content-Security-Policy violations the open page reported (the collector must be there)."""
    seen = driver.execute_script("return window.__medhelmViolations === undefined ? null : window.__medhelmViolations")
    assert seen is not None, "the violation collector is not installed: nothing would be seen"
    return seen


def open_page(driver, path: Path, timeout: float = 20) -> None:
    """Open a report and wait for its script to finish; the page must run without a policy violation."""
    driver.get(Path(path).as_uri())
    deadline = time.monotonic() + timeout
    while driver.execute_script("return document.documentElement.getAttribute('data-medhelm-ready')") != "1":
        assert time.monotonic() < deadline, f"the page's script did not finish ({csp_violations(driver)})"
        time.sleep(0.05)
    assert csp_violations(driver) == []


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [test] extra)")
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("chromium / chromedriver are not installed (Debian packages chromium, chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--window-size=1280,2000", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    # every page records the policy's violations from its first byte (the browser's own script: no policy applies)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COLLECT_VIOLATIONS})
    driver.get("about:blank")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def opened(browser, results, tmp_path_factory):
    path = write_html(results, tmp_path_factory.mktemp("report") / "report.html")
    browser.get_log("performance")  # drain what the browser did at start-up (its own new-tab page)
    open_page(browser, path)
    return browser


def visible_rows(driver) -> int:
    return driver.execute_script("return document.querySelectorAll('#instances-table tbody tr').length")


def wait_rows(driver, expected: int) -> None:
    deadline = time.monotonic() + 10
    while visible_rows(driver) != expected:
        assert time.monotonic() < deadline, f"{visible_rows(driver)} rows shown, expected {expected}"
        time.sleep(0.05)


def test_chromium_renders_the_report_with_its_charts(opened, results):
    driver = opened
    assert driver.title == "MedHELM results"
    charts = driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.chart')).map(function (s) {"
        "  var b = s.getBoundingClientRect(); return [s.id, b.width, b.height, s.querySelectorAll('rect').length]; })")
    assert [c[0] for c in charts] == ["heatmap-chart", "category-chart", "cost-chart"]
    assert all(w > 100 and h > 100 and rects > 0 for _id, w, h, rects in charts)
    cells = driver.execute_script("return document.querySelectorAll('#heatmap-chart g.cell').length")
    assert cells == len(results["benchmarks"])
    points = driver.execute_script("return document.querySelectorAll('#cost-chart g.point').length")
    assert points == len(MODELS)
    leaderboard = driver.execute_script("return document.querySelectorAll('#leaderboard-table tbody tr').length")
    assert leaderboard == len(MODELS)
    severe = [e for e in driver.get_log("browser")
              if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    assert severe == []  # no script error, no blocked resource, no policy violation
    assert csp_violations(driver) == []
    # the policy the browser enforces: the page's own script and style by hash, never any inline one
    policy = driver.execute_script(
        "return document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]').content")
    directives = {name: sources for name, *sources in (d.split() for d in policy.split(";") if d.strip())}
    assert [s.startswith("'sha256-") for s in directives["script-src"]] == [True]
    assert [s.startswith("'sha256-") for s in directives["style-src"]] == [True]
    assert "'unsafe-inline'" not in policy


def test_chromium_search_and_misses_filter(opened, results):
    driver = opened
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def count(slug, pred=lambda i: True):
        return sum(1 for i in results["instances"] if i["benchmark"] == slug and pred(i))

    select = Select(driver.find_element(By.ID, "bench-select"))
    first = select.first_selected_option.text.split(" ")[0]
    wait_rows(driver, count(first))

    select.select_by_visible_text(next(o.text for o in select.options if o.text.startswith("pubmedqa ")))
    wait_rows(driver, count("pubmedqa"))
    box = driver.find_element(By.ID, "search")
    box.send_keys("window.__pwned")
    wait_rows(driver, 1)
    # the hostile answer shows as text, and did nothing
    cell = driver.execute_script(
        "return document.querySelector('#instances-table tbody tr td:nth-child(4)').textContent")
    assert cell == HOSTILE_ANSWER
    assert driver.execute_script(
        "return window.__pwned === undefined && "
        "document.querySelectorAll('#instances-table img, #instances-table script').length === 0")
    box.clear()
    box.send_keys("zzz-nothing-matches")
    wait_rows(driver, 0)
    driver.execute_script("var b = document.getElementById('search'); b.value = ''; "
                          "b.dispatchEvent(new Event('input'));")
    wait_rows(driver, count("pubmedqa"))

    driver.find_element(By.ID, "misses-only").click()
    wait_rows(driver, count("pubmedqa", lambda i: i.get("missed")))
    classes = driver.execute_script(
        "return Array.from(document.querySelectorAll('#instances-table tbody tr')).map(function (r) {"
        " return r.className; })")
    assert set(classes) == {"miss"}

    select.select_by_visible_text(next(o.text for o in select.options if o.text.startswith("mtsamples ")))
    wait_rows(driver, count("mtsamples", lambda i: i.get("missed")))
    verdicts = driver.execute_script("return document.querySelectorAll('#instances-table details li').length")
    assert verdicts == count("mtsamples", lambda i: i.get("missed")) * (2 * 3 + 2)  # 2 judges × 3 criteria, 1
    # excluded judge, the mean
    driver.find_element(By.ID, "misses-only").click()
    wait_rows(driver, count("mtsamples"))
    counter = driver.find_element(By.ID, "row-count").text
    assert counter.startswith(f"showing {count('mtsamples')} of {count('mtsamples')}")


def test_chromium_made_no_request_off_the_machine(opened):
    driver = opened
    everything, ours = [], []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            params = message["params"]
            url = params.get("request", {}).get("url") or params.get("url", "")
            everything.append(url)
            if params.get("documentURL", "").startswith("file:"):
                ours.append(url)
    # nothing at all over the network, from the page or from the browser (chrome:// is the browser's own)
    assert not [u for u in everything if u.split(":", 1)[0].lower() in ("http", "https", "ws", "wss", "ftp")]
    # and the page itself asked for itself only
    assert ours and all(u.startswith(("file:", "data:", "about:")) for u in ours), ours
    resources = driver.execute_script("return performance.getEntries().map(function (e) { return e.name; })"
                                      ".filter(function (n) { return n.indexOf(':') > 0; })")
    assert resources and all(u.startswith("file:") for u in resources), resources


def test_chromium_print_view_hides_the_controls(opened):
    driver = opened
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        shown = driver.execute_script(
            "return [getComputedStyle(document.querySelector('.controls')).display,"
            " getComputedStyle(document.getElementById('heatmap-chart')).display]")
        assert shown == ["none", "block"]
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def test_chromium_opens_a_large_report(browser, results, tmp_path):
    """20,000 instances in one benchmark: one page of rows is built, the rest on demand."""
    import copy

    big = copy.deepcopy(results)
    template = next(i for i in big["instances"] if i["benchmark"] == "medqa")
    big["instances"] = [dict(template, instance_id=f"x{i:05d}", answer=f"answer {i}", missed=i % 4 == 0)
                        for i in range(20_000)]
    path = write_html(big, tmp_path / "big.html")
    open_page(browser, path, timeout=30)
    wait_rows(browser, 500)
    browser.find_element("id", "show-more").click()
    wait_rows(browser, 1000)
    browser.find_element("id", "misses-only").click()
    wait_rows(browser, 500)
    assert browser.find_element("id", "row-count").text.startswith("showing 500 of 5000 matching")


def spread_results(results: dict) -> dict:
    """The sample run with 21 benchmark rows whose scores span 0 to 1 (both models: i/20 and 1 - i/20)."""
    import copy

    spread = copy.deepcopy(results)
    template = spread["benchmarks"][0]
    spread["benchmarks"] = [dict(template, slug=f"s{i:02d}", model=model, mean=mean, ci_low=mean, ci_high=mean)
                            for i in range(21)
                            for model, mean in ((MODELS[0], i / 20), (MODELS[1], (20 - i) / 20))]
    return spread


def _rgb(css: str) -> str:
    """``rgb(r, g, b)`` (a computed style) → ``#rrggbb``."""
    r, g, b = (int(float(v)) for v in re.findall(r"[\d.]+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def test_chromium_heatmap_numbers_are_readable_on_every_cell(browser, results, tmp_path):
    """Every printed score has a WCAG contrast of at least 4.5:1 against its cell, as the browser computes the
    colours after the style sheet and as it paints them (a screenshot of the heatmap, pixel by pixel)."""
    import io

    from PIL import Image
    from selenium.webdriver.common.by import By

    from pytest_medhelm.report.html import contrast_ratio

    path = write_html(spread_results(results), tmp_path / "spread.html")
    open_page(browser, path)
    cells = browser.execute_script("""
        var svg = document.getElementById('heatmap-chart').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#heatmap-chart g.cell:not(.empty)')).map(function (g) {
          var t = g.querySelector('text'), r = g.querySelector('rect'), b = t.getBoundingClientRect();
          return [t.textContent, getComputedStyle(t).fill, getComputedStyle(r).fill,
                  b.left - svg.left, b.top - svg.top, b.width, b.height]; });""")
    assert len(cells) == 42
    computed = {text: contrast_ratio(_rgb(ink), _rgb(bg)) for text, ink, bg, *_box in cells}
    assert min(computed.values()) >= 4.5, sorted(computed.items(), key=lambda kv: kv[1])[:5]

    heatmap = browser.find_element(By.ID, "heatmap-chart")
    png = heatmap.screenshot_as_png
    (tmp_path / "heatmap.png").write_bytes(png)  # kept with the test's files for a person to look at
    image = Image.open(io.BytesIO(png)).convert("RGB")
    scale = image.width / heatmap.rect["width"]
    painted = {}
    for text, _ink, _bg, left, top, width, height in cells:
        box = image.crop((round(left * scale), round(top * scale), round((left + width) * scale),
                          round((top + height) * scale)))
        raw = box.tobytes()
        colours = [f"#{raw[i]:02x}{raw[i + 1]:02x}{raw[i + 2]:02x}" for i in range(0, len(raw), 3)]
        background = max(set(colours), key=colours.count)  # the cell's fill around the glyphs
        painted[text] = max(contrast_ratio(c, background) for c in colours)  # the glyphs' strongest ink
    assert min(painted.values()) >= 4.5, sorted(painted.items(), key=lambda kv: kv[1])[:5]


def with_texts(results: dict) -> dict:
    """The sample run as --medhelm-report-text records it: each instance with its question and reference."""
    import copy

    texts = copy.deepcopy(results)
    for inst in texts["instances"]:
        inst["question"] = f"Question of {inst['benchmark']} {inst['instance_id']}: chest pain?\nA. yes\nB. no"
        inst["reference"] = "A. yes"
    return texts


def test_questions_and_references_only_when_asked_for(results):
    plain = render_html(results)
    assert "Questions and references are not in this report" in plain
    assert "--medhelm-report-text (ini: medhelm_report_text = true)" in plain  # says how
    assert "chest pain?" not in plain
    shown = render_html(with_texts(results))
    assert "This report holds each instance's question and reference" in shown
    instances = [inst for block in data_blocks(shown) for inst in block["instances"]]
    assert all(inst["question"].startswith("Question of ") and inst["reference"] == "A. yes" for inst in instances)


def test_chromium_shows_the_question_and_the_reference(browser, results, tmp_path):
    from selenium.webdriver.common.by import By

    path = write_html(with_texts(results), tmp_path / "texts.html")
    open_page(browser, path)
    first = browser.execute_script(
        "return Array.from(document.querySelectorAll('#instances-table tbody tr:first-child td'))"
        ".map(function (td) { return td.textContent; })")
    assert first[2].startswith("Question of ") and first[2].endswith("chest pain?\nA. yes\nB. no")
    assert first[4] == "A. yes"
    box = browser.find_element(By.ID, "search")
    box.send_keys("id003: chest pain")  # the question is searchable: that instance, for each model
    wait_rows(browser, len(MODELS))


def test_chromium_refuses_any_script_or_style_the_policy_does_not_name(browser, results, tmp_path):
    """The policy is live: the page's own script changed by one statement does not run, and markup that an
    escaping bug would let into the page (an inline script, a style attribute) stays inert, each a violation the
    browser reports."""
    page = render_html(results)
    [script] = inline(page, "script")
    tampered = page.replace(script, script.replace('"use strict";', '"use strict"; window.__tampered = 1;', 1))
    tampered = tampered.replace("<h1>", '<script>window.__pwned = 3</script>'
                                        '<p id="styled" style="display: none">planted</p><h1>', 1)
    path = tmp_path / "tampered.html"
    path.write_text(tampered, encoding="utf-8")
    browser.get_log("browser")  # drain
    browser.get(path.as_uri())
    deadline = time.monotonic() + 20
    while len(csp_violations(browser)) < 3:
        assert time.monotonic() < deadline, csp_violations(browser)
        time.sleep(0.05)
    assert browser.execute_script(
        "return [document.documentElement.getAttribute('data-medhelm-ready'), window.__tampered, window.__pwned,"
        " getComputedStyle(document.getElementById('styled')).display]") == [None, None, None, "block"]
    kinds = sorted(v.split(" ")[0] for v in csp_violations(browser))
    assert kinds == ["script-src-elem", "script-src-elem", "style-src-attr"], kinds
    assert any("Content Security Policy" in e["message"] for e in browser.get_log("browser"))


#: untrusted text for every field of the run a report shows: model names, benchmark slugs, categories, judges,
#: gate specs, run facts; each tries to become markup in an element, an attribute, an SVG text or a script
HOSTILE_MODEL = 'openai/<img src=x onerror="window.__pwned=5">'
HOSTILE_SLUG = 'medqa"><script>window.__pwned=6</script>'
HOSTILE_CATEGORY = "Clinical </text></svg><svg onload=window.__pwned=7>"
HOSTILE_JUDGE = "anthropic/</script><script>window.__pwned=8</script>"
HOSTILE_RUN = "<style>body{display:none}</style>"


def hostile_results(results: dict) -> dict:
    """The sample run with a hostile string in place of a model, a benchmark, a category, a judge and run facts."""
    swap = {MODELS[0]: HOSTILE_MODEL, "medqa": HOSTILE_SLUG, "Clinical Decision Support": HOSTILE_CATEGORY,
            JUDGES[1]: HOSTILE_JUDGE}

    def planted(node):
        if isinstance(node, dict):
            return {swap.get(k, k): planted(v) for k, v in node.items()}
        if isinstance(node, list):
            return [planted(v) for v in node]
        return swap.get(node, node) if isinstance(node, str) else node

    hostile = planted(results)
    hostile["run"].update(git_commit=HOSTILE_RUN, jury_prompts=HOSTILE_RUN)
    hostile["gates"] = [{"spec": f"{HOSTILE_SLUG}>=0.9", "model": HOSTILE_MODEL, "value": 0.5, "passed": False}]
    return hostile


def test_untrusted_names_in_every_section_stay_text(results):
    page = render_html(hostile_results(results), title=HOSTILE_RUN)
    for planted in ("<img", "<svg onload", "<script>window", "<style>body", "</script><script>"):
        assert planted not in page, planted
    assert page.count("<script") == 1 + len(BENCHMARKS) and page.count("<style>") == 1 and page.count("<svg") == 3
    # each name is shown, escaped, in the markup (the heatmap's and the leaderboard's model, the category...)
    from markupsafe import escape

    for name in (HOSTILE_MODEL, HOSTILE_SLUG, HOSTILE_CATEGORY, HOSTILE_RUN):
        assert str(escape(name)) in page, name
    assert {b["slug"] for b in data_blocks(page)} == {HOSTILE_SLUG, "mtsamples", "pubmedqa"}


def test_chromium_shows_untrusted_names_as_text(browser, results, tmp_path):
    path = write_html(hostile_results(results), tmp_path / "hostile.html", title=HOSTILE_RUN)
    open_page(browser, path)  # (and no policy violation: nothing even tried to run)
    shown = browser.execute_script("""
        return {pwned: window.__pwned === undefined ? null : window.__pwned,
                planted: document.querySelectorAll('img, svg svg, style ~ style, body style').length,
                scripts: document.querySelectorAll('script:not([type])').length,
                title: document.title, h1: document.querySelector('h1').textContent,
                columns: Array.from(document.querySelectorAll('#heatmap-chart text.collabel'))
                              .map(function (t) { return t.textContent; }),
                categories: Array.from(document.querySelectorAll('#heatmap-chart text.cat'))
                                 .map(function (t) { return t.textContent; }),
                leaderboard: Array.from(document.querySelectorAll('#leaderboard-table td.name'))
                                  .map(function (t) { return t.textContent; }),
                options: Array.from(document.querySelectorAll('#bench-select option'))
                              .map(function (o) { return o.textContent; }),
                visible: getComputedStyle(document.body).display};""")
    assert shown["pwned"] is None and shown["planted"] == 0 and shown["scripts"] == 1
    assert shown["title"] == shown["h1"] == HOSTILE_RUN and shown["visible"] == "block"
    assert HOSTILE_MODEL in shown["columns"] and HOSTILE_MODEL in shown["leaderboard"]
    assert HOSTILE_CATEGORY in shown["categories"]
    assert any(o.startswith(HOSTILE_SLUG + " (") for o in shown["options"])
    # the drill-down of the hostile benchmark: the model's name in its cells, the judge's in the verdicts
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    select = Select(browser.find_element(By.ID, "bench-select"))
    select.select_by_visible_text(next(o.text for o in select.options if o.text.startswith("mtsamples ")))
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#instances-table tbody td:first-child, "
        "#instances-table tbody li b')).map(function (c) { return c.textContent; })")
    assert HOSTILE_MODEL in cells and any(c.startswith(HOSTILE_JUDGE + " / ") for c in cells)
    assert browser.execute_script("return window.__pwned === undefined && "
                                  "document.querySelectorAll('#instances-table img, #instances-table script')"
                                  ".length === 0")
    assert csp_violations(browser) == []


def test_chromium_shows_the_reasoning_note_and_columns(browser, tmp_path):
    """A run with a reasoning model: the note and its ran-out line are shown, and the leaderboard's reasoning
    columns line up with their headers in every row (the plain model's too)."""
    from report_fixtures import THINKER, reasoning_results

    path = write_html(reasoning_results(), tmp_path / "reasoning.html")
    open_page(browser, path)
    shown = browser.execute_script("""
        var note = document.getElementById('reasoning');
        var table = document.getElementById('leaderboard-table');
        var heads = Array.from(table.querySelectorAll('thead th')).map(function (th) { return th.textContent; });
        var rows = Array.from(table.querySelectorAll('tbody tr')).map(function (tr) {
            var cells = Array.from(tr.children).map(function (td) { return td.textContent; });
            var row = {};
            heads.forEach(function (h, i) { row[h] = cells[i]; });
            row.__cells = cells.length;
            return row; });
        return {note: note.innerText, visible: note.getBoundingClientRect().height > 0, heads: heads, rows: rows};""")
    assert shown["visible"] and "Reasoning tokens are priced as output tokens." in shown["note"]
    assert f"{THINKER}: 2 of 18 answers used the whole token limit before answering" in shown["note"]
    rows = {row["Model"]: row for row in shown["rows"]}
    assert all(row["__cells"] == len(shown["heads"]) for row in shown["rows"])
    assert (rows[THINKER]["Tokens out"], rows[THINKER]["Reasoning tokens"], rows[THINKER]["Ran out"]) == (
        "2,397", "722", "2/18")
    assert (rows[MODELS[1]]["Reasoning tokens"], rows[MODELS[1]]["Ran out"]) == ("–", "0")
    assert csp_violations(browser) == []


def test_the_html_has_the_note_the_ran_out_lines_and_the_columns():
    from report_fixtures import THINKER, reasoning_results

    page = render_html(reasoning_results())
    [note] = re.findall(r'<p class="note" id="reasoning">(.*?)</p>', page, re.S)
    assert "Reasoning tokens are priced as output tokens." in note
    assert f"<strong>{THINKER}: 2 of 18 answers used the whole token limit before answering" in note
    table = page.split('id="leaderboard-table"')[1].split("</table>")[0]
    heads = re.findall(r'<th scope="col">(.*?)</th>', table)
    assert heads[7:10] == ["Tokens out", "Reasoning tokens", "Ran out"]
    for row in re.findall(r"<tr>(<td>.*?)</tr>", table):
        assert len(re.findall(r"<td[ >]", row)) == len(heads)
    assert "<td>2,397</td><td>722</td><td>2/18</td>" in table


def test_a_hostile_model_name_in_the_reasoning_note_is_text():
    from report_fixtures import reasoning_results

    hostile = 'openai/o3-<img src=x onerror="window.__pwned=1">'
    page = render_html(reasoning_results(model=hostile))
    note = re.findall(r'<p class="note" id="reasoning">(.*?)</p>', page, re.S)[0]
    assert "<img" not in note and "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in note


def test_a_plain_runs_html_has_no_reasoning():
    page = render_html(sample_results())
    assert 'id="reasoning"' not in page and "Reasoning tokens" not in page
