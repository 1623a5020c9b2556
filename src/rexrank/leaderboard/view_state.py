"""The leaderboard's view in the page's address, so that a link reproduces it.

`?tab=iu_xray&track=findings_impression&rank=bleu2&q=stanford&hide_trained=1&source=submitted
&columns=bleu2,green&model=NAME`: each parameter is left out while it has its default. The
browser writes them as the reader changes the view (VIEW_URL_JS, TAB_URL_JS); a page load
reads them back (`parse_view`) and sets the controls. A value the page does not know is
ignored and named in the status line.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlencode

from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, METRIC_KEYS, TRACK_LABELS
from rexrank.leaderboard.tables import DEFAULT_COLUMNS, SOURCES, Filters
from rexrank.results_schema import DEFAULT_RANK_KEY

TABS = (*LEADERBOARD_TEST_SETS, "overview", "model", "plots", "about", "submit")
DEFAULT_TAB = TABS[0]  # the page opens on the first test set's ranked table
DEFAULT_TRACK = "findings"
NO_SOURCE = "none"


@dataclass
class ViewState:
    tab: str | None = None  # None: leave the tabs as they are (DEFAULT_TAB)
    track: str = DEFAULT_TRACK
    rank_by: str = DEFAULT_RANK_KEY
    query: str = ""
    hide_trained: bool = False
    sources: list[str] = field(default_factory=lambda: list(SOURCES))
    columns: list[str] = field(default_factory=lambda: list(DEFAULT_COLUMNS))
    problems: list[str] = field(default_factory=list)

    @property
    def filters(self) -> Filters:
        return filters_from(self.hide_trained, self.sources)


def filters_from(hide_trained, sources) -> Filters:
    """Filters from the page's controls (a checkbox and the sources chosen)."""
    return Filters(hide_trained=bool(hide_trained), sources=tuple(s for s in SOURCES if s in (sources or ())))


def parse_view(params) -> ViewState:
    """The view a page address asks for (`params`: its query parameters, a mapping)."""
    state = ViewState()
    get = lambda name: (params.get(name) or "").strip()  # noqa: E731
    if get("tab"):
        if get("tab") in TABS:
            state.tab = get("tab")
        else:
            state.problems.append(f"tab (known: {', '.join(TABS)})")
    if get("track"):
        if get("track") in TRACK_LABELS:
            state.track = get("track")
        else:
            state.problems.append(f"track (known: {', '.join(TRACK_LABELS)})")
    if get("rank"):
        if get("rank") in METRIC_KEYS:
            state.rank_by = get("rank")
        else:
            state.problems.append(f"rank (known: {', '.join(METRIC_KEYS)})")
    state.query = get("q")
    if get("hide_trained"):
        state.hide_trained = get("hide_trained") in ("1", "true", "yes")
    if get("source"):
        asked = [s.strip() for s in get("source").split(",") if s.strip()]
        unknown = [s for s in asked if s not in (*SOURCES, NO_SOURCE)]
        if unknown:
            state.problems.append(f"source (known: {', '.join(SOURCES)})")
        state.sources = [s for s in SOURCES if s in asked] if not unknown else state.sources
    if get("columns"):
        asked = [c.strip() for c in get("columns").split(",") if c.strip()]
        unknown = [c for c in asked if c not in METRIC_KEYS]
        if unknown:
            state.problems.append(f"columns (known: {', '.join(METRIC_KEYS)})")
        state.columns = [c for c in METRIC_KEYS if c in asked]
    return state


def view_link(tab: str, track: str = DEFAULT_TRACK, rank_by: str = DEFAULT_RANK_KEY, query: str = "",
              filters: Filters = Filters(), columns=DEFAULT_COLUMNS) -> str:
    """The address of a view, relative to the page ("?tab=iu_xray&q=MyModel"): the parameters
    VIEW_URL_JS writes, each left out while it has its default."""
    params = {"tab": "" if tab == DEFAULT_TAB else tab,
              "track": "" if track == DEFAULT_TRACK else track,
              "rank": "" if rank_by == DEFAULT_RANK_KEY else rank_by,
              "q": (query or "").strip(),
              "hide_trained": "1" if filters.hide_trained else ""}
    if set(filters.sources) != set(SOURCES):
        params["source"] = ",".join(filters.sources) or NO_SOURCE
    if columns is not None and set(columns) != set(DEFAULT_COLUMNS):
        params["columns"] = ",".join(columns)
    return "?" + urlencode({k: v for k, v in params.items() if v})


def describe_problems(problems: list[str]) -> str:
    # the parameters only, never their values: a link's text is not repeated on the page
    return ("Unknown values ignored in the page's address: " + "; ".join(problems) + ".") if problems else ""


# Until the page load has read the address (VIEW_READY_JS, the load chain's last step), the
# controls and the Overview tab do not write to it: gradio sets them as the page opens, which
# would erase what a link asks for.
READY = "window.rexrankViewReady"

# Writes the controls' values into the address (replaceState: no new history entry per
# keystroke); arguments in the order of the app's view controls.
VIEW_URL_JS = f"""(track, rank, q, hideTrained, sources, columns) => {{
  if (!{READY}) return;
  const url = new URL(window.location.href), p = url.searchParams;
  const put = (key, value) => {{ if (value === '' || value == null) p.delete(key); else p.set(key, value); }};
  const same = (a, b) => a.length === b.length && a.every(v => b.includes(v));
  put('track', track === {json.dumps(DEFAULT_TRACK)} ? '' : track);
  put('rank', rank === {json.dumps(DEFAULT_RANK_KEY)} ? '' : rank);
  put('q', (q || '').trim());
  put('hide_trained', hideTrained ? '1' : '');
  sources = sources || [];
  put('source', same(sources, {json.dumps(list(SOURCES))}) ? '' : (sources.length ? sources.join(',') : {json.dumps(NO_SOURCE)}));
  columns = columns || [];
  put('columns', same(columns, {json.dumps(list(DEFAULT_COLUMNS))}) ? '' : columns.join(','));
  window.history.replaceState(window.history.state, '', url);
}}"""


# The load chain's last step, given the view's controls: from now on the view is written to
# the address, starting with the view the load has set. A link's `model=` that the load has
# made the search (the search box holds it, the address no `q`: app.on_load's focus) leaves
# the address: `q=` and `rank=` reproduce the view, and a search cleared stays cleared after
# a reload (a `model=` left behind would focus the table again).
VIEW_READY_JS = f"""(...view) => {{
  {READY} = true;
  const [, , q] = view;  // VIEW_URL_JS's arguments
  const url = new URL(window.location.href), p = url.searchParams, model = (p.get('model') || '').trim();
  if (model && !(p.get('q') || '').trim() && (q || '').trim() === model) {{
    p.delete('model');
    window.history.replaceState(window.history.state, '', url);
  }}
  ({VIEW_URL_JS})(...view);
}}"""


def tab_url_js(tab: str) -> str:
    """Writes `tab` into the address (left out for DEFAULT_TAB, the first tab)."""
    value = "" if tab == DEFAULT_TAB else tab
    wait = f"if (!{READY}) return;" if not value else ""  # gradio selects the first tab as the page opens
    return f"""() => {{
  {wait}
  const url = new URL(window.location.href);
  if ({json.dumps(value)}) url.searchParams.set('tab', {json.dumps(value)}); else url.searchParams.delete('tab');
  window.history.replaceState(window.history.state, '', url);
}}"""


MODEL_URL_JS = f"""(model) => {{
  if (!{READY}) return;
  const url = new URL(window.location.href);
  if (model) url.searchParams.set('model', model); else url.searchParams.delete('model');
  window.history.replaceState(window.history.state, '', url);
}}"""
