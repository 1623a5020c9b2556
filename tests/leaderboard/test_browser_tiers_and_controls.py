"""Issue 21 in a real headless Chromium: tiers and n on the board, the view's controls in
the address (a link reproduces the view), the progress plot per test set and track, and the
layout of sorted headers, the last row, the queue and a model's page, at 1,400 and 390 px."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rexrank.results_schema import COLUMNS_BY_KEY
from support.browser import (
    ARTIFACTS, BROWSER_MARKS, DESKTOP, LAYOUT, PHONE, READ_HEADERS, STATE_TIMEOUT_MS, column,
    models_shown, open_page, open_tab, published, search_for, serve, settle, show_view_options,
    wait_for_address, wait_rows, wait_text, wait_until,
)
from support.paths import shared_path

pytestmark = BROWSER_MARKS


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
