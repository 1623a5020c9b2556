"""Issues 31 and 39 in a real headless Chromium: the first screen is a leaderboard, a
submitter reaches their row from the link `rexrank submit` printed, a BLEU-only run is ranked
and found on the first screen, a search names the tab where it matches, and the model page
says where the run stands."""
from __future__ import annotations

from urllib.parse import urljoin

import pytest

from support.browser import (
    ARTIFACTS, BROWSER_MARKS, DESKTOP, LAYOUT, PHONE, READ_HEADERS, STATE_TIMEOUT_MS, column,
    open_page, published, search_for, serve, settle, wait_for_address, wait_text, wait_until,
    wait_view_ready,
)
from support.paths import shared_path

pytestmark = BROWSER_MARKS


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
    # the uploaded file's row (its name is drawn as two spans, stem and extension: a text match
    # found only the upload's passing progress line, which a loaded machine can draw too late)
    page.locator('#submit-file td.filename[aria-label="example_predictions.json"]').wait_for(
        state="visible", timeout=STATE_TIMEOUT_MS)
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
