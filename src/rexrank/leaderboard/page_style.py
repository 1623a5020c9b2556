"""How the leaderboard's grids look and what a header click does: the page's CSS, column
widths, and the few lines of browser script gradio has no setting for.

gradio 6's grid draws in a monospace font and breaks header words anywhere; its header
click only selects the header, and its ⋮ menu would sort the formatted text ("0.5 ± 0.1",
"**0.6**"). Here: the page's own font, headers that wrap between words only, no ⋮ menu,
and a click on a metric's header ranks the leaderboard by that metric (on the server, so
rank, bold, CSV and every tab follow).
"""
from __future__ import annotations

from dataclasses import dataclass

TABLE_CLASS = "rexrank-table"


@dataclass(frozen=True)
class GridLayout:
    """Column widths of one kind of grid, in px: gradio applies a percentage width to the
    headers only, so on a phone the cells would be squashed under wide headers; in px a
    phone scrolls the grid sideways (rank and model pinned)."""

    css_class: str
    columns: tuple[int, ...]

    @property
    def widths(self) -> list[str]:
        return [f"{px}px" for px in self.columns]


# each column at least its longest header word in the bold 14 px header font plus 16 px
# padding (more for names); each grid within the ~1,320 px a 1,400 px screen leaves it
OVERVIEW_GRID = GridLayout("rexrank-overview", (56, 312, 312, 312, 312))  # the full width, as the results grid
RESULTS_GRID = GridLayout("rexrank-results", ())  # a test set's grid: widths per table (results_layout)
MODEL_GRID = GridLayout("rexrank-model", ())  # the Model tab's grid: widths per model (model_layout)

# A test-set grid's columns depend on the view (shown metrics, ranking metric, whether n and
# tiers exist), so their widths are computed per table. A metric's header stays on one line
# ("BLEU ↑ ▼" must not wrap): its width is the whole header's, the ▼ (▲) only on the ranking
# metric's. Rank, model and the ranking metric come first and fit a 390 px phone together.
RESULTS_FIXED = {"Rank": 48, "Model": 130, "Tier": 44, "Institution": 120, "Date": 48, "n": 48, "Source": 84}
METRIC_WIDTHS = {  # "NAME ↑" measured in the header font (Chromium), plus 20 px of padding
    "bleu2": 64, "bertscore": 94, "sembscore": 102, "radgraph": 94, "radcliq_v1_inv": 112,
    "ratescore": 98, "green": 74, "fineradscore_inv": 128,
}
SORT_MARK_WIDTH = 12  # " ▼"
PX_PER_CHAR = 9  # a column added since (rouge, crimson, ...): its header's characters at most this wide
CI_VALUE_WIDTH = 104  # "**0.833** ± 0.016" on one line (the ± joined by no-break spaces), plus padding


def metric_width(key: str, display: str, *, ranking: bool = False, with_ci: bool = False) -> int:
    """A metric column's width: its header on one line, and a value with its CI where it has one."""
    px = METRIC_WIDTHS.get(key, PX_PER_CHAR * (len(display) + 2) + 16) + (SORT_MARK_WIDTH if ranking else 0)
    return max(px, CI_VALUE_WIDTH) if with_ci else px


def results_layout(slots, rank_by: str, displays: dict[str, str], ci_columns=frozenset()) -> GridLayout:
    """Widths of a test-set grid whose columns are `slots` (`tables.display_slots`: fixed
    names and metric keys, in order), ranked by `rank_by`; `displays`: key -> header name;
    `ci_columns`: the metric columns where a row has a CI."""
    def width(slot: str) -> int:
        if slot in RESULTS_FIXED:
            return RESULTS_FIXED[slot]
        return metric_width(slot, displays[slot], ranking=slot == rank_by, with_ci=slot in ci_columns)

    return GridLayout(RESULTS_GRID.css_class, tuple(width(s) for s in slots))


MODEL_FIXED = {"Test set": 104, "Track": 92, "Rank": 64, "Trained on it": 78, "Source": 76, "Per-study data": 96}


def model_layout(headers, keys: dict[str, str]) -> GridLayout:
    """Widths of the Model tab's grid, whose columns follow the model's results: `headers`:
    its columns as (name, has a value with a CI); `keys`: a metric column's name -> its key."""
    return GridLayout(MODEL_GRID.css_class, tuple(
        MODEL_FIXED.get(name) or metric_width(keys[name], name, with_ci=with_ci) for name, with_ci in headers))


PAGE_CSS = "\n".join([
    # gradio's SemiBold font file holds a few glyphs only (the others fall back to another
    # font, visibly): semibold and bold text use the complete Bold file gradio also ships
    *(f'@font-face {{ font-family: "Source Sans Pro"; font-weight: {weight}; font-style: normal; '
      'src: url("static/fonts/SourceSansPro/SourceSansPro-Bold.woff2") format("woff2"); }' for weight in (600, 700)),
    f".{TABLE_CLASS} table.header-table, .{TABLE_CLASS} div.virtual-row {{ font-family: var(--font); }}",
    f".{TABLE_CLASS} th span.header {{ word-break: normal; overflow-wrap: normal; hyphens: none; }}",
    f".{TABLE_CLASS} button.cell-menu-button {{ display: none !important; }}",  # gradio shows it on hover and focus
    f'.{TABLE_CLASS} th[title*="↑"], .{TABLE_CLASS} th[title*="↓"] {{ cursor: pointer; }}',
    # a metric's header on one line: its column is as wide as the whole header (results_layout)
    f'.{TABLE_CLASS} th[title*="↑"] span.header, .{TABLE_CLASS} th[title*="↓"] span.header {{ white-space: nowrap; }}',
    # gradio's scroll-to-top button sits on the grid's last row; the page scrolls anyway
    f".{TABLE_CLASS} button.scroll-top-button {{ display: none !important; }}",
    # the About tab's metric table: gradio's prose breaks words anywhere ("BL|EU" on a phone);
    # words stay whole and a table wider than the screen scrolls sideways in its own box
    "#about-text table { display: block; overflow-x: auto; border: none; padding: 0; }",
    "#about-text th, #about-text td { word-break: normal; overflow-wrap: normal; }",
    # a phone's first screen: a smaller title, legend and tabs, closer rows, so that the table
    # starts higher and more of its rows are in sight (gradio sizes them for a desktop)
    "@media (max-width: 640px) {",
    "  #legend h1 { font-size: 1.3rem; line-height: 1.25; margin: 0 0 0.25em; }",
    "  #legend p { font-size: 13px; line-height: 1.35; margin: 0; }",
    "  .tab-container button[role=tab] { padding: 2px 5px; font-size: 13px; height: 28px; }",
    "  .tab-container { height: auto; gap: 0; }",
    "  #track label { padding: 4px 8px; }",
    "  #track, #rank-by { padding-top: 6px; padding-bottom: 6px; }",
    # a table's note takes the screen's width, the CSV button goes under it (beside it, the
    # note was a narrow column of eight lines)
    '  .row:has(> [id^="note-"]) { flex-wrap: wrap; }',
    '  .row > [id^="note-"] { flex: 1 1 100% !important; min-width: 100% !important; }',
    f"  .{TABLE_CLASS} [role=gridcell] .cell-wrap {{ padding-top: 3px; padding-bottom: 3px; line-height: 1.3; font-size: 13px; }}",
    f"  .{TABLE_CLASS} [role=gridcell] .cell-wrap * {{ font-size: 13px; }}",
    "}",
])

# A link to another view of this page ("?tab=iu_xray&q=…": where a search matches, a model's
# own page) opens here: gradio's markdown opens every link in a new window.
IN_PAGE_LINKS_JS = """
document.addEventListener('click', (event) => {
  const link = event.target.closest('a[href^="?"]');
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  event.stopPropagation();
  window.location.assign(link.getAttribute('href'));
}, true);
"""

# gradio's grid stops header clicks from bubbling: listen in the capture phase. `trigger`
# sends the header's text to the server (gr.HTML's event bridge).
HEADER_CLICK_JS = f"""
document.addEventListener('click', (event) => {{
  const th = event.target.closest('.{TABLE_CLASS} th[role=columnheader]');
  if (!th || event.target.closest('a')) return;
  trigger('click', {{header: th.getAttribute('title') || th.innerText}});
}}, true);
{IN_PAGE_LINKS_JS}"""
