"""Issue 21: statistics on the board (n, tiers), filters and column choice, sort direction,
the view in the page's address, progress over time, and the first-hour page fixes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_rel

from rexrank.errors import TestSetError
from rexrank.leaderboard import tables
from rexrank.leaderboard.published import load_seed_records
from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.leaderboard.tiers import table_tiers
from rexrank.results_schema import COLUMNS_BY_KEY
from support.boards import grid
from support.paths import shared_path
from support.boards import MOERAD_SCORES, per_study_bytes, result

@pytest.fixture(scope="module")
def frame():
    return records_frame(load_seed_records())


def holm_by_hand(p):
    """Holm step-down adjusted p-values, written out for the test (not rexrank's)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for step, i in enumerate(order):
        running = max(running, (len(p) - step) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


@pytest.fixture(scope="module")
def systems():
    """Four systems' per-study RadCliQ-v1 on IU-Xray: MoERad's real (official) scores, and
    three made from them: one clearly worse, one a hair from that, one far worse."""
    real = pd.read_csv(shared_path(*MOERAD_SCORES))
    ids = [f"s{i}" for i in real["study_id"]]
    rng = np.random.default_rng(21)
    a = real["RadCliQ-v1"].to_numpy(np.float64)
    b = a + 0.05 + rng.normal(0, 0.3, a.size)
    c = b + 0.001 + rng.normal(0, 0.3, a.size)
    d = c + 0.2 + rng.normal(0, 0.3, a.size)
    c[3] = np.nan  # a study C could not score: left out of its tests
    return ids, {"A": a, "B": b, "C": c, "D": d}


@pytest.fixture()
def store_source(tmp_path, systems):
    from rexrank.store import open_store

    ids, scores = systems
    store = open_store(tmp_path / "store")
    for name, values in scores.items():
        store.add_result(result(name, values), per_study=per_study_bytes(ids, values))
    # a published row ranked between A and B: no per-study scores, no tier
    mid = 1 / float(np.mean(scores["A"])) - 0.01
    store.add_result(result("P", mean=mid, source="published", date="2024"))
    return store, LeaderboardSource.from_store(store, ttl=0)


def test_tiers_are_paired_t_tests_with_holm_against_the_next_model_above(store_source, systems):
    _, scores = systems
    _, source = store_source
    table = tables.ranked(source.frame(), "iu_xray", "findings")
    assert table["model_name"].tolist() == ["A", "P", "B", "C", "D"]
    tiers = table_tiers(table, "radcliq_v1_inv", lambda rid: source.per_study(rid, refresh=False))
    # independently: scipy's paired t-test on the studies both scored, A-B, B-C, C-D (P skipped)
    p = []
    for up, down in (("A", "B"), ("B", "C"), ("C", "D")):
        keep = np.isfinite(scores[up]) & np.isfinite(scores[down])
        p.append(ttest_rel(scores[up][keep], scores[down][keep]).pvalue)
    adjusted = holm_by_hand(p)
    expected, tier = [1], 1
    for q in adjusted:
        tier += q < 0.05
        expected.append(tier)
    assert expected == [1, 2, 2, 3]  # the data make a tie and two real steps
    by_name = dict(zip(table["id"], table["model_name"]))
    assert {by_name[i]: t for i, t in tiers.items()} == dict(zip("ABCD", expected))
    # the Holm correction matters: B-C alone is not the reason, a raw p would differ
    assert adjusted != p


def test_board_shows_n_and_tier_and_says_why_published_rows_have_none(store_source):
    from rexrank.leaderboard.app import build_app

    _, source = store_source
    fns = {f.name: f.fn for f in build_app(source).fns.values()}
    out = fns["views"]("findings", "radcliq_v1_inv", "")
    note, grid, csv = out[2 + 3 * 2: 5 + 3 * 2]  # IU-Xray is the third test set
    shown = grid["value"]
    rows = {r["Model"].split("](")[0].lstrip("["): r for r in shown.to_dict("records")}
    assert [rows[m]["Tier"] for m in "ABCD"] == ["1", "2", "2", "3"]
    assert rows["P"]["Tier"] == "" and rows["P"]["n"] == "–"
    assert rows["C"]["n"] == "589" and rows["A"]["n"] == "590"  # C left one study unscored
    assert "Tiers compare the 4 results with per-study scores (About); no tier for 1 published (the site gives means only)." in note
    downloaded = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    assert downloaded["n"].tolist()[:3] == [590, pytest.approx(float("nan"), nan_ok=True), 590]
    assert downloaded["Tier"].tolist()[2:] == [2, 2, 3]


def test_tiers_are_computed_once_per_new_result_not_per_page_load(store_source, systems, monkeypatch):
    from rexrank.leaderboard import app as app_module

    store, source = store_source
    calls = []
    real = tables.table_tiers
    monkeypatch.setattr(tables, "table_tiers", lambda *a, **k: calls.append(a[0]["test_set"].iloc[0] if len(a[0]) else None) or real(*a, **k))
    fns = {f.name: f.fn for f in app_module.build_app(source).fns.values()}
    built = len(calls)
    assert built >= 1  # the start views (IU-Xray's table has results to test)
    for _ in range(3):  # page loads that find nothing new
        fns["on_load"](None)
        fns["views"]("findings", "radcliq_v1_inv", "")
    assert len(calls) == built
    store.add_result(result("M", mean=1.0, source="published", test_set="mimic_cxr"))  # another table
    fns["on_load"](None)
    fns["views"]("findings", "radcliq_v1_inv", "")
    assert calls[built:] == ["mimic_cxr"]  # IU-Xray's tiers were kept
    ids, scores = systems
    store.add_result(result("E", scores["D"] + 1.0), per_study=per_study_bytes(ids, scores["D"] + 1.0))
    for _ in range(2):
        fns["on_load"](None)
        fns["views"]("findings", "radcliq_v1_inv", "")
    assert calls[built + 1:] == ["iu_xray"]


def test_filters_leave_rows_out_of_ranking_and_say_so(frame):
    every = tables.ranked(frame, "iu_xray", "findings")
    kept = tables.ranked(frame, "iu_xray", "findings", filters=tables.Filters(hide_trained=True))
    assert every["trained"].any() and not kept["trained"].any()
    assert kept["model_name"].tolist() == every[~every["trained"]]["model_name"].tolist()
    assert kept["rank"].tolist() == list(range(1, len(kept) + 1))  # ranked among the rows kept
    mixed = records_frame([*load_seed_records(), result("Sub", mean=0.5)])
    submitted = tables.ranked(mixed, "iu_xray", "findings", filters=tables.Filters(sources=("submitted",)))
    assert submitted["model_name"].tolist() == ["Sub"]
    published = tables.ranked(mixed, "iu_xray", "findings", filters=tables.Filters(sources=("published",)))
    assert "Sub" not in published["model_name"].tolist() and len(published) == len(every)
    view = tables.page_views(frame, "findings", filters=tables.Filters(hide_trained=True)).tables["iu_xray"]
    assert "Filters: models trained on this test set (\\*) hidden." in view.note


def test_column_choice_hides_new_metrics_by_default_and_keeps_the_ranking_one(frame):
    assert tables.shown_columns(None, "bleu2") == tables.DEFAULT_COLUMNS
    only = tables.display_headers("green", columns=["bleu2"])
    assert [h for h in only if "↑" in h or "↓" in h] == ["GREEN ↑ ▼", "BLEU ↑"]  # the ranking metric stays, first
    # the optional metrics added since ReXrank's eight (ROUGE-L, CRIMSON, ...) are hidden until chosen
    optional = [k for k, c in COLUMNS_BY_KEY.items() if c.optional]
    assert "crimson" in optional and not set(optional) & set(tables.DEFAULT_COLUMNS)
    assert len(tables.DEFAULT_COLUMNS) == 8
    assert "crimson" in tables.shown_columns([*tables.DEFAULT_COLUMNS, "crimson"], "bleu2")
    assert "crimson" in tables.shown_columns(None, "crimson")  # ranked by it: shown


def test_a_lower_is_better_metric_ranks_lowest_first_and_marks_it(monkeypatch):
    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    frame = records_frame([result("X", mean=1.0, bleu=0.3), result("Y", mean=1.0, bleu=0.1), result("Z", mean=1.0, bleu=0.2)])
    table = tables.ranked(frame, "iu_xray", "findings", "bleu2")
    assert table["model_name"].tolist() == ["Y", "Z", "X"]  # best (lowest) first
    view = grid(frame, "iu_xray", "findings", "bleu2")
    assert "BLEU ↓ ▲" in view.columns  # ▲: the values rise down the table
    assert view["BLEU ↓ ▲"].tolist()[0] == "**0.100**"
    assert tables.rank_key_for_header("BLEU ↓ ▲") == "bleu2"


def test_results_without_the_ranking_metric_say_why(frame):
    only_bleu = records_frame([result("Q", bleu=0.2, test_set="mimic_cxr"), result("R", bleu=0.3, test_set="mimic_cxr"),
                               result("S", mean=1.2, bleu=0.1)])
    views = tables.page_views(only_bleu, "findings")
    assert views.overview["MIMIC-CXR"].tolist() == [""]
    assert views.overview_note.startswith("No result on MIMIC-CXR (2 results) has a 1/RadCliQ-v1 value")
    assert "No result here has a 1/RadCliQ-v1 value, so none is ranked" in views.tables["mimic_cxr"].note
    with_one = records_frame([*load_seed_records(), result("T", bleu=0.9)])
    note = tables.page_views(with_one, "findings").tables["iu_xray"].note
    assert "1 result without a 1/RadCliQ-v1 value: unranked (–), listed last; its row gives its place by the metrics it has." in note


def test_dates_show_as_years_and_the_csv_keeps_them(frame):
    mixed = records_frame([result("New", mean=9.0, date="2026-11-25"), *load_seed_records()])
    view = tables.page_views(mixed, "findings").tables["iu_xray"]
    assert set(view.display["Date"]) <= {"2023", "2024", "2025", "2026"}
    assert view.plain.loc[view.plain["Model"] == "New", "Date"].tolist() == ["2026-11-25"]


def test_progress_is_the_best_score_by_date(frame):
    from rexrank.leaderboard.progress import fig_progress, progress_points

    points, left_out = progress_points(frame, "iu_xray", "findings", "radcliq_v1_inv")
    csv = pd.read_csv(shared_path("data", "published", "current", "findings_result_iu_xray.csv"))
    assert len(points) + left_out == len(csv)
    # independently: the best 1/RadCliQ-v1 up to each year, from the published CSV
    csv = csv.dropna(subset=["1/RadCliQ-v1"])
    for year in sorted(csv["Date"].astype(str).str[:4].unique()):
        best = csv[csv["Date"].astype(str).str[:4] <= year]["1/RadCliQ-v1"].max()
        assert points.loc[points["date"].dt.year == int(year), "best"].unique().tolist() == [pytest.approx(best)]
    assert points["date"].is_monotonic_increasing
    fig = fig_progress(points, "iu_xray", "findings", "radcliq_v1_inv")
    assert len(fig.axes[0].collections[0].get_offsets()) == len(points)  # one point per result
    mixed = records_frame([*load_seed_records(), result("Late", mean=0.5, date="2026-11-25"), result("NoDate", mean=5.0, date="")])
    more, more_left_out = progress_points(mixed, "iu_xray", "findings", "radcliq_v1_inv")
    assert more_left_out == left_out + 1 and "NoDate" not in more["model_name"].tolist()  # no date: left out, counted
    assert more["date"].max() == pd.Timestamp("2026-11-25") and more["model_name"].iloc[-1] == "Late"


def test_the_address_holds_the_view():
    from rexrank.leaderboard.view_state import parse_view

    state = parse_view({"tab": "iu_xray", "track": "findings_impression", "rank": "bleu2", "q": " csiro ",
                        "hide_trained": "1", "source": "submitted", "columns": "green,bleu2"})
    assert (state.tab, state.track, state.rank_by, state.query) == ("iu_xray", "findings_impression", "bleu2", "csiro")
    assert state.filters == tables.Filters(hide_trained=True, sources=("submitted",))
    assert state.columns == ["bleu2", "green"] and state.problems == []
    defaults = parse_view({})
    assert defaults.tab is None and defaults.filters == tables.NO_FILTERS and defaults.columns == list(tables.DEFAULT_COLUMNS)
    bad = parse_view({"tab": "nope", "rank": "bleu3", "source": "elsewhere"})
    assert bad.rank_by == "radcliq_v1_inv" and bad.tab is None
    assert [p.split(" ")[0] for p in bad.problems] == ["tab", "rank", "source"]
    # a link's own text is never repeated on the page (it could carry a URL or control characters)
    echo = parse_view({"tab": "https://evil.example/\u202e", "columns": "[x](https://evil.example)"})
    assert not any("evil" in p or "\u202e" in p for p in echo.problems) and len(echo.problems) == 2
    assert parse_view({"source": "none"}).filters.sources == ()


def test_submit_message_points_to_the_server_option_and_keeps_links_whole():
    from rexrank.leaderboard.submit import describe_error

    url = "https://raw.githubusercontent.com/rajpurkarlab/ReXrank/07cdd3b/data/iu_xray/ReXRank_IUXray_test.json"
    exc = TestSetError(f"ReXRank_IUXray_test.json is not cached and HF_HUB_OFFLINE=1 is set, so it is not downloaded "
                       f"from {url}; download it yourself and pass its folder with --data-dir (expected sha256 4d30)")
    text = describe_error(exc)
    assert f"<{url}>" in text  # an autolink, not `iu\_xray`
    assert "%5C" not in text and "iu\\_xray" not in text
    assert "`rexrank leaderboard --data-dir FOLDER`" in text
    assert "pass its folder with --data-dir" not in text  # the command-line advice is not the submitter's


def test_queue_headers_are_words(tmp_path):
    from rexrank.leaderboard.app import QUEUE_HEADERS, build_app
    from rexrank.store import open_store

    store = open_store(tmp_path / "store")
    fns = {f.name: f.fn for f in build_app(LeaderboardSource.from_store(store)).fns.values()}
    queue = fns["queue"]()
    assert list(queue.columns) == QUEUE_HEADERS and not any("_" in h for h in queue.columns)


def test_holm_correction_decides_a_tie_that_raw_p_values_would_split():
    """Two neighbour tests with p ≈ 0.03 each: below 0.05 alone, not after Holm (2 × 0.03):
    one tier, not three."""
    real = pd.read_csv(shared_path(*MOERAD_SCORES))
    ids = [f"s{i}" for i in real["study_id"]]
    a = real["RadCliQ-v1"].to_numpy(np.float64)
    n = a.size
    e1 = np.sin(np.arange(n)) * 0.2
    e1 -= e1.mean()
    e2 = np.cos(np.arange(n) * 1.7) * 0.2
    e2 -= e2.mean()
    b = a + 2.2 * e1.std(ddof=1) / np.sqrt(n) + e1  # paired t = 2.2 exactly
    c = b + 2.2 * e2.std(ddof=1) / np.sqrt(n) + e2
    frames = {name: pd.DataFrame({"id": ids, "radcliq_v1": v}) for name, v in (("a", a), ("b", b), ("c", c))}
    table = tables.ranked(records_frame([result(name.upper(), frames[name]["radcliq_v1"].to_numpy()) for name in frames]),
                          "iu_xray", "findings")
    raw = [ttest_rel(a, b).pvalue, ttest_rel(b, c).pvalue]
    assert all(0.025 < p < 0.05 for p in raw)  # each alone significant
    assert all(q >= 0.05 for q in holm_by_hand(raw))  # not after the correction
    tiers = table_tiers(table, "radcliq_v1_inv", lambda rid: frames[rid.rsplit("/", 1)[1]])
    assert sorted(tiers.values()) == [1, 1, 1]


def test_about_explains_tiers_and_published_figures():
    from rexrank.leaderboard.about import about_markdown

    text = about_markdown()
    assert "paired t-test" in text and "Holm" in text and "0.05" in text
    # the published MoERad-IU BLEU (0.277) against its public predictions (official per-study BLEU)
    official = pd.read_csv(shared_path(*MOERAD_SCORES))["bleu_score"].mean()
    assert f"{official:.3f}" == "0.270" and "0.277 published, 0.270 from its public predictions" in text
    assert "the ReXrank site's own figures" in text


def test_an_optional_column_ranked_by_gets_tiers_from_its_per_study_scores():
    # the tiers read the per-study column of every leaderboard column, ROUGE-L's included
    ids = [f"S{i}" for i in range(40)]
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.6, len(ids))
    data = {"a": pd.DataFrame({"id": ids, "rouge": base + 0.2}), "b": pd.DataFrame({"id": ids, "rouge": base})}
    table = pd.DataFrame({"id": ["a", "b"], "rank": [1.0, 2.0], "per_study_available": [True, True]})
    tiers = table_tiers(table, "rouge", data.get)
    assert tiers == {"a": 1, "b": 2}
