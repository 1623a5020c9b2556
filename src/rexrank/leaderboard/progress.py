"""The field's progress on one test set and track: each model's score by its date, and the
best score so far (a step line).

Dates are a year ("2024", the published results) or a day ("2026-11-25", submitted ones);
a year alone is placed at 1 January of that year (the earliest it can be), so the best
score so far never appears later than it was reached.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rexrank.leaderboard.records import TEST_SET_LABELS, TRACK_LABELS
from rexrank.leaderboard.tables import Filters, NO_FILTERS
from rexrank.results_schema import COLUMNS_BY_KEY

_DATE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")


def parse_date(text) -> pd.Timestamp | None:
    """"2024" -> 2024-01-01, "2026-11" -> 2026-11-01, "2026-11-25" -> that day; None when
    the text starts with no year."""
    match = _DATE.match(str(text or ""))
    if not match:
        return None
    year, month, day = (int(g) if g else 1 for g in match.groups())
    try:
        return pd.Timestamp(year=year, month=month, day=day)
    except ValueError:
        return None


def progress_points(frame: pd.DataFrame, test_set: str, track: str, rank_by: str,
                    filters: Filters = NO_FILTERS) -> tuple[pd.DataFrame, int]:
    """(points, how many results were left out for having no date or no value). Points:
    one row per result (model_name, date, value, best: the best value up to that date,
    that result included), by date."""
    better_high = COLUMNS_BY_KEY[rank_by].higher_is_better
    table = filters.apply(frame[(frame["test_set"] == test_set) & (frame["track"] == track)])
    dates = table["date"].map(parse_date)
    keep = dates.notna() & table[rank_by].notna()
    points = pd.DataFrame({"model_name": table["model_name"][keep], "date": pd.to_datetime(dates[keep]),
                           "value": table[rank_by][keep].astype(np.float64)})
    points = points.sort_values(["date", "model_name"], kind="mergesort").reset_index(drop=True)
    # the best up to each date, every result of that date included
    per_date = points.groupby("date")["value"].agg("max" if better_high else "min")
    running = per_date.cummax() if better_high else per_date.cummin()
    points["best"] = points["date"].map(running)
    return points, int((~keep).sum())


def fig_progress(points: pd.DataFrame, test_set: str, track: str, rank_by: str):
    """Each result's point and the best-so-far step line (matplotlib Figure)."""
    from rexrank.analysis.figures import _figure

    fig = _figure(7.5, 4.2)
    ax = fig.add_subplot()
    metric = COLUMNS_BY_KEY[rank_by].display
    ax.scatter(points["date"], points["value"], s=22, alpha=0.6, color="tab:blue", label="a model's result")
    best = points.drop_duplicates("date")[["date", "best"]]
    if len(best):
        ax.step(best["date"], best["best"], where="post", color="tab:red", linewidth=2, label="best so far")
        leaders = points[points["value"] == points["best"]].drop_duplicates("best")
        for row in leaders.itertuples(index=False):
            ax.annotate(row.model_name, (row.date, row.value), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("date (a year alone: 1 January)")
    ax.set_ylabel(f"{metric} ({'higher' if COLUMNS_BY_KEY[rank_by].higher_is_better else 'lower'} is better)")
    ax.set_title(f"Best {metric} by date: {TEST_SET_LABELS.get(test_set, test_set)}, {TRACK_LABELS.get(track, track)}")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return fig
