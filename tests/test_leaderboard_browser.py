"""The leaderboard in a real headless Chromium (Debian `chromium`, driven by Playwright):
open the page, switch test set and track, re-rank by a metric, search, and check the rows
shown against the published CSVs. Screenshots go to test-artifacts/."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import PROJECT_ROOT, shared_path

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expected_models(csv_name: str, column: str, institution: str | None = None) -> list[str]:
    csv = pd.read_csv(shared_path("data", "published", "current", csv_name))
    csv["Model Name"] = csv["Model Name"].str.replace("_", "-")
    if institution:
        csv = csv[csv["Institution"] == institution]
    return csv.sort_values([column, "Model Name"], ascending=[False, True], na_position="last")["Model Name"].tolist()


def models_shown(rows) -> list[str]:
    return [r[1].replace(" *", "") for r in rows]


def settle(page, timeout_ms: int = 30_000) -> None:
    """Wait until no component shows Gradio's "processing" overlay (before a screenshot)."""
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=status-tracker]'))"
        ".every(e => e.classList.contains('hide') || e.offsetParent === null)",
        timeout=timeout_ms,
    )


def wait_until(page, elem_id: str, done, timeout: float = 30.0):
    """Poll a table's rendered rows until `done(rows)`; returns the rows shown last (the
    caller's assertion then reports what was on screen)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = page.evaluate(READ_ROWS, f"#{elem_id}")
        if done(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.25)


def wait_rows(page, elem_id: str, expected: list[str], *, full: bool, timeout: float = 30.0):
    """Until the model column shows `expected` (all rows when `full`, else a prefix of at
    least 5, as the grid renders only what is visible)."""
    def done(rows):
        shown = models_shown(rows)
        if full:
            return shown == expected
        return len(shown) >= min(5, len(expected)) and shown == expected[: len(shown)]

    return wait_until(page, elem_id, done, timeout)


@pytest.fixture(scope="module")
def page_url():
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.published import load_seed_records
    from rexrank.leaderboard.source import LeaderboardSource

    demo = build_app(LeaderboardSource.from_records(load_seed_records(), label="the published ReXrank results"))
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


def test_browse_switch_rerank_search(page_url):
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright Python package (test extra)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(page_url)

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
            assert rows[-1][0] == "–" and rows[-1][11] == "–"  # UniRG-CXR: no FineRadScore, unranked
            best = pd.read_csv(shared_path("data", "published", "current", "result_iu_xray.csv"))["1/FineRadScore"].max()
            assert rows[0][11] == f"{best:.3f}"
            bold = page.locator("#table-iu_xray [role=gridcell][data-row='0'][data-col='11'] strong")
            assert bold.inner_text() == f"{best:.3f}"  # best value highlighted
            settle(page)
            page.screenshot(path=str(ARTIFACTS / "leaderboard_3_iu_fi_fineradscore.png"))

            # search by institution
            page.locator("#search textarea, #search input").first.fill("Stanford")
            expected = expected_models("result_iu_xray.csv", "1/FineRadScore", institution="Stanford")
            rows = wait_rows(page, "table-iu_xray", expected, full=True)
            assert models_shown(rows) == expected
            settle(page)
            page.screenshot(path=str(ARTIFACTS / "leaderboard_4_search.png"))

            # another test set keeps the chosen track and ranking
            page.get_by_role("tab", name="MIMIC-CXR").click()
            expected = expected_models("result_mimiccxr.csv", "1/FineRadScore", institution="Stanford")
            rows = wait_rows(page, "table-mimic_cxr", expected, full=True)
            assert models_shown(rows) == expected
        finally:
            browser.close()
