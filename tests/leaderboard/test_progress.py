"""The progress figure: best so far, dates and points (rexrank.leaderboard.progress).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest


# ---- progress: best so far for a lower-is-better metric ----------------------------------
def test_progress_best_so_far_is_the_running_minimum_when_lower_is_better(monkeypatch):
    from rexrank.leaderboard import progress
    from rexrank.results_schema import COLUMNS_BY_KEY

    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    frame = pd.DataFrame({
        "test_set": "iu_xray", "track": "findings",
        "model_name": ["A", "B", "C", "D", "E"],
        "date": ["2023", "2024-03-01", "2024-03-01", "2025", "2026-01-02"],
        "bleu2": [0.5, 0.7, 0.4, 0.6, 0.3],
    })
    points, left_out = progress.progress_points(frame, "iu_xray", "findings", "bleu2")
    assert left_out == 0
    # by hand: 0.5; then min(0.5, 0.7, 0.4) = 0.4 on 2024-03-01; 0.4 again in 2025; 0.3
    assert points["best"].tolist() == [0.5, 0.4, 0.4, 0.4, 0.3]
    higher = pd.DataFrame({**frame.to_dict("list")})
    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=True))
    points, _ = progress.progress_points(higher, "iu_xray", "findings", "bleu2")
    assert points["best"].tolist() == [0.5, 0.7, 0.7, 0.7, 0.7]


# ---- progress: dates and the points ---------------------------------------------------------
@pytest.mark.parametrize("text, day", [
    ("2024", "2024-01-01"), ("2026-11", "2026-11-01"), ("2026-11-25", "2026-11-25"), (" 2025-3-7", "2025-03-07"),
    ("2026-11-25T10:00:00Z", "2026-11-25"), (2023, "2023-01-01"),
])
def test_progress_dates_are_read_as_the_earliest_day_they_can_mean(text, day):
    from rexrank.leaderboard.progress import parse_date

    assert parse_date(text) == pd.Timestamp(day)


@pytest.mark.parametrize("text", ["", None, "soon", "24", "2026-13-01", "2026-02-30", "x2024"])
def test_progress_dates_that_are_no_date_give_none(text):
    from rexrank.leaderboard.progress import parse_date

    assert parse_date(text) is None


def test_progress_points_leave_out_and_count_results_without_date_or_value():
    from rexrank.leaderboard.progress import progress_points

    frame = pd.DataFrame({
        "test_set": ["iu_xray"] * 5 + ["mimic_cxr", "iu_xray"],
        "track": ["findings"] * 6 + ["findings_impression"],
        "model_name": ["B", "A", "NoDate", "NoValue", "C", "Other set", "Other track"],
        "date": ["2025", "2025", "", "2024", "2024-06-01", "2020", "2020"],
        "bleu2": [0.2, 0.3, 0.9, np.nan, 0.25, 0.99, 0.99],
    })
    points, left_out = progress_points(frame, "iu_xray", "findings", "bleu2")
    assert left_out == 2  # NoDate, NoValue; the other set and track are not this plot's
    assert points.columns.tolist() == ["model_name", "date", "value", "best"]
    assert points["model_name"].tolist() == ["C", "A", "B"]  # by date, then name
    assert points["date"].tolist() == [pd.Timestamp("2024-06-01"), pd.Timestamp("2025-01-01"), pd.Timestamp("2025-01-01")]
    assert points["value"].tolist() == [0.25, 0.3, 0.2]
    assert points["best"].tolist() == [0.25, 0.3, 0.3]  # 2025 best of both its results (A 0.3, B 0.2)
    assert points.index.tolist() == [0, 1, 2]


# ---- progress: the figure as drawn -----------------------------------------------------------
def test_the_progress_figure_as_drawn():
    import matplotlib.colors as mcolors

    from rexrank.leaderboard.progress import fig_progress

    points = pd.DataFrame({"model_name": ["A", "B", "C"], "date": pd.to_datetime(["2023-01-01", "2024-01-01", "2024-01-01"]),
                           "value": [0.5, 0.7, 0.6], "best": [0.5, 0.7, 0.7]})
    fig = fig_progress(points, "iu_xray", "findings", "bleu2")
    assert fig.get_size_inches().tolist() == [7.5, 4.2]
    ax = fig.axes[0]
    [dots] = ax.collections
    assert dots.get_sizes().tolist() == [22] and dots.get_alpha() == 0.6 and dots.get_label() == "a model's result"
    assert mcolors.to_hex(dots.get_facecolor()[0], keep_alpha=False) == mcolors.to_hex("tab:blue")
    [line] = ax.lines
    assert (line.get_color(), line.get_linewidth(), line.get_drawstyle(), line.get_label()) == (
        "tab:red", 2.0, "steps-post", "best so far")
    assert line.get_ydata().tolist() == [0.5, 0.7]  # one step per date
    # the leaders are named: A (2023), then B (2024); C never led
    assert [(t.get_text(), t.get_fontsize()) for t in ax.texts] == [("A", 8.0), ("B", 8.0)]
    assert ax.get_xlabel() == "date (a year alone: 1 January)"
    assert ax.get_ylabel() == "BLEU (higher is better)"
    assert ax.get_title() == "Best BLEU by date: IU-Xray, Findings"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a model's result", "best so far"]
    assert all(t.xyann == (4, 4) and t.anncoords == "offset points" for t in ax.texts)
    assert [t.get_fontsize() for t in ax.get_legend().get_texts()] == [8.0, 8.0]
    assert ax.xaxis.get_gridlines()[0].get_alpha() == 0.3 and ax.xaxis.get_gridlines()[0].get_visible()
    # a later result that only equals the best is not a new leader; unknown set and track names shown as given
    tied = pd.concat([points, pd.DataFrame({"model_name": ["D"], "date": [pd.Timestamp("2025-01-01")], "value": [0.7],
                                            "best": [0.7]})], ignore_index=True)
    again = fig_progress(tied, "new_set", "new_track", "bleu2").axes[0]
    assert [t.get_text() for t in again.texts] == ["A", "B"]
    assert again.get_title() == "Best BLEU by date: new_set, new_track"
    empty = fig_progress(points.iloc[:0], "mimic_cxr", "findings_impression", "radcliq_v1_inv")
    assert not empty.axes[0].lines and empty.axes[0].get_title() == "Best 1/RadCliQ-v1 by date: MIMIC-CXR, Findings + Impression"


def test_the_progress_figure_of_a_lower_is_better_metric_says_so(monkeypatch):
    from rexrank.leaderboard.progress import fig_progress
    from rexrank.results_schema import COLUMNS_BY_KEY

    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    points = pd.DataFrame({"model_name": ["A"], "date": [pd.Timestamp("2024-01-01")], "value": [0.5], "best": [0.5]})
    assert fig_progress(points, "iu_xray", "findings", "bleu2").axes[0].get_ylabel() == "BLEU (lower is better)"
