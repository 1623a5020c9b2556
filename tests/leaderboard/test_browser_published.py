"""The published leaderboard in a real headless Chromium (Debian `chromium`, driven by
Playwright): open the page, switch test set and track, re-rank by a metric (menu and header
click), search, download a table, open a model's page by its link, and check what is on
screen against the published CSVs, at 1,400 px and at a phone's 390 px. Screenshots go to
test-artifacts/."""
from __future__ import annotations

import time

import pandas as pd
import pytest

from support.browser import (
    ARTIFACTS, BROKEN_WORDS, BROWSER_MARKS, DESKTOP, LAYOUT, PHONE, READ_HEADERS, READ_ROWS,
    STATE_TIMEOUT_MS, column, expected_models, models_shown, open_page, open_tab, published,
    search_for, serve, settle, wait_rows, wait_text, wait_until,
)

pytestmark = BROWSER_MARKS


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
