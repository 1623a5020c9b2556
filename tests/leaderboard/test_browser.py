"""The leaderboard in a real headless Chromium (Debian `chromium`, driven by Playwright):
open the page, switch test set and track, re-rank by a metric (menu and header click),
search, download a table, open a model's page by its link, and check what is on screen
against the published CSVs, at 1,400 px and at a phone's 390 px. Screenshots go to
test-artifacts/."""
from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urljoin

import numpy as np
import pandas as pd
import pytest

from rexrank.results_schema import COLUMNS_BY_KEY
from support.paths import PROJECT_ROOT, shared_path

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
# waits on the page's state: a generous cap, reached only when the state never comes (a loaded
# machine makes the page slower, never wrong)
STATE_TIMEOUT_MS = 120_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless browser test needs Debian chromium at /usr/bin/chromium (apt-get install chromium)"),
]

# every rendered cell of a gr.Dataframe, as rows of text (the grid is virtualised: only
# rendered rows are in the DOM)
READ_ROWS = """(sel) => {
  const rows = {};
  document.querySelectorAll(sel + ' [role=gridcell]').forEach(c => {
    const r = +c.dataset.row, k = +c.dataset.col;
    (rows[r] = rows[r] || [])[k] = c.innerText.trim();
  });
  return Object.keys(rows).map(Number).sort((a, b) => a - b).map(r => rows[r]);
}"""
READ_HEADERS = """(sel) => Array.from(document.querySelectorAll(sel + ' th[role=columnheader]')).map(th => th.innerText.trim())"""
# the words of `cells` split over two lines (a Range over a word has client rects on more
# than one line); `words`: what counts as one word (default: between spaces)
BROKEN_WORDS = """const brokenWords = (cells, words = /\\S+/g) => {
  const broken = [];
  cells.forEach(cell => {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(words)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  });
  return broken;
};"""
# what a reader sees of a grid: header words split over two lines, cells whose text is cut
# off, sideways scrolling
LAYOUT = """(sel) => {
  """ + BROKEN_WORDS + """
  const root = document.querySelector(sel);
  const broken = brokenWords(root.querySelectorAll('th[role=columnheader]'));
  const clipped = [];
  root.querySelectorAll('[role=gridcell] .cell-wrap').forEach(c => {
    if (c.scrollWidth > c.clientWidth + 1) clipped.push(c.innerText.trim());
  });
  const viewport = root.querySelector('.virtual-table-viewport');
  return {broken, clipped, overflow: viewport.scrollWidth - viewport.clientWidth,
          font: getComputedStyle(root.querySelector('th')).fontFamily,
          page_overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(demo) -> str:
    """Launch `demo` on a free local port; its address. Gradio's queue looks for work every 1 ms
    (and for progress every 10 ms) even when idle: 8 % of a core per server, and this file's
    four servers live until its end. Every 10 ms (100 ms) costs 2 %; an event waits at most
    10 ms more to start, and these apps report no progress."""
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    demo._queue.sleep_when_free = 0.01
    demo._queue.progress_update_sleep_when_free = 0.1
    return url


def published(csv_name: str) -> pd.DataFrame:
    csv = pd.read_csv(shared_path("data", "published", "current", csv_name))
    csv["Model Name"] = csv["Model Name"].str.replace("_", "-")
    return csv


def expected_models(csv_name: str, column: str, institution: str | None = None) -> list[str]:
    csv = published(csv_name)
    if institution:
        csv = csv[csv["Institution"] == institution]
    return csv.sort_values([column, "Model Name"], ascending=[False, True], na_position="last")["Model Name"].tolist()


def models_shown(rows) -> list[str]:
    return [r[1].replace(" *", "") for r in rows]


def column(page, selector: str, name: str) -> int:
    """The index of a grid's column by its header's name ("BLEU" for "BLEU ↑ ▼"): the columns
    follow the view (the ranking metric next to the model; n and Tier where they exist)."""
    headers = [h.replace("↑", "").replace("↓", "").replace("▼", "").replace("▲", "").strip()
               for h in page.evaluate(READ_HEADERS, selector)]
    return headers.index(name)


def show_view_options(page) -> None:
    """Unfold "Search, filters and columns" (under the tables, so that the first screen is a table) if folded."""
    if not page.locator("#search").first.is_visible():
        page.locator("#view-options").get_by_text("Search, filters and columns").first.click()
        page.locator("#search").first.wait_for(state="visible", timeout=STATE_TIMEOUT_MS)


def search_for(page, text: str) -> None:
    show_view_options(page)
    page.locator("#search textarea, #search input").first.fill(text)


def wait_view_ready(page) -> None:
    """Until the page load's chain has run to its end (it reads the address, selects the tab
    it asks for and redraws the tables: a control used before then can be redrawn under the
    test, a file set on an input that is then replaced is never uploaded)."""
    page.wait_for_function("() => window.rexrankViewReady === true", timeout=STATE_TIMEOUT_MS)


def open_page(page, url: str) -> None:
    """Go to `url` and wait for the view it asks for (`wait_view_ready`)."""
    page.goto(url)
    wait_view_ready(page)


def wait_for_address(page, part: str) -> str:
    """Until the page's address holds `part` (the view is written there as it changes)."""
    page.wait_for_function("(part) => window.location.search.includes(part)", arg=part, timeout=STATE_TIMEOUT_MS)
    return page.url


def settle(page, timeout_ms: int = STATE_TIMEOUT_MS) -> None:
    """Wait until no component shows Gradio's "processing" overlay (before a screenshot)."""
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=status-tracker]'))"
        ".every(e => e.classList.contains('hide') || e.offsetParent === null)",
        timeout=timeout_ms,
    )


# resolves once the element (or, before it exists, the page) has changed and then been still
# for 20 ms, or after `ms`: a poll that looks again as soon as the page has redrawn instead of
# after a fixed sleep
NEXT_CHANGE = """([sel, ms]) => new Promise(done => {
  let still;
  const watch = new MutationObserver(() => { clearTimeout(still); still = setTimeout(stop, 20); });
  const stop = () => { watch.disconnect(); clearTimeout(cap); clearTimeout(still); done(); };
  const cap = setTimeout(stop, ms);
  watch.observe(document.querySelector(sel) || document.body, {subtree: true, childList: true, characterData: true, attributes: true});
})"""


def next_change(page, selector: str, ms: int = 250) -> None:
    try:
        page.evaluate(NEXT_CHANGE, [selector, ms])
    except Exception as exc:  # the page went to another address meanwhile: a change too
        if "context was destroyed" not in str(exc):
            raise


def wait_until(page, elem_id: str, done, timeout: float = STATE_TIMEOUT_MS / 1000):
    """Poll a table's rendered rows until `done(rows)` and return them. The limit is a failure
    limit: a state that never comes fails the test with what was on screen (a wait that
    returned at its limit instead let a test sit out 120 s and then go on)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = page.evaluate(READ_ROWS, f"#{elem_id}")
        if done(rows):
            return rows
        if time.monotonic() > deadline:
            pytest.fail(f"#{elem_id} did not reach the awaited state in {timeout:.0f} s; its rows: {rows}")
        next_change(page, f"#{elem_id}")


def wait_rows(page, elem_id: str, expected: list[str], *, full: bool, timeout: float = STATE_TIMEOUT_MS / 1000):
    """Until the model column shows `expected` (all rows when `full`, else a prefix of at
    least 5, as the grid renders only what is visible)."""
    def done(rows):
        shown = models_shown(rows)
        if full:
            return shown == expected
        return len(shown) >= min(5, len(expected)) and shown == expected[: len(shown)]

    return wait_until(page, elem_id, done, timeout)


def wait_text(page, selector: str, done, timeout: float = STATE_TIMEOUT_MS / 1000) -> str:
    """Poll an element's text until `done(text)` and return it; fails at the limit, as `wait_until`."""
    deadline = time.monotonic() + timeout
    while True:
        loc = page.locator(selector)
        text = loc.first.inner_text() if loc.count() else ""
        if done(text):
            return text
        if time.monotonic() > deadline:
            pytest.fail(f"{selector} did not reach the awaited text in {timeout:.0f} s; it reads: {text!r}")
        next_change(page, selector)


def open_tab(page, name: str) -> None:
    """Click a tab; on a narrow screen gradio moves the tabs that do not fit into a ⋯ menu."""
    page.locator("[role=tab]").first.wait_for(state="visible", timeout=STATE_TIMEOUT_MS)  # the tabs are drawn
    tab = page.get_by_role("tab", name=name)
    if not tab.is_visible():
        page.locator(".overflow-menu button").first.click()
        tab = page.get_by_role("tab", name=name).or_(page.get_by_role("button", name=name)).first
    tab.click()


@pytest.fixture(scope="module")
def page_url():
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.published import load_seed_records
    from rexrank.leaderboard.source import LeaderboardSource

    demo = build_app(LeaderboardSource.from_records(load_seed_records(), label="the published ReXrank results"))
    url = serve(demo)
    try:
        yield url
    finally:
        demo.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright Python package (test extra)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_browse_switch_rerank_search(page_url, browser):
    page = browser.new_page(viewport=DESKTOP)
    open_page(page, page_url)
    open_tab(page, "Overview")  # a later tab: the page opens on the first test set's table

    # overview: top model per test set by 1/RadCliQ-v1, findings track
    rows = wait_until(page, "table-overview", lambda rows: len(rows) >= 10 and all(rows[0]))
    top = {
        1: expected_models("findings_result_gradienthealth.csv", "1/RadCliQ-v1")[0],
        2: expected_models("findings_result_mimiccxr.csv", "1/RadCliQ-v1")[0],
        3: expected_models("findings_result_iu_xray.csv", "1/RadCliQ-v1")[0],
        4: expected_models("findings_result_chexpertplus.csv", "1/RadCliQ-v1")[0],
    }
    assert rows, "the overview table shows no rows"
    for col, model in top.items():
        assert rows[0][col].replace(" *", "").startswith(model + " ("), (col, rows[0])
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_1_overview.png"))

    # IU-Xray tab, findings track, default ranking
    page.get_by_role("tab", name="IU-Xray").click()
    expected = expected_models("findings_result_iu_xray.csv", "1/RadCliQ-v1")
    rows = wait_rows(page, "table-iu_xray", expected, full=False)
    shown = models_shown(rows)
    assert len(shown) >= 5 and shown == expected[: len(shown)]
    assert [r[0] for r in rows] == [str(i + 1) for i in range(len(rows))]
    # MoERad-IU used IU-Xray's training split: starred here
    assert any(r[1] == "MoERad-IU *" for r in rows)
    note = f"{len(expected)} results in the Findings track."
    assert wait_text(page, "#note-iu_xray", lambda t: t == note) == note  # no tier note: no per-study scores
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_2_iu_findings.png"))

    # switch the track: findings + impression (7 models)
    page.locator("#track label", has_text="Findings + Impression").click()
    expected = expected_models("result_iu_xray.csv", "1/RadCliQ-v1")
    rows = wait_rows(page, "table-iu_xray", expected, full=True)
    assert models_shown(rows) == expected

    # re-rank by 1/FineRadScore (the Challenge ranking)
    page.locator("#rank-by input").click()
    page.locator("ul[role=listbox] li", has_text="1/FineRadScore").click()
    expected = expected_models("result_iu_xray.csv", "1/FineRadScore")
    rows = wait_rows(page, "table-iu_xray", expected, full=True)
    assert models_shown(rows) == expected
    fine = column(page, "#table-iu_xray", "1/FineRadScore")
    assert fine == 2  # next to the model
    # UniRG-CXR: no FineRadScore, unranked, and its row says why and where it stands by the others
    assert rows[-1][0] == "–" and rows[-1][fine].startswith("– not published · 1st of 7 by BLEU")
    best = published("result_iu_xray.csv")["1/FineRadScore"].max()
    assert rows[0][fine] == f"{best:.3f}"
    bold = page.locator(f"#table-iu_xray [role=gridcell][data-row='0'][data-col='{fine}'] strong")
    assert bold.inner_text() == f"{best:.3f}"  # best value highlighted
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_3_iu_fi_fineradscore.png"))

    # search by institution: the rows, and a note that counts them
    search_for(page, "Stanford")
    expected = expected_models("result_iu_xray.csv", "1/FineRadScore", institution="Stanford")
    rows = wait_rows(page, "table-iu_xray", expected, full=True)
    assert models_shown(rows) == expected
    # the note counts the matches (it does not repeat the search, which a link's q= could fill)
    matches = f"{len(expected)} of 7 results match the search."
    assert wait_text(page, "#note-iu_xray", lambda t: t.startswith(matches)).startswith(matches)
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_4_search.png"))

    # another test set keeps the chosen track and ranking
    page.get_by_role("tab", name="MIMIC-CXR").click()
    expected = expected_models("result_mimiccxr.csv", "1/FineRadScore", institution="Stanford")
    rows = wait_rows(page, "table-mimic_cxr", expected, full=True)
    assert models_shown(rows) == expected

    # one match: singular; no match: an empty table that says why
    search_for(page, "RadFM")
    one = "1 of 7 results matches the search."
    assert wait_text(page, "#note-mimic_cxr", lambda t: t.startswith(one)).startswith(one)
    search_for(page, "no such model")
    none = "No model or institution matches the search: the table is empty. Clear the search to see all 7 results."
    assert wait_text(page, "#note-mimic_cxr", lambda t: t.startswith("No model")) == none
    assert wait_until(page, "table-mimic_cxr", lambda rows: rows == []) == []
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_5_no_match.png"))
    page.close()


def test_header_click_ranks_and_csv_download_is_the_table(page_url, browser):
    page = browser.new_page(viewport=DESKTOP)
    open_page(page, page_url)
    page.get_by_role("tab", name="IU-Xray").click()
    wait_rows(page, "table-iu_xray", expected_models("findings_result_iu_xray.csv", "1/RadCliQ-v1"), full=False)

    # a click on a metric's header ranks by it: rows, rank, marker and the menu follow
    page.locator("#table-iu_xray th[role=columnheader]", has_text="BLEU").click()
    expected = expected_models("findings_result_iu_xray.csv", "BLEU")
    rows = wait_rows(page, "table-iu_xray", expected, full=False)
    shown = models_shown(rows)
    assert len(shown) >= 5 and shown == expected[: len(shown)]
    assert rows[0][0] == "1"
    bleu = column(page, "#table-iu_xray", "BLEU")
    assert page.evaluate(READ_HEADERS, "#table-iu_xray")[bleu] == "BLEU ↑ ▼"
    assert page.locator("#rank-by input").input_value() == "BLEU"
    # a header that is no metric changes nothing
    page.locator("#table-iu_xray th[role=columnheader]", has_text="Institution").click()
    time.sleep(1.0)
    assert page.locator("#rank-by input").input_value() == "BLEU"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_6_header_click_bleu.png"))

    # the CSV download: the table on screen, as plain values
    with page.expect_download() as download:
        page.locator("#csv-iu_xray").click()
    assert download.value.suggested_filename == "rexrank_iu_xray_findings_by-bleu2.csv"
    table = pd.read_csv(download.value.path(), keep_default_na=False, na_values=[""])
    csv = published("findings_result_iu_xray.csv")
    assert len(table) == len(csv)
    rows = page.evaluate(READ_ROWS, "#table-iu_xray")
    assert table["Model"].tolist()[: len(rows)] == models_shown(rows)
    assert [str(r) for r in table["Rank"].tolist()[: len(rows)]] == [r[0] for r in rows]
    assert [f"{v:.3f}" for v in table["BLEU"].tolist()[: len(rows)]] == [r[bleu] for r in rows]
    assert table["BLEU"].tolist() == sorted(csv["BLEU"], reverse=True)
    page.close()


def test_model_tab_is_filled_on_load_and_has_a_link(page_url, browser):
    page = browser.new_page(viewport=DESKTOP)
    open_page(page, page_url)
    page.get_by_role("tab", name="Model").click()
    rows = wait_until(page, "model-results", lambda rows: len(rows) > 0)
    assert rows, "the Model tab shows an empty grid before a model is picked"
    headers = page.evaluate(READ_HEADERS, "#model-results")
    assert headers[:3] == ["Test set", "Track", "Rank"]
    assert page.evaluate(READ_HEADERS, "#model-significance")[:3] == ["Test set", "Track", "Neighbour"]

    # the link on a model's page opens the leaderboard on that model's page
    open_page(page, page_url + "?model=MedVersa")
    assert wait_text(page, "#model-header", lambda t: t.startswith("MedVersa")).startswith("MedVersa")
    assert page.get_by_role("tab", name="Model").get_attribute("aria-selected") == "true"
    rows = wait_until(page, "model-results", lambda rows: len(rows) == 8)
    assert len(rows) == 8 and {r[0] for r in rows} == {"ReXGradient (private)", "MIMIC-CXR", "IU-Xray", "CheXpert Plus"}
    link = page.locator("#model-header a", has_text="Link to this page")
    assert link.get_attribute("href") == "?model=MedVersa"
    assert page.locator("#model-pick input").input_value() == "MedVersa"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_7_model_link.png"), full_page=True)
    page.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_layout_fits_and_headers_break_between_words(page_url, browser, viewport):
    page = browser.new_page(viewport=viewport)
    open_page(page, page_url)
    # the page opens on the first test set's table (the Overview is a later tab, drawn when opened)
    wait_until(page, "table-rexgradient", lambda rows: len(rows) > 0 and all(rows[0]))
    width = viewport["width"]
    for tab, elem_id in [("Overview", "table-overview"), ("CheXpert Plus", "table-chexpert_plus"), ("Model", "model-results")]:
        open_tab(page, tab)
        wait_until(page, elem_id, lambda rows: len(rows) > 0)
        settle(page)
        layout = page.evaluate(LAYOUT, f"#{elem_id}")
        page.screenshot(path=str(ARTIFACTS / f"leaderboard_layout_{width}_{elem_id}.png"), full_page=True)
        assert layout["broken"] == [], f"{tab} at {width} px: header words broken over two lines"
        assert "mono" not in layout["font"].lower()
        assert layout["page_overflow"] <= 0, f"{tab} at {width} px: the page scrolls sideways"
        if width >= 1400:
            assert layout["overflow"] <= 0, f"{tab} at {width} px: the grid scrolls sideways by {layout['overflow']} px"
            assert layout["clipped"] == [], f"{tab} at {width} px: cells cut off"
    page.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_about_table_keeps_words_whole(page_url, browser, viewport):
    page = browser.new_page(viewport=viewport)
    open_page(page, page_url + "?tab=about")
    table = page.locator("#about-text table").first
    table.wait_for(state="visible", timeout=STATE_TIMEOUT_MS)
    cells = "#about-text table th, #about-text table td"
    # prose may wrap after a hyphen or dash ("distilroberta-|base"), never inside a word
    broken = page.evaluate("(sel) => { " + BROKEN_WORDS + " return brokenWords(document.querySelectorAll(sel), /[^\\s\\-–]+/g); }",
                           cells)
    assert broken == [], f"at {viewport['width']} px the About table splits words over two lines: {broken[:10]}"
    assert page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    table.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_31_about_{viewport['width']}.png"))
    page.close()


# ---- issue 21: tiers and n, controls in the address, progress, layout fixes ----

@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    """The published results and four submitted IU-Xray results with per-study scores
    (MoERad's official per-study RadCliQ-v1 and three systems made from them, as in
    test_leaderboard_views), served from a local store."""
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.source import LeaderboardSource, seed_if_empty
    from rexrank.store import open_store
    from support.boards import MOERAD_SCORES, per_study_bytes, result

    real = pd.read_csv(shared_path(*MOERAD_SCORES))
    ids = [f"s{i}" for i in real["study_id"]]
    rng = np.random.default_rng(21)
    a = real["RadCliQ-v1"].to_numpy(float)
    b = a + 0.05 + rng.normal(0, 0.3, a.size)
    c = b + 0.001 + rng.normal(0, 0.3, a.size)
    d = c + 0.2 + rng.normal(0, 0.3, a.size)
    store = open_store(tmp_path_factory.mktemp("lb21") / "store")
    seed_if_empty(store)
    for i, (name, values) in enumerate({"Sub-A": a, "Sub-B": b, "Sub-C": c, "Sub-D": d}.items()):
        store.add_result(result(name, values, date=f"2026-0{i + 1}-15"), per_study=per_study_bytes(ids, values))
    demo = build_app(LeaderboardSource.from_store(store, ttl=0))
    url = serve(demo)
    try:
        yield url
    finally:
        demo.close()


def rows_by_model(rows) -> dict[str, list[str]]:
    return {r[1].replace(" *", ""): r for r in rows}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_tiers_and_n_on_the_board(store_url, browser, viewport):
    page = browser.new_page(viewport=viewport)
    open_page(page, store_url + "?tab=iu_xray&source=submitted")
    rows = wait_until(page, "table-iu_xray", lambda rows: len(rows) == 4 and all(r[-1] == "submitted" for r in rows))
    col = {name: column(page, "#table-iu_xray", name) for name in ("Tier", "n", "Date", "Source")}
    shown = rows_by_model(rows)
    assert [shown[m][col["Tier"]] for m in ("Sub-A", "Sub-B", "Sub-C", "Sub-D")] == ["1", "2", "2", "3"]
    assert {r[col["n"]] for r in rows} == {"590"}, rows
    assert [r[col["Date"]] for r in rows] == ["2026"] * 4  # the Date column: years
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_21_tiers_{viewport['width']}.png"), full_page=True)
    # with the published rows: theirs read n/a, and the note says why
    show_view_options(page)
    page.locator("#sources label", has_text="published").click()
    rows = wait_until(page, "table-iu_xray", lambda rows: len(rows) >= 10)
    published = [r for r in rows if r[col["Source"]] == "published"]
    # the published rows have no tier: an empty cell (never "n/a" above a tier 1), and the note says why
    assert published and {r[col["Tier"]] for r in published} == {""} and {r[col["n"]] for r in published} == {"–"}
    why = "no tier for 25 published (the site gives means only)"
    assert why in wait_text(page, "#note-iu_xray", lambda t: why in t)
    page.close()


def test_controls_live_in_the_address_and_a_link_reproduces_the_view(store_url, browser):
    page = browser.new_page(viewport=DESKTOP)
    open_page(page, store_url)
    # each step waits on the state it changes (the address, then what the table shows), never on a
    # clock: under load, a click on a control the previous step's answer re-renders can be lost
    page.get_by_role("tab", name="MIMIC-CXR").click()
    wait_for_address(page, "tab=mimic_cxr")
    page.locator("#track label", has_text="Findings + Impression").click()
    wait_for_address(page, "track=findings_impression")
    wait_text(page, "#note-mimic_cxr", lambda t: "Findings + Impression" in t, timeout=STATE_TIMEOUT_MS / 1000)
    page.locator("#rank-by input").click()
    page.locator("ul[role=listbox] li", has_text="GREEN").click(timeout=STATE_TIMEOUT_MS)
    wait_for_address(page, "rank=green")
    page.wait_for_function(f"() => ({READ_HEADERS})('#table-mimic_cxr').includes('GREEN ↑ ▼')", timeout=STATE_TIMEOUT_MS)
    show_view_options(page)
    page.locator("#hide-trained input").check(timeout=STATE_TIMEOUT_MS)
    wait_for_address(page, "hide_trained=1")
    wait_text(page, "#note-mimic_cxr", lambda t: "Filters:" in t, timeout=STATE_TIMEOUT_MS / 1000)
    page.locator("#columns label", has_text="BertScore").click(timeout=STATE_TIMEOUT_MS)
    wait_for_address(page, "columns=")
    page.wait_for_function(f"() => !({READ_HEADERS})('#table-mimic_cxr').some(h => h.startsWith('BertScore'))",
                           timeout=STATE_TIMEOUT_MS)
    search_for(page, "Stanford")
    wait_for_address(page, "q=Stanford")
    expected = published("result_mimiccxr.csv")
    expected = expected[(expected["Institution"] == "Stanford")]
    trained = {"CheXagent", "CheXpertPlus-MIMIC", "CheXpertPlus-CheX-MIMIC"}  # the * models among them
    expected = expected[~expected["Model Name"].isin(trained)].sort_values("GREEN", ascending=False)["Model Name"].tolist()
    rows = wait_rows(page, "table-mimic_cxr", expected, full=True, timeout=STATE_TIMEOUT_MS / 1000)
    assert models_shown(rows) == expected and expected
    headers = page.evaluate(READ_HEADERS, "#table-mimic_cxr")
    assert "GREEN ↑ ▼" in headers and not any(h.startswith("BertScore") for h in headers)
    link = page.url
    for part in ("tab=mimic_cxr", "track=findings_impression", "rank=green", "hide_trained=1", "q=Stanford", "columns="):
        assert part in link, (part, link)
    assert "bertscore" not in link.split("columns=")[1].split("&")[0]
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_21_view_1400.png"))
    page.close()

    # the link, opened afresh (a phone), shows the same view
    again = browser.new_page(viewport=PHONE)
    open_page(again, link)
    rows = wait_rows(again, "table-mimic_cxr", expected, full=True, timeout=STATE_TIMEOUT_MS / 1000)
    assert models_shown(rows) == expected
    assert again.get_by_role("tab", name="MIMIC-CXR").or_(again.get_by_role("button", name="MIMIC-CXR")).first.get_attribute("aria-selected") in ("true", None)
    assert again.locator("#rank-by input").input_value() == "GREEN"
    assert again.locator("#hide-trained input").is_checked()
    assert again.locator("#search textarea, #search input").first.input_value() == "Stanford"
    assert not any(h.startswith("BertScore") for h in again.evaluate(READ_HEADERS, "#table-mimic_cxr"))
    settle(again)
    again.screenshot(path=str(ARTIFACTS / "leaderboard_21_view_390.png"), full_page=True)
    # an unknown value in the address is named above the tables, its text never shown
    open_page(again, store_url + "?rank=bogus%E2%80%AEhttps://evil.example")
    status = wait_text(again, "#address-note", lambda t: "Unknown values ignored" in t, timeout=STATE_TIMEOUT_MS / 1000)
    assert "rank" in status and "evil" not in status and "\u202e" not in status
    # a model's page in the address
    open_page(again, store_url + "?model=MedVersa")
    assert wait_text(again, "#model-header", lambda t: t.startswith("MedVersa")).startswith("MedVersa")
    again.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_progress_plot_per_test_set_and_track(store_url, browser, viewport):
    page = browser.new_page(viewport=viewport)
    open_page(page, store_url + "?tab=plots")
    note = wait_text(page, "#progress-note", lambda t: "by date" in t)
    assert note.startswith("29 results on IU-Xray / Findings by date")  # 25 published + 4 submitted
    page.wait_for_selector("#progress-plot img", timeout=STATE_TIMEOUT_MS)
    page.locator("#track label", has_text="Findings + Impression").click()
    note = wait_text(page, "#progress-note", lambda t: "Findings + Impression" in t)
    assert note.startswith("7 results on IU-Xray / Findings + Impression by date")
    page.wait_for_selector("#progress-plot img", timeout=STATE_TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_21_progress_{viewport['width']}.png"), full_page=True)
    page.close()


# every metric header on one line (the ranking one too: "BLEU ↑ ▼"), and what is at the
# middle of the last row's last cell once the grid is scrolled to its end
HEADER_LINES = """(sel) => Array.from(document.querySelectorAll(sel + ' th[role=columnheader]'))
  .filter(th => /[↑↓]/.test(th.innerText))
  .map(th => { const r = document.createRange(); r.selectNodeContents(th.querySelector('span.header') || th);
               return [th.innerText.trim(), new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top))).size]; })"""
LAST_CELL_COVERED = """async (sel) => {
  const viewport = document.querySelector(sel + ' .virtual-table-viewport');
  viewport.scrollTop = viewport.scrollHeight;
  await new Promise(r => setTimeout(r, 500));
  const cells = Array.from(document.querySelectorAll(sel + ' [role=gridcell]'));
  const last = Math.max(...cells.map(c => +c.dataset.row));
  const row = cells.filter(c => +c.dataset.row === last);
  const cell = row.reduce((a, b) => (+a.dataset.col > +b.dataset.col ? a : b));
  cell.scrollIntoView({block: 'nearest', inline: 'nearest'});
  const box = cell.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return hit && cell.contains(hit) ? '' : (hit ? hit.outerHTML.slice(0, 120) : 'nothing');
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_layout_of_sorted_headers_last_row_queue_and_model_page(store_url, browser, viewport):
    page = browser.new_page(viewport=viewport)
    width = viewport["width"]
    for rank in ("radcliq_v1_inv", "fineradscore_inv", "bleu2"):
        open_page(page, store_url + f"?tab=iu_xray&rank={rank}")
        # the page opens on the build-time tables (default ranking); the address's ranking is
        # drawn once the load has read it: wait for its marked header, then for the rows
        ranked = f"{COLUMNS_BY_KEY[rank].display} ↑ ▼"
        page.wait_for_function(f"() => ({READ_HEADERS})('#table-iu_xray').includes({ranked!r})", timeout=STATE_TIMEOUT_MS)
        wait_until(page, "table-iu_xray", lambda rows: len(rows) >= 5 and rows[0][0] == "1")
        settle(page)
        lines = page.evaluate(HEADER_LINES, "#table-iu_xray")
        assert any("▼" in h for h, _ in lines), lines
        assert [h for h, n in lines if n != 1] == [], f"at {width} px, ranked by {rank}: headers on two lines"
        layout = page.evaluate(LAYOUT, "#table-iu_xray")
        assert layout["broken"] == [] and layout["page_overflow"] <= 0
        if width >= 1400:
            assert layout["overflow"] <= 0, f"ranked by {rank}: the grid scrolls sideways by {layout['overflow']} px"
    # gradio's scroll-to-top button does not sit on the last row
    assert page.evaluate(LAST_CELL_COVERED, "#table-iu_xray") == ""
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_21_last_row_{width}.png"))
    # the Queue's headers are words
    open_tab(page, "Submit")
    page.wait_for_selector("#queue th[role=columnheader]", timeout=STATE_TIMEOUT_MS)
    headers = page.evaluate(READ_HEADERS, "#queue")
    assert headers[:3] == ["Request", "Model", "Submitter"] and not any("_" in h for h in headers)
    # a published model's significance table says why it has no tests
    open_page(page, store_url + "?model=MedVersa")
    rows = wait_until(page, "model-significance", lambda rows: len(rows) > 0)
    assert rows and all("no per-study scores" in r[-1] for r in rows)
    header = wait_text(page, "#model-header", lambda t: "own figures" in t)
    assert "the ReXrank site's own figures" in header
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_21_model_published_{width}.png"), full_page=True)
    page.close()


# ---- issue 31: the first screen is a leaderboard; a submitter finds their result ----

@pytest.fixture(scope="module")
def default_store(tmp_path_factory):
    """A fresh default store, as `rexrank leaderboard` makes it (seeded with the published results)."""
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.source import LeaderboardSource, seed_if_empty
    from rexrank.store import open_store

    path = tmp_path_factory.mktemp("lb31") / "rexrank-store"
    store = open_store(path)
    seed_if_empty(store)
    demo = build_app(LeaderboardSource.from_store(store, ttl=0))
    url = serve(demo)
    try:
        yield path, url
    finally:
        demo.close()


# where the first screen's cells are: rank, model and the ranking metric (the column marked
# ▼/▲) of the first rows, against the window and the grid's own visible box
FIRST_SCREEN = """(sel) => {
  const root = document.querySelector(sel);
  if (!root || !root.offsetParent) return null;
  const view = root.querySelector('.virtual-table-viewport').getBoundingClientRect();
  const headers = Array.from(root.querySelectorAll('th[role=columnheader]'));
  const metric = headers.findIndex(th => /[▼▲]/.test(th.innerText));
  const seen = (r) => r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight
                      && r.right <= window.innerWidth && r.right <= view.right + 1 && r.left >= view.left - 1;
  const rows = [];
  for (let row = 0; row < 3; row++) {
    const cells = [0, 1, metric].map(k => root.querySelector(`[role=gridcell][data-row='${row}'][data-col='${k}']`));
    rows.push(cells.map(c => c ? {text: c.innerText.trim(), seen: seen(c.getBoundingClientRect())} : null));
  }
  return {metric, header: headers[metric] ? headers[metric].innerText.trim() : null,
          header_seen: headers[metric] ? seen(headers[metric].getBoundingClientRect()) : false, rows};
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_the_first_screen_holds_the_ranking_metrics_numbers(default_store, browser, viewport):
    _, url = default_store
    page = browser.new_page(viewport=viewport)
    open_page(page, url)
    width = viewport["width"]
    rows = wait_until(page, "table-rexgradient", lambda rows: len(rows) >= 3, timeout=STATE_TIMEOUT_MS / 1000)
    assert len(rows) >= 3, "the page does not open on a test set's table"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_31_first_screen_{width}.png"))
    screen = page.evaluate(FIRST_SCREEN, "#table-rexgradient")
    assert screen is not None, "the first tab's table is not shown"
    assert screen["metric"] == 2 and screen["header"] == "1/RadCliQ-v1 ↑ ▼"  # next to the model
    assert screen["header_seen"], f"at {width} px the ranking metric's header is off the first screen"
    expected = published("findings_result_gradienthealth.csv").sort_values("1/RadCliQ-v1", ascending=False)
    for i, (rank, model, value) in enumerate(screen["rows"]):
        assert rank["seen"] and model["seen"] and value["seen"], f"at {width} px row {i} is off the first screen: {screen}"
        assert value["text"] == f"{expected['1/RadCliQ-v1'].iloc[i]:.3f}", screen
    # every tab in sight (gradio's default hid all but the first under a "⋯" menu on a phone)
    tabs = [t.inner_text().strip() for t in page.locator("[role=tab]").all() if t.is_visible()]
    assert tabs == ["ReXGradient (private)", "MIMIC-CXR", "IU-Xray", "CheXpert Plus", "Overview", "Model", "Plots",
                    "About", "Submit"], f"at {width} px the tabs in sight: {tabs}"
    layout = page.evaluate(LAYOUT, "#table-rexgradient")
    assert layout["page_overflow"] <= 0, f"at {width} px the page scrolls sideways"
    assert layout["clipped"] == [], f"at {width} px cells cut off: {layout['clipped']}"
    assert layout["broken"] == []
    page.close()


def test_a_submitted_row_is_reached_from_the_submit_link(default_store, browser, tmp_path):
    from rexrank.cli.main import main
    from rexrank.data import data_path

    store, url = default_store
    page = browser.new_page(viewport=PHONE)
    open_page(page, url + "?tab=submit")
    page.get_by_label("Your name or organisation (submitter)").fill("tester")
    page.get_by_label("Model name").fill("Issue31-Model")
    page.locator("#submit-result").wait_for(state="attached", timeout=STATE_TIMEOUT_MS)
    page.locator("#submit-file input[type=file]").set_input_files(str(data_path("example_predictions.json")))
    page.locator("#submit-file").get_by_text("example_predictions.json").wait_for(state="visible", timeout=STATE_TIMEOUT_MS)
    sub_test_set = page.get_by_label("Test set").first
    sub_test_set.click()
    page.locator("ul[role=listbox] li", has_text="Example").click(timeout=STATE_TIMEOUT_MS)
    page.get_by_role("button", name="Validate and submit").click()
    answer = wait_text(page, "#submit-result", lambda t: "filed" in t, timeout=STATE_TIMEOUT_MS / 1000)
    assert answer.startswith("✅ Request"), answer
    link = page.locator("#submit-result a", has_text="page on this leaderboard")
    href = link.get_attribute("href")
    assert href == "?model=tester+%2F+Issue31-Model"  # the board's "namespace / name" (issue 37)
    # the backend scores it (BLEU only, offline: no 1/RadCliQ-v1 value, so the row is unranked)
    assert main(["backend", "--store", str(store), "--once",
                 "--metrics", "bleu2", "--no-progress"]) == 0
    open_page(page, urljoin(page.url, href))  # the link (gradio opens a markdown link in a new tab)
    header = wait_text(page, "#model-header", lambda t: t.startswith("tester / Issue31-Model"),
                       timeout=STATE_TIMEOUT_MS / 1000)
    assert header.startswith("tester / Issue31-Model")
    rows = wait_until(page, "model-results", lambda rows: len(rows) == 1)
    assert rows[0][:3] == ["Example (synthetic)", "Findings", "–"], rows
    radcliq = column(page, "#model-results", "1/RadCliQ-v1")
    assert rows[0][radcliq] == "– not scored · 1st of 1 by BLEU", rows  # why it is unranked, and where it stands
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_31_submitted_model_390.png"), full_page=True)
    page.close()


# ---- issue 39: your run is found and ranked; search names the other tabs; phones ----

@pytest.fixture(scope="module")
def bleu_only_store(tmp_path_factory):
    """The README's flow offline: a default store, `rexrank submit` of IU-Xray predictions (the
    test set's folder given once, with --data-dir), then `backend --once --metrics bleu2`
    without --data-dir (the folder is remembered): the run has BLEU and no 1/RadCliQ-v1.
    Yields (store, url, the link `submit` printed, MyModel's BLEU as the page shows it: "0.270 ± 0.011")."""
    import contextlib
    import io

    from rexrank.cli.main import main
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.source import LeaderboardSource, seed_if_empty
    from rexrank.store import open_store

    iu = shared_path("data", "iu_xray")
    preds = shared_path("validation", "moerad_iu", "MoERad.json")
    path = tmp_path_factory.mktemp("lb39") / "rexrank-store"
    seed_if_empty(open_store(path))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["submit", "--store", str(path), "--dataset", "iu_xray", "--predictions", str(preds), "--model-name",
                     "MyModel", "--submitter", "me", "--data-dir", str(iu.parent), "--no-progress"]) == 0
        assert main(["backend", "--store", str(path), "--once", "--metrics", "bleu2", "--no-progress"]) == 0
    link = next(w for w in printed.getvalue().split() if w.startswith("http://127.0.0.1:7860/"))
    store = open_store(path)
    mine = next(r for r in store.list_results() if r["model_name"] == "MyModel")
    demo = build_app(LeaderboardSource.from_store(store, ttl=0))
    url = serve(demo)
    try:
        yield path, url, link, mine["values"]["bleu2"]
    finally:
        demo.close()


# MyModel as the board names it: its namespace (the submitter, `me`) and its name (issue 37)
TITLE, TITLE_Q = "me / MyModel", "me+%2F+MyModel"


def bleu_rank_among_published(bleu: dict) -> tuple[int, int]:
    """MyModel's place by BLEU among the published IU-Xray findings results, and how many
    results have BLEU (computed from the published CSV, not by the page)."""
    csv = published("findings_result_iu_xray.csv")
    return int((csv["BLEU"] > bleu["mean"]).sum()) + 1, int(csv["BLEU"].notna().sum()) + 1


def shown(value: dict) -> str:
    """A mean and its CI as the page writes them, joined by no-break spaces."""
    return f"{value['mean']:.3f}\u00a0±\u00a0{value['ci95']:.3f}"


# where a row's cells are: the row of `model` in the grid, each of its first `k` cells' text
# and whether it lies inside the window and the grid's visible box
ROW_ON_SCREEN = """([sel, model, k]) => {
  const root = document.querySelector(sel);
  const view = root.querySelector('.virtual-table-viewport').getBoundingClientRect();
  const cells = Array.from(root.querySelectorAll('[role=gridcell]'));
  const hit = cells.find(c => +c.dataset.col === 1 && c.innerText.trim().replace(' *', '') === model);
  if (!hit) return null;
  const row = cells.filter(c => c.dataset.row === hit.dataset.row && +c.dataset.col < k)
                   .sort((a, b) => +a.dataset.col - +b.dataset.col);
  return row.map(c => { const r = c.getBoundingClientRect();
    return {text: c.innerText.trim(), seen: r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight
            && r.right <= window.innerWidth && r.right <= view.right + 1 && r.left >= view.left - 1}; });
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_submits_link_opens_the_board_with_the_bleu_only_row_ranked_on_the_first_screen(bleu_only_store, browser, viewport):
    _, url, link, bleu = bleu_only_store
    assert link.startswith(f"http://127.0.0.1:7860/?tab=iu_xray&model={TITLE_Q}"), link
    width = viewport["width"]
    page = browser.new_page(viewport=viewport)
    open_page(page, urljoin(url, link.removeprefix("http://127.0.0.1:7860/")))
    # ranked by BLEU, a metric the run has (it has no 1/RadCliQ-v1), and the page says so
    page.wait_for_function(f"() => ({READ_HEADERS})('#table-iu_xray').includes('BLEU ↑ ▼')", timeout=STATE_TIMEOUT_MS)
    note = wait_text(page, "#address-note", lambda t: "Ranked by BLEU" in t)
    assert "it has no 1/RadCliQ-v1 value" in note
    rank, n = bleu_rank_among_published(bleu)
    rows = wait_until(page, "table-iu_xray", lambda rows: len(rows) == 1 and rows[0][1] == TITLE)
    assert rows[0][0] == str(rank) and rows[0][2] == shown(bleu), (rows, rank, bleu)
    assert f"1 of {n} results matches the search." in wait_text(page, "#note-iu_xray", lambda t: "matches" in t)
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_39_submit_link_{width}.png"))
    cells = page.evaluate(ROW_ON_SCREEN, ["#table-iu_xray", TITLE, 3])
    assert cells and all(c["seen"] for c in cells), f"at {width} px MyModel's rank, name and BLEU are not all on the first screen: {cells}"
    # the address now holds the view itself: a reload reproduces it, a cleared search stays cleared
    address = wait_for_address(page, f"q={TITLE_Q}")
    assert "rank=bleu2" in address and "tab=iu_xray" in address
    assert "model=" not in address  # the search holds the model now: a model= left behind would focus again
    search_for(page, "")
    page.wait_for_function("() => !new URL(window.location.href).searchParams.has('q')", timeout=STATE_TIMEOUT_MS)
    page.reload()
    wait_view_ready(page)
    wait_until(page, "table-iu_xray", lambda rows: len(rows) >= 3)  # a search cleared stays cleared after a reload
    assert "model=" not in page.url and "q=" not in page.url
    # the full table, by the default ranking: the row says where it stands by BLEU
    open_page(page, url + "?tab=iu_xray")
    rows = wait_until(page, "table-iu_xray", lambda rows: len(rows) >= 3)
    page.evaluate("() => document.querySelector('#table-iu_xray .virtual-table-viewport').scrollTop = 1e6")
    rows = wait_until(page, "table-iu_xray", lambda rows: any(r[1] == TITLE for r in rows))
    mine = next(r for r in rows if r[1] == TITLE)
    assert mine[0] == "–" and mine[2] == f"– not scored · {tables_ordinal(rank)} of {n} by BLEU", mine
    page.evaluate("""() => [...document.querySelectorAll('#table-iu_xray [role=gridcell]')]
        .find(c => c.innerText.trim() === 'me / MyModel').scrollIntoView({block: 'center'})""")
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_39_unranked_row_{width}.png"))
    page.close()


def tables_ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def test_a_search_on_the_default_tab_names_the_tab_where_it_matches(bleu_only_store, browser):
    _, url, _, _ = bleu_only_store
    page = browser.new_page(viewport=PHONE)
    open_page(page, url)  # the page opens on ReXGradient, where MyModel has no result
    search_for(page, "MyModel")
    note = wait_text(page, "#note-rexgradient", lambda t: "It matches on" in t)
    assert note.startswith("No model or institution matches the search") and "It matches on IU-Xray (1 result)." in note
    link = page.locator("#note-rexgradient a", has_text="IU-Xray")
    assert link.get_attribute("href") == "?tab=iu_xray&q=MyModel"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_39_search_elsewhere_390.png"), full_page=True)
    link.click()  # opens that tab, in this window, with the same search
    wait_for_address(page, "tab=iu_xray")
    rows = wait_until(page, "table-iu_xray", lambda rows: len(rows) == 1 and rows[0][1] == TITLE)
    assert rows[0][1] == TITLE
    page.close()


# each standing line of the Model page's header that names BLEU: its text and whether it lies
# within the window's width
STANDING_SEEN = """() => Array.from(document.querySelectorAll('#model-header li'))
  .filter(li => li.innerText.includes('by BLEU'))
  .map(li => { li.scrollIntoView({block: 'center'}); const r = li.getBoundingClientRect();
               return {text: li.innerText.trim(), seen: r.left >= 0 && r.right <= window.innerWidth}; })"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_the_model_page_shows_where_the_run_stands_with_its_score_on_screen(bleu_only_store, browser, viewport):
    _, url, _, bleu = bleu_only_store
    rank, n = bleu_rank_among_published(bleu)
    page = browser.new_page(viewport=viewport)
    open_page(page, url + f"?model={TITLE_Q}")
    wait_text(page, "#model-header", lambda t: "Where it stands" in t)
    lines = page.evaluate(STANDING_SEEN)
    expected = f"IU-Xray · Findings: no 1/RadCliQ-v1 value (not scored); {tables_ordinal(rank)} of {n} by BLEU ({shown(bleu)})"
    assert [line["text"] for line in lines] == [expected]
    assert lines[0]["seen"], f"at {viewport['width']} px the score is off the screen"
    assert page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    rows = wait_until(page, "model-results", lambda rows: len(rows) == 1)
    radcliq = column(page, "#model-results", "1/RadCliQ-v1")
    assert rows[0][2] == "–" and rows[0][radcliq] == f"– not scored · {tables_ordinal(rank)} of {n} by BLEU"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"leaderboard_39_model_page_{viewport['width']}.png"), full_page=True)
    page.close()


def test_a_phones_first_screen_holds_more_rows(page_url, browser):
    """At 390 px the board's first screen shows at least six whole rows (it held 3–4)."""
    page = browser.new_page(viewport=PHONE)
    open_page(page, page_url)
    wait_until(page, "table-rexgradient", lambda rows: len(rows) >= 8)
    settle(page)
    seen = page.evaluate("""() => [...document.querySelectorAll('#table-rexgradient [role=gridcell][data-col="0"]')]
        .filter(c => { const r = c.getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }).length""")
    page.screenshot(path=str(ARTIFACTS / "leaderboard_39_first_screen_390.png"))
    assert seen >= 6, f"only {seen} rows on a phone's first screen"
    page.close()
