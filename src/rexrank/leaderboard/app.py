"""The ReXrank leaderboard as a Gradio Blocks app (gradio 6, built-in components only).

Layout: the track and the ranking metric above the tabs: one tab per test set (the page opens
on the first: a ranked table is the first screen), Overview, Model, Plots, About, Submit; search,
filters and column choice under the tables. Every table is computed by
`rexrank.leaderboard.tables` from the source's frame; this module only wires components.
The view (tab, track, ranking metric, search, filters, columns, model) lives in the page's
address (`rexrank.leaderboard.view_state`): a link reproduces it; `?model=NAME` alone opens
the Model tab on that model.

Named API endpoints (for gradio_client): /views, /leaderboard, /model, /plots, /progress,
/submit, /status, /queue, /reload. `/submit` takes the submitter's Hub token as gradio's OAuth
token (the Space's sign-in, or `Client(..., oauth_token=...)`): `rexrank submit --leaderboard`.
"""
from __future__ import annotations

# at module level, not in build_app: gradio reads the event functions' type hints (gr.Request,
# gr.EventData, gr.OAuthProfile) through this module's globals to know what to fill in
from dataclasses import dataclass

import gradio as gr
import pandas as pd

from rexrank.leaderboard import tables
from rexrank.leaderboard.about import about_markdown
from rexrank.leaderboard.downloads import CsvFiles, PreparedCsv
from rexrank.leaderboard.model_page import (
    MODEL_QUERY_PARAMETER,
    NOT_FOUND_PICK,
    RESULT_COLUMNS,
    SIGNIFICANCE_COLUMNS,
    model_choices,
    model_header,
    model_results,
    model_standing,
    neighbour_significance,
)
from rexrank.leaderboard.page_style import (
    HEADER_CLICK_JS,
    MODEL_GRID,
    OVERVIEW_GRID,
    PAGE_CSS,
    RESULTS_GRID,
    TABLE_CLASS,
    GridLayout,
    model_layout,
    results_layout,
)
from rexrank.leaderboard.progress import fig_progress, progress_points
from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, TEST_SET_LABELS, TRACK_LABELS, coverage_notes
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.leaderboard.submit import (
    describe_error,
    describe_request,
    error_text,
    file_request,
    is_hub_store,
    public_request,
)
from rexrank.leaderboard.view_state import (
    MODEL_URL_JS,
    VIEW_READY_JS,
    VIEW_URL_JS,
    describe_problems,
    filters_from,
    parse_view,
    tab_url_js,
    view_link,
)
from rexrank.results_schema import COLUMNS_BY_KEY, DEFAULT_RANK_KEY
from rexrank.store.names import display
from rexrank.submissions import ID_COLUMNS, SUBMISSION_JSON_FIELD, TEXT_COLUMNS

TITLE = "ReXrank: chest X-ray report generation leaderboard"
# the legend above the tables: short (a phone shows the table under it), and only what every
# table has; CIs, n and tiers are named by the note above a table that has them (the
# published rows have none); the rest is in About
LEGEND = ("Default ranking 1/RadCliQ-v1 (the ReXrank Challenge: 1/FineRadScore); click a metric's header to rank by it. "
          f"\\{tables.TRAINED_MARK} marks a model trained on the test set.")
TRACK_CHOICES = [(label, key) for key, label in TRACK_LABELS.items()]
QUEUE_COLUMNS = ["id", "model_name", "submitter", "test_set", "track", "status", "submitted_time", "error"]
METRIC_NAMES = {k: c.display for k, c in COLUMNS_BY_KEY.items()}
METRIC_KEYS_BY_NAME = {c.display: k for k, c in COLUMNS_BY_KEY.items()}
QUEUE_HEADERS = ["Request", "Model", "Submitter", "Test set", "Track", "Status", "Submitted (UTC)", "Error"]


def queue_table(requests: list[dict]) -> pd.DataFrame:
    """The Submit tab's queue: each request's model named as the board will name it
    ("namespace / name"; a request filed before namespaces, under its submitter)."""
    from rexrank.store.accounts import namespace_of
    from rexrank.store.names import model_title

    def cell(request: dict, column: str) -> str:
        if column == "model_name":
            return model_title(display(namespace_of(request).name), display(request.get("model_name") or ""))
        return display(request.get(column) or "")

    return pd.DataFrame([[cell(r, c) for c in QUEUE_COLUMNS] for r in requests], columns=QUEUE_HEADERS)


@dataclass(frozen=True)
class SizedGrid:
    """A test-set grid's table and its column widths (which follow the columns shown)."""

    table: pd.DataFrame
    widths: list[str]


def _status(source: LeaderboardSource) -> str:
    # keyed by the problems too: a damaged per-study file found while a page is built is
    # listed from then on, without discarding the frame's other views
    return source.cached(("status", len(source.problems)), lambda: _status_text(source))


def _status_text(source: LeaderboardSource) -> str:
    frame = source.frame()
    text = f"{tables.plural(len(frame), 'result')} from {source.label}."
    notes = coverage_notes(frame)  # values computed on fewer studies than the test set has
    if notes:
        text += "\n\nComputed on fewer studies than the test set has (n shown):\n" + "\n".join(
            f"- {tables.md_escape(n)}" for n in notes[:20])
    if source.problems:
        shown = "\n".join(f"- {tables.md_escape(p)}" for p in source.problems[:20])
        more = f"\n- … and {len(source.problems) - 20} more" if len(source.problems) > 20 else ""
        text += f"\n\n⚠️ {len(source.problems)} result record(s) could not be shown:\n{shown}{more}"
    return text


def _formats_help() -> str:
    """The upload formats, from the validator's own column names (as the README lists them)."""
    ids = "/".join(f"`{c}`" for c in ID_COLUMNS)
    texts = "/".join(f"`{c}`" for c in TEXT_COLUMNS)
    return (
        f"Formats: CSV (comma-, tab- or semicolon-separated)/JSONL (or a JSON list) with {ids} and "
        f"{texts} columns; a JSON object `{{\"study id\": \"prediction\", ...}}`; ReXrank submission JSON (the test "
        f"JSON plus `{SUBMISSION_JSON_FIELD}`); or parquet with the same columns. A `datasets` dataset: push it "
        "to the Hub (`Dataset.push_to_hub`) and name its repo here. Columns with other names: rename them (the "
        "`--id-column`/`--prediction-column` options are `rexrank score`'s and the organisers' `rexrank submit "
        "--store`'s). From the command line: `rexrank submit --leaderboard ORG/SPACE --predictions hf://USER/REPO` "
        "(as the account of your HF_TOKEN)."
    )


def _plots(source: LeaderboardSource, test_set: str, track: str):
    """(correlation figure, boxplot figure, note); figures only where their data exist."""
    try:
        from rexrank.analysis.figures import fig_metric_boxplots, fig_metric_correlation
    except ImportError as exc:  # the analysis extra (matplotlib, scipy) is not installed
        return None, None, f"Plots need the analysis extra (`pip install rexrank[analysis]`): {exc}"
    frame = source.frame()
    notes = []
    corr = None
    table = tables.system_table(frame, test_set, track).dropna(axis=1, how="all")
    if len(table) >= 3:
        corr = fig_metric_correlation(
            table, title=f"Metric correlation across systems: {TEST_SET_LABELS.get(test_set, test_set)}, {TRACK_LABELS[track]}"
        )
    else:
        notes.append(f"Correlation needs at least 3 systems on {test_set}/{track} ({len(table)} found).")
    by_test_set = {
        TEST_SET_LABELS.get(t, t): tables.system_table(frame, t, track) for t in LEADERBOARD_TEST_SETS
    }
    by_test_set = {k: v for k, v in by_test_set.items() if len(v)}
    box = fig_metric_boxplots(by_test_set, title=f"Metrics across systems, per test set ({TRACK_LABELS[track]})") if by_test_set else None
    if box is None:
        notes.append(f"No results in the {TRACK_LABELS[track]} track.")
    return corr, box, "\n".join(notes)


def _progress(source: LeaderboardSource, test_set: str, track: str, rank_by: str, filters):
    """(figure or None, note): the best score by date on one test set and track."""
    try:
        import matplotlib  # noqa: F401  (the analysis extra)
    except ImportError as exc:
        return None, f"Plots need the analysis extra (`pip install rexrank[analysis]`): {exc}"
    points, left_out = progress_points(source.frame(), test_set, track, rank_by, filters)
    metric = COLUMNS_BY_KEY[rank_by].display
    where = f"{TEST_SET_LABELS.get(test_set, test_set)} / {TRACK_LABELS[track]}"
    if points.empty:
        return None, f"No result on {where} has a date and a {metric} value."
    note = f"{tables.plural(len(points), 'result')} on {where} by date; a date given as a year alone is placed at 1 January."
    if left_out:
        note += f" {tables.plural(left_out, 'result')} without a date or a {metric} value left out."
    return fig_progress(points, test_set, track, rank_by), note


def _public_status(store, request_id: str) -> dict:
    """`/status`: {"found", "request" (public fields), "results", "notes", "error"}."""
    from rexrank.backend.public_door import status_answer

    try:
        request = store.get_request((request_id or "").strip())
        result = (store.get_result(request["result_id"], test_set=request["test_set"], track=request["track"])
                  if request.get("result_id") else None)
    except Exception as exc:  # an unknown id, an unreadable record: a message, not a traceback
        return {"found": False, "error": error_text(exc), "request": None, "results": None}
    return status_answer(request, result)


def build_app(source: LeaderboardSource):
    store = source.store
    hub = is_hub_store(store)
    tab_test_sets = [t for t in LEADERBOARD_TEST_SETS]
    csv_files = CsvFiles()

    def per_study(result_id: str):
        return source.per_study(result_id, refresh=False)  # of the frame the view is built from

    def page(track: str, rank_by: str, query: str, hide_trained: bool = False, sources=tables.SOURCES,
             columns=tables.DEFAULT_COLUMNS) -> list:
        """Overview grid and CSV, then per test set: note, grid, CSV, then the overview's note
        (the `views` outputs but status)."""
        filters, columns = filters_from(hide_trained, sources), tuple(columns or ())
        built = source.cached(("page", track, rank_by, query, filters, columns),
                              lambda: build_page(track, rank_by, query, filters, columns))
        # the CSV files are written (or found, by content) on every call: the folder keeps a
        # bounded number, so a path remembered with the views may have been removed since
        return [csv_files.write_prepared(item) if isinstance(item, PreparedCsv) else item for item in built]

    def build_page(track: str, rank_by: str, query: str, filters: tables.Filters, columns: tuple) -> list:
        # tables (and tiers) of test sets without a new result since the last page are kept (part cache)
        frame, cached = source.part_cache()
        # a search that matches nothing on a tab names the tabs where it does, with the same view there
        link = lambda test_set: view_link(test_set, track, rank_by, query, filters, columns)  # noqa: E731
        views = tables.page_views(frame, track, rank_by, query, test_sets=tab_test_sets, cached=cached,
                                  filters=filters, columns=columns, per_study=per_study, p_cache=source.pair_p,
                                  link=link)
        suffix = f"{track}_by-{rank_by}" + ("_filtered" if filters.describe() else "") + ("_search" if (query or "").strip() else "")
        out = [views.overview, csv_files.prepare(views.overview_plain, f"rexrank_overview_{suffix}")]
        for test_set, view in views.tables.items():
            widths = results_layout(view.slots, rank_by, METRIC_NAMES, view.ci_columns).widths
            # the CSV's bytes once per table version (part cache), not per page load
            csv = cached(("csv", rank_by, query, filters), (test_set, track),
                         lambda: csv_files.prepare(view.plain, f"rexrank_{test_set}_{suffix}"))
            out += [view.note, SizedGrid(view.display, widths), csv]
        out.append(views.overview_note)
        return out

    def views(track: str, rank_by: str, query: str, hide_trained: bool = False, sources=tables.SOURCES,
              columns=tables.DEFAULT_COLUMNS):
        # a fresh update per call: gradio changes the update it is given, and the page is cached
        out = [gr.update(value=v.table, column_widths=v.widths) if isinstance(v, SizedGrid) else v
               for v in page(track, rank_by, query, hide_trained, sources, columns)]
        return (*out, _status(source))

    def views_keeping_status(*args):
        """`views` without the status line: after a page load, which has put the address's
        ignored parameters into it."""
        return views(*args)[:-1]

    def leaderboard(test_set: str = "iu_xray", track: str = "findings", rank_by: str = DEFAULT_RANK_KEY, query: str = "") -> dict:
        """One test set's table as {"headers", "data"}, ranked by a leaderboard column key
        (e.g. radcliq_v1_inv, fineradscore_inv), with every column."""
        frame, cached = source.part_cache()
        views = tables.page_views(frame, track, rank_by, query, test_sets=(test_set,), cached=cached,
                                  columns=tables.METRIC_KEYS, per_study=per_study, p_cache=source.pair_p)
        table = views.tables[test_set].display
        return {"headers": list(table.columns), "data": table.values.tolist()}

    def model(name: str | None, rank_by: str):
        header, results, significance = source.cached(("model", name, rank_by), lambda: model_view(name, rank_by))
        # a fresh update per call (gradio changes the one it is given); widths follow the columns
        return header, gr.update(value=results.table, column_widths=results.widths), significance

    def model_view(name: str | None, rank_by: str):
        frame, cached = source.part_cache()
        if not name:
            return "Pick a model.", sized_model_grid(pd.DataFrame(columns=RESULT_COLUMNS)), pd.DataFrame(columns=SIGNIFICANCE_COLUMNS)
        significance = neighbour_significance(source, name, rank_by, cached=cached)
        header = model_header(frame, name)
        standing = model_standing(frame, name, rank_by, cached=cached)
        if standing:  # the scores in prose first: a phone shows them whatever the grid's width
            header += f"\n\n**Where it stands** (ranking: {tables.md_escape(METRIC_NAMES[rank_by])}):\n\n{standing}"
        return header, sized_model_grid(model_results(frame, name, rank_by, cached=cached)), significance

    def sized_model_grid(results: pd.DataFrame) -> SizedGrid:
        headers = [(c, results[c].astype(str).str.contains("±").any()) for c in results.columns]
        return SizedGrid(results, model_layout(headers, METRIC_KEYS_BY_NAME).widths)

    def reload():
        frame = source.frame(force=True)
        return gr.update(choices=model_choices(frame)), _status(source)

    def on_load(request: gr.Request):
        """A page load re-reads the store and sets the view the address asks for
        (rexrank.leaderboard.view_state); `?model=NAME` alone opens the Model tab on that model."""
        frame = source.frame(force=True)
        choices = model_choices(frame)
        params = request.query_params if request else {}
        wanted = (params.get(MODEL_QUERY_PARAMETER) or "").strip()
        # an unknown name is not put into the picker: it would show the link's text there
        picked = (wanted if wanted in choices else NOT_FOUND_PICK) if wanted else (choices[0] if choices else None)
        state = parse_view(params)
        focus = ""
        if wanted and state.tab in tab_test_sets and not (params.get("q") or "").strip():
            # `submit`'s link (?tab=iu_xray&model=NAME): the table, searched for the model and
            # ranked by a metric its result has, so that its row is on the first screen with a rank
            state.query = wanted
            if not (params.get("rank") or "").strip():
                key = tables.rank_key_of(frame, state.tab, state.track, wanted, state.rank_by)
                if key != state.rank_by:
                    focus = (f"Ranked by {METRIC_NAMES[key]}, a metric this model's result has: it has no "
                             f"{METRIC_NAMES[state.rank_by]} value.")
                state.rank_by = key
        selected = state.tab or ("model" if wanted else None)
        tab = gr.Tabs(selected=selected) if selected else gr.Tabs()
        # the address's unknown values: a line of their own, which the views (they rewrite the
        # status line) leave alone
        address_text = " ".join(tables.md_escape(t) for t in (describe_problems(state.problems), focus) if t)
        return (gr.update(choices=choices, value=picked), _status(source), address_text, tab, state.track, state.rank_by, state.query,
                state.hide_trained, state.sources, state.columns)

    def rank_from_header(evt: gr.EventData):
        """A click on a metric's header ranks by that metric; other headers change nothing."""
        key = tables.rank_key_for_header(evt._data.get("header", "") if isinstance(evt._data, dict) else "")
        return key if key else gr.update()

    def queue():
        if store is None:
            return pd.DataFrame(columns=QUEUE_HEADERS)
        return queue_table(store.queue_view())  # open requests and the latest settled ones, newest first

    def drawn(component: gr.Plot, figure):
        """`figure` as `component` sends it: encoded here, once, so that a cached view is not
        drawn again (Gradio draws a figure at every event that returns it)."""
        return None if figure is None else component.postprocess(figure)

    def plots(test_set: str, track: str):
        def draw():
            corr, box, note = _plots(source, test_set, track)
            return drawn(corr_plot, corr), drawn(box_plot, box), note

        return source.cached(("plots", test_set, track), draw)

    def progress(test_set: str, track: str, rank_by: str = DEFAULT_RANK_KEY, hide_trained: bool = False,
                 sources=tables.SOURCES):
        key = ("progress", test_set, track, rank_by, filters_from(hide_trained, sources))

        def draw():
            figure, note = _progress(source, test_set, track, rank_by, filters_from(hide_trained, sources))
            return drawn(progress_plot, figure), note

        return source.cached(key, draw)

    # initial values, so the page shows filled tables before the load event has re-read the store
    first = page("findings", DEFAULT_RANK_KEY, "")
    first_choices = model_choices(source.frame())
    first_model = model(first_choices[0] if first_choices else None, DEFAULT_RANK_KEY)

    def grid(value, elem_id: str, layout: GridLayout, widths: list[str] | None = None, **kwargs):
        return gr.Dataframe(
            value, datatype="markdown", interactive=False, wrap=True, elem_id=elem_id,
            elem_classes=[TABLE_CLASS, layout.css_class], column_widths=widths or layout.widths, **kwargs,
        )

    def download(value, elem_id: str):
        return gr.DownloadButton("Download CSV", value=value, size="sm", variant="secondary", scale=0,
                                 min_width=150, elem_id=elem_id)

    # fill_width: thirteen columns need the whole width of a 1,400 px screen
    with gr.Blocks(title="ReXrank leaderboard", fill_width=True) as demo:
        # page-wide style and the header-click bridge: in the Blocks, so every launch has them
        header_clicks = gr.HTML(visible="hidden", head=f"<style>{PAGE_CSS}</style>", js_on_load=HEADER_CLICK_JS,
                                elem_id="header-clicks")
        gr.Markdown(f"# {TITLE}\n{LEGEND}", elem_id="legend")
        with gr.Row():
            # min_width: on a phone each control takes its own line instead of a sliver
            track = gr.Radio(TRACK_CHOICES, value="findings", label="Track", elem_id="track", min_width=280)
            rank_by = gr.Dropdown(tables.rank_choices(), value=DEFAULT_RANK_KEY, label="Rank by", elem_id="rank-by",
                                  min_width=280)
        address_note = gr.Markdown(elem_id="address-note")
        # "wrap": on a phone every tab stays in sight on a second line (gradio's default hides
        # all but the first test set's under a "⋯" menu)
        with gr.Tabs(overflow_behavior="wrap") as tabs:
            tab_selects, view_outputs = [], [None, None]  # the overview's grid and CSV, made below
            # the test sets first: the page opens on a ranked table
            for i, t in enumerate(tab_test_sets):
                note, table, csv = first[2 + 3 * i: 5 + 3 * i]
                with gr.Tab(TEST_SET_LABELS[t], id=t) as tab:
                    with gr.Row():
                        note_md = gr.Markdown(note, elem_id=f"note-{t}")
                        csv_btn = download(csv, f"csv-{t}")
                    df = grid(table.table, f"table-{t}", RESULTS_GRID, table.widths, pinned_columns=3, max_height=700)
                tab_selects.append((tab, t))
                view_outputs += [note_md, df, csv_btn]
            with gr.Tab("Overview", id="overview") as overview_tab:
                with gr.Row():
                    gr.Markdown("Top models per test set (ranked by the chosen metric, within the chosen track).")
                    overview_csv = download(first[1], "csv-overview")
                overview_df = grid(first[0], "table-overview", OVERVIEW_GRID, pinned_columns=1)
                overview_note = gr.Markdown(first[-1], elem_id="note-overview")
            tab_selects.append((overview_tab, "overview"))
            view_outputs[:2] = [overview_df, overview_csv]
            view_outputs.append(overview_note)
            with gr.Tab("Model", id="model") as model_tab:
                model_pick = gr.Dropdown(
                    choices=first_choices, value=first_choices[0] if first_choices else None, label="Model",
                    elem_id="model-pick", allow_custom_value=True,
                )
                model_md = gr.Markdown(first_model[0], elem_id="model-header")
                model_df = grid(first_model[1]["value"], "model-results", MODEL_GRID, first_model[1]["column_widths"],
                                label="All results", pinned_columns=1)
                gr.Markdown(
                    "Significance against the neighbours in the ranking: a paired bootstrap over studies on the "
                    "ranking metric's per-study scores, only where both results have per-study data."
                )
                significance_df = gr.Dataframe(first_model[2], interactive=False, wrap=True, label="Significance vs neighbours",
                                               elem_id="model-significance", elem_classes=[TABLE_CLASS])
            with gr.Tab("Plots", id="plots") as plots_tab:
                plot_test_set = gr.Dropdown(
                    [(TEST_SET_LABELS[t], t) for t in tab_test_sets], value="iu_xray", label="Test set (progress and correlation plots)"
                )
                progress_note = gr.Markdown(elem_id="progress-note")
                progress_plot = gr.Plot(label="Progress: best score by date (ranking metric)", elem_id="progress-plot")
                plot_note = gr.Markdown()
                corr_plot = gr.Plot(label="Metric correlation")
                box_plot = gr.Plot(label="Metric distributions")
            with gr.Tab("About", id="about") as about_tab:
                gr.Markdown(about_markdown(), elem_id="about-text")
            with gr.Tab("Submit", id="submit") as submit_tab:
                if store is None:
                    gr.Markdown("This leaderboard runs without a store: submissions are off.")
                else:
                    gr.Markdown(
                        f"File predictions for scoring into **{tables.md_escape(source.label)}**: upload a file, or name a predictions "
                        "dataset you pushed to the Hub (it is read at the commit it points to now; later pushes "
                        "change nothing; a private one is read with your sign-in). They are validated now; the "
                        f"backend scores them and the result appears on the leaderboard. {_formats_help()}"
                    )
                    if hub:
                        gr.LoginButton()
                        name_box = gr.Textbox(visible=False)
                    else:
                        name_box = gr.Textbox(label="Your name or organisation (submitter)")
                    with gr.Row():
                        sub_test_set = gr.Dropdown(
                            [(TEST_SET_LABELS.get(t, t), t) for t in (*tab_test_sets, "example")], value="iu_xray", label="Test set"
                        )
                        sub_track = gr.Radio(TRACK_CHOICES, value="findings", label="Track")
                    with gr.Row():
                        sub_model = gr.Textbox(label="Model name")
                        # an initial value makes the API parameter optional (clients of earlier versions)
                        sub_namespace = gr.Textbox(value="", label="Namespace (default: your account)",
                                                   placeholder="or one of your organisations")
                        sub_inst = gr.Textbox(label="Institution")
                    with gr.Row():
                        sub_url = gr.Textbox(label="Model URL (https://…)")
                        sub_repo = gr.Textbox(value="", label="Your Hub model repo (optional)", placeholder="NAMESPACE/NAME")
                    sub_trained = gr.CheckboxGroup(
                        [(TEST_SET_LABELS[t], t) for t in tab_test_sets], label="Trained on the training split of"
                    )
                    with gr.Row():
                        sub_file = gr.File(label="Predictions file", type="filepath", elem_id="submit-file")
                        sub_hub = gr.Textbox(label="…or a predictions dataset on the Hub",
                                             placeholder="USER/REPO or USER/REPO@REVISION", elem_id="submit-hub-dataset")
                    sub_btn = gr.Button("Validate and submit", variant="primary")
                    sub_out = gr.Markdown(elem_id="submit-result")
                    sub_json = gr.JSON(visible=False)  # the same answer for API clients
                    queue_df = gr.Dataframe(label="Queue", interactive=False, wrap=True, elem_classes=[TABLE_CLASS],
                                            elem_id="queue", headers=QUEUE_HEADERS)

                    def submit(file, hub_dataset, test_set, track_, model_name, institution, url, trained, typed_name,
                               namespace="", model_repo="", oauth_token: gr.OAuthToken | None = None):
                        """File predictions (an uploaded file, or USER/REPO[@REVISION] on the Hub) as the
                        account of the Hub token sent (`Client(..., oauth_token=HF_TOKEN)`), under
                        `namespace` (default the account), linked to the Hub model repo `model_repo`."""
                        try:
                            request = file_request(
                                store, predictions=file, hub_dataset=hub_dataset, test_set=test_set, track=track_,
                                model_name=model_name, institution=institution, model_url=url, trained_on=trained,
                                token=oauth_token.token if oauth_token is not None else None, typed_name=typed_name,
                                namespace=namespace or "", model_repo=model_repo or "",
                            )
                        except Exception as exc:  # every failure becomes a message for the submitter
                            answer = {"filed": False, "error": error_text(exc, upload=file), "request": None}
                            return describe_error(exc, upload=file), answer, queue()
                        answer = {"filed": True, "error": None, "request": public_request(request, own=True)}
                        return describe_request(request), answer, queue()

                    sub_btn.click(
                        submit,
                        [sub_file, sub_hub, sub_test_set, sub_track, sub_model, sub_inst, sub_url, sub_trained, name_box,
                         sub_namespace, sub_repo],
                        [sub_out, sub_json, queue_df],
                        api_name="submit",
                    )

                    def request_status(request_id: str) -> dict:
                        """One request's public fields and, once scored, its leaderboard values."""
                        return _public_status(store, request_id)

                    gr.api(request_status, api_name="status")
                    demo.load(queue, None, queue_df, api_name="queue")

        # the rest of the view's controls, under the tables: the first screen is a table. Open: the
        # components of a closed accordion are mounted later, and their change events then carry
        # their first values over the ones a link set (a filtered link lost its filter under load)
        with gr.Accordion("Search, filters and columns", open=True, elem_id="view-options"):
            with gr.Row():
                query = gr.Textbox(label="Search model or institution", placeholder="e.g. CSIRO", elem_id="search",
                                   min_width=280)
                reload_btn = gr.Button("Reload results", scale=0)
            with gr.Row():
                with gr.Column(min_width=280, scale=1):  # a column: on a phone the checkbox keeps its width
                    hide_trained = gr.Checkbox(False, label=f"Hide models trained on the test set ({tables.TRAINED_MARK})",
                                               elem_id="hide-trained")
                    sources = gr.CheckboxGroup(list(tables.SOURCES), value=list(tables.SOURCES), label="Sources",
                                               elem_id="sources")
                columns = gr.CheckboxGroup([(COLUMNS_BY_KEY[k].display, k) for k in tables.METRIC_KEYS],
                                           value=list(tables.DEFAULT_COLUMNS), label="Metric columns shown",
                                           elem_id="columns", min_width=280, scale=3)
        controls = [track, rank_by, query, hide_trained, sources, columns]
        status = gr.Markdown(_status(source), elem_id="status")
        view_outputs.append(status)
        hidden = {"api_visibility": "undocumented"}  # chained steps: the named endpoints above cover them
        gr.on([c.change for c in controls], views, controls, view_outputs, api_name="views")
        gr.on([c.change for c in controls], None, controls, None, js=VIEW_URL_JS, **hidden)  # the view -> the address
        tab_selects += [(model_tab, "model"), (plots_tab, "plots"), (about_tab, "about"), (submit_tab, "submit")]
        for tab_component, tab_id in tab_selects:
            tab_component.select(None, None, None, js=tab_url_js(tab_id), **hidden)
        model_pick.input(None, model_pick, None, js=MODEL_URL_JS, **hidden)
        gr.on([model_pick.change, rank_by.change], model, [model_pick, rank_by], [model_md, model_df, significance_df], api_name="model")
        header_clicks.click(rank_from_header, None, rank_by, **hidden)
        # figures are drawn when the Plots tab is opened, not on every page load
        gr.on([plots_tab.select, plot_test_set.change, track.change], plots, [plot_test_set, track],
              [corr_plot, box_plot, plot_note], api_name="plots")
        gr.on([plots_tab.select, plot_test_set.change, track.change, rank_by.change, hide_trained.change, sources.change],
              progress, [plot_test_set, track, rank_by, hide_trained, sources], [progress_plot, progress_note], api_name="progress")
        reload_btn.click(reload, None, [model_pick, status], api_name="reload").then(
            views, controls, view_outputs, **hidden
        )
        # a page load re-reads the store quietly: the tables already show the build-time data
        demo.load(on_load, None, [model_pick, status, address_note, tabs, *controls], show_progress="hidden",
                  **hidden).then(
            views_keeping_status, controls, view_outputs[:-1], show_progress="hidden", **hidden
        ).then(model, [model_pick, rank_by], [model_md, model_df, significance_df], show_progress="hidden", **hidden).then(
            None, controls, None, js=VIEW_READY_JS, **hidden)  # from now on the view is written to the address
        gr.api(leaderboard, api_name="leaderboard")
    return demo
