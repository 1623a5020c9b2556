"""The headless Chromium of the browser tests (tests/leaderboard/test_browser_*.py), one per test
file."""
from __future__ import annotations

import pytest

from support.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS


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
