"""report.html as a person sees it (issue 21 point 5): every table whole at 1,400 px, rank
dots clear of the frame, and the statistical notes naming the columns the tables have."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from rexrank.analysis.figures import fig_rank_intervals
from rexrank.cli.main import main
from support.analysis_files import write_runs
from support.browser import CHROMIUM, needs_chromium


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    paths = write_runs(tmp, systems=("alpha-model-with-a-long-name", "beta", "gamma", "delta"))
    out = tmp / "out"
    assert main(["analyze", *map(str, paths), "--out", str(out), "--bootstrap", "40", "--no-progress"]) == 0
    return out


def test_the_notes_name_only_columns_the_tables_have(report):
    page = (report / "report.html").read_text()
    notes = page.split("Statistical notes", 1)[1]
    named = set(re.findall(r"<code>([a-z_]+)</code>", notes))
    columns = set()
    for csv in (report / "tables").glob("*.csv"):
        columns |= set(pd.read_csv(csv, nrows=0).columns)
    assert named and named <= columns, named - columns


def test_rank_dots_have_room_inside_the_frame():
    ranks = pd.DataFrame({"system": ["a", "b", "c"], "rank": [1, 2, 3], "rank_low": [1, 1, 3], "rank_high": [2, 2, 3]})
    ax = fig_rank_intervals(ranks, metric="bleu2").axes[0]
    bottom, top = ax.get_ylim()
    assert (top, bottom) == (-0.5, 2.5)  # first row at y=0, last at y=2: half a row free on each side
    left, right = ax.get_xlim()
    assert left < 1 and right > 3


@pytest.mark.browser
@needs_chromium
def test_every_table_is_whole_at_1400_px(report, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto((report / "report.html").as_uri())
        clipped = page.evaluate("""() => [...document.querySelectorAll('.scroll')]
            .filter(d => d.scrollWidth > d.clientWidth + 1)
            .map(d => d.closest('details').querySelector('summary b').textContent)""")
        page.screenshot(path=str(tmp_path / "report-1400.png"), full_page=True)
        browser.close()
    assert clipped == []


@pytest.mark.browser
@needs_chromium
def test_the_report_fits_a_phones_width_and_its_figures_scale_down(report):
    """Issue 39: at a phone's 390 px the page does not scroll sideways; every figure is as
    wide as the screen at most (wide tables scroll in their own box). (1,400 px: above.)"""
    width = 390
    from playwright.sync_api import sync_playwright

    from support.paths import PROJECT_ROOT

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 844})
        page.goto((report / "report.html").as_uri())
        fit = page.evaluate("""() => ({
            page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
            figures: [...document.querySelectorAll('figure img')].map(i => Math.round(i.getBoundingClientRect().right)),
            screen: window.innerWidth})""")
        (PROJECT_ROOT / "test-artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(PROJECT_ROOT / "test-artifacts" / f"analysis_report_{width}.png"), full_page=True)
        browser.close()
    assert fit["page"] <= 0, f"at {width} px the report scrolls sideways by {fit['page']} px"
    assert fit["figures"] and max(fit["figures"]) <= fit["screen"], fit
