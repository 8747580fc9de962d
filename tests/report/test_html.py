"""--medhelm-html: the self-contained report, as markup and in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from pytest_medhelm.report.html import (jury_entries, render_html, script_json, viridis, write_html)
from report_fixtures import BENCHMARKS, HOSTILE_ANSWER, JUDGES, MODELS, sample_results


@pytest.fixture(scope="module")
def results():
    return sample_results()


@pytest.fixture(scope="module")
def page(results):
    return render_html(results)


def data_blocks(page: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'<script type="application/json" id="medhelm-data-\d+" '
                                               r'class="medhelm-data">(.*?)</script>', page, re.S)]


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


def test_everything_is_escaped(page):
    # the hostile answer is only ever data: no live tag of it anywhere in the page
    assert "<img" not in page and "window.__pwned=2</script>" not in page
    assert page.count("<script") == 1 + len(BENCHMARKS)  # the page's own script + one data block per benchmark
    assert "upstream <overloaded>" not in page  # the error message, escaped in the JSON
    blocks = data_blocks(page)
    answers = [row[3] for block in blocks for row in block["rows"]]
    assert HOSTILE_ANSWER in answers  # round-trips intact through the \u003c escapes
    assert "\\u003cimg" in page


def test_script_json_cannot_close_its_script():
    text = script_json({"a": "</script><!-- \u2028 & é"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & é"}


def test_instance_rows_carry_hash_answer_expected_score_and_jury(page, results):
    blocks = {b["slug"]: b["rows"] for b in data_blocks(page)}
    assert set(blocks) == set(BENCHMARKS)
    mts = blocks["mtsamples"]
    assert len(mts) == 12
    model, iid, sha, answer, expected, score, raw, missed, error, jury, question, reference = mts[0]
    assert model in MODELS and len(sha) == 64 and answer.startswith("Plan") and expected.startswith("Reference")
    assert 0 <= score <= 1 and 1 <= raw <= 5 and error is None
    assert question is None and reference is None  # not asked for: the texts stay out of the report
    labels = {j[0] for j in jury}
    assert {f"{judge} / {c}" for judge in JUDGES[:2] for c in ("accuracy", "completeness", "clarity")} <= labels
    assert any(j[2].endswith("accurate <b>dose</b>") for j in jury)
    assert [JUDGES[2], None, "excluded: malformed JSON"] in jury
    assert ["jury mean (1-5)", raw, ""] in jury and len(jury) == 2 * 3 + 2
    misses = {slug: sum(r[7] for r in rows) for slug, rows in blocks.items()}
    expected_misses = {slug: sum(1 for i in results["instances"] if i["benchmark"] == slug and i.get("missed"))
                       for slug in BENCHMARKS}
    assert misses == expected_misses
    [err] = [r for r in blocks["medqa"] if r[8]]
    assert err[7] == 0 and "HTTP 500" in err[8]


def test_unknown_costs_show_as_unknown(results):
    import copy

    changed = copy.deepcopy(results)
    changed["models"][0]["cost_usd"] = None
    html = render_html(changed)
    table = html.split('id="leaderboard-table"')[1].split("</table>")[0]
    assert table.count("unknown") == 2  # model cost and total
    assert "cost unknown" in html  # and the scatter says which point is missing


def test_jury_entries_accept_the_usual_shapes():
    assert jury_entries({"jury": [{"judge": "a", "score": 4, "explanation": "ok"}]}) == [["a", 4, "ok"]]
    assert jury_entries({"metrics": {"jury": {"a": 3, "b": 5}}}) == [["a", 3, ""], ["b", 5, ""]]
    nested = {"jury": {"gpt": {"accuracy": {"score": 5, "explanation": "fine"}}}}
    assert jury_entries(nested) == [["gpt / accuracy", 5, "fine"]]
    assert jury_entries({"answer": "x"}) == []
    # pytest_medhelm.jury's record, under "metrics" as assert_metric stores a Score's extra
    record = {"raw": 1.0, "per_judge": {}, "failures": {"j": "request failed: HTTP 500"}, "flagged": "no_valid_judge"}
    assert jury_entries({"metrics": {"jury": record}}) == [["j", None, "excluded: request failed: HTTP 500"],
                                                            ["jury mean (1-5)", 1.0, "flagged: no_valid_judge"]]


def test_viridis_runs_dark_to_light():
    assert viridis(0) == "#440154" and viridis(1) == "#fde725" and viridis(2) == "#fde725"

    def luminance(colour: str) -> float:
        r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    values = [luminance(viridis(t / 20)) for t in range(21)]
    assert values == sorted(values)  # monotonic: reads in greyscale too


def test_a_single_model_and_an_empty_run_still_render():
    from pytest_medhelm.report.results import build_results
    from report_fixtures import catalogue, sample_records

    one = [r for r in sample_records() if r["model"] == MODELS[0]]
    html = render_html(build_results(one, catalogue(), models=[MODELS[0]]))
    assert "the vertical axis shows the macro-average" in html and html.count("<svg") == 3
    empty = render_html(build_results([], catalogue(), models=[]))
    assert "no model was scored" in empty and "no instance was recorded" in empty


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
    driver.get("about:blank")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def opened(browser, results, tmp_path_factory):
    path = write_html(results, tmp_path_factory.mktemp("report") / "report.html")
    browser.get_log("performance")  # drain what the browser did at start-up (its own new-tab page)
    browser.get(path.as_uri())
    deadline = time.monotonic() + 20
    while browser.execute_script("return document.documentElement.getAttribute('data-medhelm-ready')") != "1":
        assert time.monotonic() < deadline, "the page's script did not finish"
        time.sleep(0.05)
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
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []  # no script error, no blocked resource


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
    assert driver.execute_script("return window.__pwned === undefined && document.querySelectorAll("
                                 "'#instances-table img, #instances-table script').length === 0")
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
    browser.get(Path(path).as_uri())
    deadline = time.monotonic() + 30
    while browser.execute_script("return document.documentElement.getAttribute('data-medhelm-ready')") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
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
    browser.get(path.as_uri())
    deadline = time.monotonic() + 20
    while browser.execute_script("return document.documentElement.getAttribute('data-medhelm-ready')") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
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
    for text, _ink, _bg, left, top, width, height in cells:  # the screenshot's pixels, not the computed colours
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
    rows = [row for block in data_blocks(shown) for row in block["rows"]]
    assert all(row[10].startswith("Question of ") and row[11] == "A. yes" for row in rows)


def test_chromium_shows_the_question_and_the_reference(browser, results, tmp_path):
    from selenium.webdriver.common.by import By

    path = write_html(with_texts(results), tmp_path / "texts.html")
    browser.get(path.as_uri())
    deadline = time.monotonic() + 20
    while browser.execute_script("return document.documentElement.getAttribute('data-medhelm-ready')") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first = browser.execute_script(
        "return Array.from(document.querySelectorAll('#instances-table tbody tr:first-child td'))"
        ".map(function (td) { return td.textContent; })")
    assert first[2].startswith("Question of ") and first[2].endswith("chest pain?\nA. yes\nB. no")
    assert first[4] == "A. yes"
    box = browser.find_element(By.ID, "search")
    box.send_keys("id003: chest pain")  # the question is searchable: that instance, for each model
    wait_rows(browser, len(MODELS))
