"""What the leaderboard's browser tests share (tests/leaderboard/test_browser_*.py): the headless
Chromium they drive, the marks that start their files first, the leaderboard served on a free
port, and the page reads and waits (rows of a virtualised grid, layout, the next change)."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd
import pytest

from support.paths import PROJECT_ROOT, shared_path

# Debian's chromium-headless-shell (the old headless mode, which playwright itself runs for
# headless): the same Blink as `chromium --headless`, without the browser UI that mode still
# builds, so a third less of Chromium's CPU per test; the binary itself, as the /usr/bin wrapper does not exec
CHROMIUM = Path("/usr/lib/chromium/chromium-headless-shell")
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

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"headless browser test needs Debian's headless Chromium at {CHROMIUM} (apt-get install chromium-headless-shell)")
# each browser test file's pytestmark: tests/conftest.py starts `browser` files first
BROWSER_MARKS = [pytest.mark.browser, needs_chromium]

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
    servers live until its end. Every 50 ms (100 ms) costs under 1 % (10 ms: 2 %); an event
    waits at most 50 ms more to start, and these apps report no progress.

    Gradio's own check that the page answers gives up at the first request slower than 3 s
    ("When localhost is not accessible, a shareable link must be created"), which a loaded
    machine's test workers met; `_frontend=False` skips it, and the page is waited for here."""
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                            _frontend=False)
    wait_for_page(url)
    demo._queue.sleep_when_free = 0.05
    demo._queue.progress_update_sleep_when_free = 0.1
    return url


def wait_for_page(url: str) -> None:
    """Until the app's page answers 200 (each try may take long on a loaded machine)."""
    import httpx

    from support.dispatch_fixtures import wait_for

    def answers() -> bool:
        try:
            return httpx.get(url, timeout=30).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answers, what=f"the app at {url} to answer")


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
