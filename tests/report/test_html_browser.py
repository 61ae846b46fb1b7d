"""The HTML report in a real browser: Debian's headless Chromium driven by its ChromeDriver
(selenium), the network cut off (a dead proxy), checking what a person sees: charts drawn with the
right number of points, the status filter hiding passing rows, the search finding a prompt, the
diff listing the flipped prompt first, hostile text inert. Screenshots go to
build/report-screenshots/ (or $EVALKIT_SCREENSHOTS) for a person to look at; they are not compared.

Chromium comes from `apt-get install chromium chromium-driver` (.ci/run installs both). Without
it these tests are skipped on a workstation and fail in CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.report.htmlproject import HOSTILE_ID, make_project

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("EVALKIT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("EVALKIT_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = Path(
    os.environ.get("EVALKIT_SCREENSHOTS", Path(__file__).resolve().parents[2] / "build" / "report-screenshots")
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        message = (
            f"headless Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): apt-get install chromium chromium-driver"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2200",
        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # every request would fail: no network
        "--allow-file-access-from-files",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=os.devnull), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(isolated: Path, cli: Any, browser: Any) -> Any:
    make_project(isolated, cli)
    result = cli("report", "--html", "report.html")
    assert result.exit_code == 0, result.stderr
    browser.get((isolated / "report.html").as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "yes"  # the page's script ran
    return browser


def shot(driver: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def in_page(driver: Any, script: str, *args: Any) -> list[Any]:
    """What ``script`` (the body of a function, arguments[0]... its arguments) returns in the page."""
    return list(driver.execute_script(script, *args))


DRAWN = (  # per dataset of the chart on canvas arguments[0], the points Chart.js drew (not skipped)
    "const chart = Chart.getChart(document.getElementById(arguments[0]));"
    "return chart.data.datasets.map((d, i) => chart.getDatasetMeta(i).data.filter(p => !p.skip).length);"
)
SHOWN = (  # the prompt ids of the rows of table arguments[0] a person can see
    "return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))"
    ".filter(r => r.offsetParent !== null).map(r => r.cells[0].querySelector('strong').textContent);"
)


def drawn_points(driver: Any, canvas_id: str) -> list[int]:
    return in_page(driver, DRAWN, canvas_id)


def visible_rows(driver: Any, table_id: str) -> list[str]:
    return in_page(driver, SHOWN, table_id)


def test_the_charts_are_drawn_with_a_point_per_run(page: Any) -> None:
    shot(page, "01-report")
    # five runs of the prompt set: four on 'good' (pass rate and mean score lines), one on 'bad'
    assert drawn_points(page, "trend-set-0") == [4, 4, 1, 1]
    assert drawn_points(page, "trend-set-1") == [1, 1]  # the retrieval run: top-1 and top-3
    assert drawn_points(page, "form-set-1") == [2, 2]  # bars: two question forms, top-1 and top-3
    assert drawn_points(page, "hard-set-1") == [2, 2]
    styles = page.execute_script(
        "return Chart.getChart(document.getElementById('trend-set-0')).data.datasets[0].pointStyle;"
    )
    assert styles[0] == "star"  # the accepted baseline
    assert styles[-1] == "crossRot"  # the regression
    resources = page.execute_script("return performance.getEntriesByType('resource').length")
    assert resources == 0  # nothing was fetched: it rendered with the network cut off


def test_the_status_filter_hides_passing_rows(page: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    assert len(visible_rows(page, "items-set-0")) == 5
    Select(page.find_element(By.CSS_SELECTOR, '.status-filter[data-table="items-set-0"]')).select_by_value("fail")
    assert visible_rows(page, "items-set-0") == ["p-flip", "p-template"]
    assert page.find_element(By.CSS_SELECTOR, '.shown[data-table="items-set-0"]').text == "2 of 5 shown"
    shot(page, "02-failed-only")
    Select(page.find_element(By.CSS_SELECTOR, '.status-filter[data-table="items-set-0"]')).select_by_value("all")
    assert len(visible_rows(page, "items-set-0")) == 5


def test_the_search_finds_a_prompt(page: Any) -> None:
    from selenium.webdriver.common.by import By

    search = page.find_element(By.CSS_SELECTOR, '.search[data-table="items-set-0"]')
    search.send_keys("template")
    assert visible_rows(page, "items-set-0") == ["p-template"]
    shot(page, "03-search")
    search.clear()
    search.send_keys("onerror")  # an answer's text is searched too
    assert visible_rows(page, "items-set-0") == [HOSTILE_ID]


def test_the_diff_lists_the_flipped_prompt_first(page: Any) -> None:
    rows = page.execute_script(
        "return Array.from(document.querySelectorAll('#diff-set-0 tbody tr')).map(r => [r.className, r.dataset.id]);"
    )
    assert rows[0] == ["flipped", "p-flip"]
    assert rows[1:] == []  # the other four did not change: counted, not listed
    shot(page, "04-diff")


def test_hostile_text_runs_nothing_and_breaks_nothing(page: Any) -> None:
    assert page.title == "evalkit report"  # no injected script set it
    assert page.execute_script("return document.images.length") == 0
    assert page.execute_script("return document.scripts.length") == 3
    cells = page.execute_script(
        "return Array.from(document.querySelectorAll('#items-set-0 tbody tr')).map(r => r.cells.length);"
    )
    assert cells == [6] * 5  # an id with </td> did not split its row
    texts = page.execute_script("return document.querySelector('#items-set-0').textContent")
    assert "</script><img src=x onerror=" in texts
    assert "{{7*7}} beta" in texts
    assert "⟨U+202E⟩" in texts


def test_screenshots_are_kept_for_a_person(page: Any) -> None:
    shot(page, "05-whole")
    assert (SHOTS / "05-whole.png").stat().st_size > 10_000


def test_rows_past_the_first_hundred_are_there_when_asked_for(isolated: Path, cli: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    from tests.report.htmlproject import write_answers

    count = 150
    write_answers(isolated, "many.jsonl", [{"id": f"q{i:03d}", "response": "yes" if i % 3 else "no", "model": "m"}
                                           for i in range(count)])  # fmt: skip
    (isolated / "evalkit.yaml").write_text("providers:\n  - {id: rec, adapter: replay, path: many.jsonl}\n")
    prompts = "".join(f"  - {{id: q{i:03d}, prompt: hi, assertions: [{{contains: 'yes'}}]}}\n" for i in range(count))
    (isolated / "many.yaml").write_text(f"id: many\nname: Many\nprompts:\n{prompts}", encoding="utf-8")
    assert cli("run", "many.yaml").exit_code == 0
    assert cli("report", "--html", "many.html").exit_code == 0
    browser.get((isolated / "many.html").as_uri())
    assert len(visible_rows(browser, "items-set-0")) == 100
    assert browser.find_element(By.CSS_SELECTOR, '.shown[data-table="items-set-0"]').text == "100 of 150 shown"
    search = browser.find_element(By.CSS_SELECTOR, '.search[data-table="items-set-0"]')
    search.send_keys("q14")  # q140..q149 lie past the first hundred
    assert visible_rows(browser, "items-set-0") == [f"q14{d}" for d in range(10)]
    search.clear()
    search.send_keys(" ")  # an input event with nothing to look for: every row
    browser.execute_script("arguments[0].value = ''; arguments[0].dispatchEvent(new Event('input'))", search)
    assert len(visible_rows(browser, "items-set-0")) == count
    shot(browser, "06-many-rows")


@pytest.fixture
def narrow(page: Any) -> Iterator[Any]:
    """The report on a screen 400 CSS pixels wide (a phone), loaded afresh at that width."""
    metrics = {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        page.refresh()
        assert page.execute_script("return document.body.dataset.ready") == "yes"
        yield page
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


BOXES = (  # per wide table: its width, its box's width and overflow, the box's right edge
    "return Array.from(document.querySelectorAll('table.items, table.diff, table.models')).map(t => "
    "[t.className, t.offsetWidth, t.parentElement.clientWidth, getComputedStyle(t.parentElement).overflowX,"
    " t.parentElement.getBoundingClientRect().right]);"
)
BROKEN_WORDS = (  # the words of up to 20 characters in table cells that are laid out on more than one line
    "const broken = [];"
    "for (const cell of document.querySelectorAll('table.items td, table.diff td')) {"
    "  const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);"
    "  for (let node = walk.nextNode(); node; node = walk.nextNode()) {"
    "    for (const m of node.data.matchAll(/\\S{1,20}(?!\\S)/g)) {"
    "      if (m.index > 0 && !/\\s/.test(node.data[m.index - 1])) { continue; }"
    "      const range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);"
    "      const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));"
    "      if (lines.size > 1) { broken.push(m[0]); }"
    "    }"
    "  }"
    "}"
    "return broken;"
)
LEGENDS = (  # per trend legend: its chart's dataset count, and per entry: label, swatch, left, right, clipped
    "return Array.from(document.querySelectorAll('ul.legend')).map(list => ["
    "  Chart.getChart(document.getElementById(list.dataset.chart)).data.datasets.length,"
    "  Array.from(list.children).map(li => { const r = li.getBoundingClientRect();"
    "    return [li.textContent, li.firstChild.className, r.left, r.right, li.scrollWidth > li.clientWidth]; })]);"
)
BAR_LEGENDS = (  # per bar chart: the canvas width and the right edges of its legend's entries
    "return Array.from(document.querySelectorAll('canvas.bars-form, canvas.bars-hard')).map(c => {"
    "  const chart = Chart.getChart(c); return [chart.width, chart.legend.legendHitBoxes.map(b => [b.left, b.left + b.width])]; });"
)


def test_at_400_px_only_the_tables_scroll_sideways_and_legends_wrap(narrow: Any) -> None:
    shot(narrow, "07-400px")
    page_width, screen = narrow.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert page_width <= screen  # the page itself never scrolls sideways
    boxes = narrow.execute_script(BOXES)
    assert [b[0] for b in boxes] == ["items", "diff", "models"]
    for _name, _table, _box, overflow, right in boxes:
        assert overflow == "auto"  # a table wider than its box scrolls in it
        assert right <= screen
    assert boxes[0][1] > boxes[0][2]  # the prompts' table is wider than the screen: the answer is a scroll away
    assert narrow.execute_script(BROKEN_WORDS) == []  # no word broken mid-word
    legends = narrow.execute_script(LEGENDS)
    assert len(legends) == 2  # the prompt set's trend and the retrieval set's
    for datasets, entries in legends:
        assert len(entries) == datasets  # every line named
        for _label, _swatch, left, right, clipped in entries:
            assert left >= 0
            assert right <= screen
            assert not clipped
    swatches = {label.split(" · ")[0]: swatch for label, swatch, *_ in legends[0][1]}
    assert swatches == {"pass rate": "swatch solid", "mean score": "swatch dashed"}  # told apart
    assert any("m<b>1</b>" in label for label, *_ in legends[0][1])  # a hostile model name, as text
    for width, entries in narrow.execute_script(BAR_LEGENDS):
        assert all(left >= 0 and right <= width for left, right in entries)


def test_an_errored_run_is_drawn_as_an_error_bar(isolated: Path, cli: Any, browser: Any) -> None:
    from tests.report.htmlproject import make_small

    make_small(isolated, cli)
    assert cli("run", "set.yaml", "--provider", "gone").exit_code == 3  # every call errored
    assert cli("report", "--html", "errored.html").exit_code == 0
    browser.get((isolated / "errored.html").as_uri())
    shot(browser, "08-errored-run")
    # the lines: a point for the good run only, none at 0% for the errored run, which is a bar
    assert drawn_points(browser, "trend-set-0")[:2] == [1, 1]
    kinds = browser.execute_script(
        "const chart = Chart.getChart(document.getElementById('trend-set-0'));"
        "return chart.data.datasets.map((d, i) => [chart.getDatasetMeta(i).type, d.data]);"
    )
    assert kinds == [["line", [0.5, None]], ["line", [0.5, None]], ["bar", [None, 1]]]
    legend = browser.execute_script(
        "return Array.from(document.querySelectorAll('ul.legend li')).map(li => li.textContent)"
    )
    assert legend[-1] == "errors · share of a run's answers that errored"
    assert not any("unverified" in entry for entry in legend)
