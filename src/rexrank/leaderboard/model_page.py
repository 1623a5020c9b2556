"""A model's page: all its results (rank, values ± CI, source) and, where per-study scores
exist, paired significance tests against its neighbours in each ranking."""
from __future__ import annotations

import math
from urllib.parse import urlencode

import numpy as np
import pandas as pd

from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, METRIC_KEYS, TEST_SET_LABELS, TRACK_LABELS
from rexrank.leaderboard.tables import (
    LOOKALIKE_MARK,
    MISSING,
    UNRANKED_WHY,
    PartCache,
    best_values,
    format_value,
    lookalikes,
    md_escape,
    ordinal,
    plural,
    ranked_part,
    source_label,
    standings,
    uncached,
    unranked_cell,
    web_url,
)
from rexrank.results_schema import COLUMNS_BY_KEY, DEFAULT_RANK_KEY, LEADERBOARD_COLUMNS

# leaderboard key -> (per-study column written by rexrank.scoring, shown as 1/mean?)
PER_STUDY_COLUMN = {c.key: (c.per_study_column, c.inverted) for c in LEADERBOARD_COLUMNS}
SIGNIFICANCE_RESAMPLES = 1000
ALPHA = 0.05
RESULT_COLUMNS = ["Test set", "Track", "Rank", "Trained on it",
                  *(COLUMNS_BY_KEY[k].display for k in METRIC_KEYS), "Source", "Per-study data"]
SIGNIFICANCE_COLUMNS = ["Test set", "Track", "Neighbour", "Result"]
MODEL_QUERY_PARAMETER = "model"
NO_TEST_PUBLISHED = "no test: this result has no per-study scores (published results are the ReXrank site's means)"
NO_TEST_UNRANKED = "no test: this result has no value for the ranking metric (unranked)"
PUBLISHED_FIGURES = (
    "Published results are the ReXrank site's own figures (rajpurkarlab/ReXrank, gh-pages `results/`), "
    "shown as published: scoring a model's public predictions file here can give slightly different "
    "values (other inputs, versions or rounding)."
)
# what the Model tab shows for a name it does not know (a ?model= link, a typed name): the
# name itself is not repeated, so a crafted link cannot put its text, a live link or a
# right-to-left override on the page
NO_SUCH_MODEL = ("No result under this name on this leaderboard (a submitted model shows here once the backend "
                 "has scored it): pick a model from the list.")
NOT_FOUND_PICK = "(no such model)"  # the model picker's value then


def model_link(model: str, page: str = "", *, test_set: str | None = None, track: str = "findings") -> str:
    """The link that opens the leaderboard on this model: relative to the page, or after `page`
    (the leaderboard's address: a Space's ORG/NAME or a URL). With a `test_set` that has a tab
    (and its `track`): that table, searched for the model and ranked by a metric its result
    has, so its row is on the first screen with a rank (?tab=iu_xray&model=NAME); else the
    model's page (?model=NAME)."""
    place = {}
    if test_set in LEADERBOARD_TEST_SETS:
        place = {"tab": test_set, **({"track": track} if track != "findings" else {})}
    query = "?" + urlencode({**place, MODEL_QUERY_PARAMETER: model})
    if not page:
        return query
    if not page.startswith(("http://", "https://")):  # ORG/SPACE: the Space's page passes the query on
        return f"https://huggingface.co/spaces/{page.strip('/')}{query}"
    page = page.split("?")[0]
    return page + ("" if page.endswith("/") or page.count("/") > 2 else "/") + query


def model_choices(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["model_name"].unique().tolist(), key=str.casefold)


def _order(frame: pd.DataFrame) -> list[tuple[str, str]]:
    present = set(frame[["test_set", "track"]].drop_duplicates().itertuples(index=False, name=None))
    test_sets = [t for t in LEADERBOARD_TEST_SETS] + sorted({t for t, _ in present} - set(LEADERBOARD_TEST_SETS))
    return [(t, tr) for t in test_sets for tr in TRACK_LABELS if (t, tr) in present]


def model_results(frame: pd.DataFrame, model: str, rank_by: str = DEFAULT_RANK_KEY, *,
                  cached: PartCache = uncached) -> pd.DataFrame:
    """One row per result of `model`: test set, track, rank among all models ("r / N"),
    every column as mean ± CI (bold = best in that table), trained marker, source.
    `cached` keeps the rows of test sets and tracks that did not change."""
    rows = []
    for test_set, track in _order(frame):
        table = ranked_part(frame, test_set, track, rank_by, cached)
        rows += cached(("model_rows", model, rank_by), (test_set, track),
                       lambda: _result_rows(table, model, test_set, track, rank_by))
    out = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    if out.empty:
        return out
    # an optional column (not a published ReXrank one) only where one of the model's results has it
    hidden = [COLUMNS_BY_KEY[k].display for k in METRIC_KEYS
              if COLUMNS_BY_KEY[k].optional and k != rank_by and not (out[COLUMNS_BY_KEY[k].display] != MISSING).any()]
    return out.drop(columns=hidden)


def _result_rows(table: pd.DataFrame, model: str, test_set: str, track: str, rank_by: str) -> list[dict]:
    mine = table[table["model_name"] == model]
    if mine.empty:
        return []
    best = best_values(table)
    n_ranked = int(table["rank"].notna().sum())
    placed = standings(table, rank_by)
    rows = []
    for row in mine.to_dict("records"):
        rank = MISSING if math.isnan(row["rank"]) else f"{int(row['rank'])} / {n_ranked}"
        cells = {
            "Test set": TEST_SET_LABELS.get(test_set, test_set),
            "Track": TRACK_LABELS[track],
            "Rank": rank,
            "Trained on it": "yes" if row["trained"] else "",
        }
        for key in METRIC_KEYS:
            is_best = not math.isnan(row[key]) and row[key] == best[key]
            cells[COLUMNS_BY_KEY[key].display] = format_value(row[key], row[f"{key}_ci"], best=is_best)
            if key == rank_by and math.isnan(row[key]):  # an unranked result says why, and where it stands
                cells[COLUMNS_BY_KEY[key].display] = unranked_cell(row["source"], placed.get(row["id"], ""))
        cells["Source"] = row["source"]
        cells["Per-study data"] = "yes" if row["per_study_available"] else "no"
        rows.append(cells)
    return rows


def model_standing(frame: pd.DataFrame, model: str, rank_by: str = DEFAULT_RANK_KEY, *,
                   cached: PartCache = uncached) -> str:
    """Where each of the model's results stands, one short line each, with its score: the
    rank by the ranking metric, or (a result without it) the rank by each metric it has.
    Prose, so that a phone shows the scores whatever the width of the grid below."""
    metric = COLUMNS_BY_KEY[rank_by].display
    lines = []
    for test_set, track in _order(frame):
        table = ranked_part(frame, test_set, track, rank_by, cached)
        mine = table[table["model_name"] == model]
        if mine.empty:
            continue
        placed = standings(table, rank_by, with_values=True)
        n_ranked = int(table["rank"].notna().sum())
        where = f"**{TEST_SET_LABELS.get(test_set, test_set)} · {TRACK_LABELS[track]}**"
        for row in mine.to_dict("records"):
            if not math.isnan(row["rank"]):
                text = f"{ordinal(int(row['rank']))} of {n_ranked} by {metric} ({format_value(row[rank_by], row[f'{rank_by}_ci'])})"
            else:
                text = f"no {metric} value ({UNRANKED_WHY[source_label(row['source'])]})"
                text += f"; {placed[row['id']]}" if row["id"] in placed else ""
            lines.append(f"- {where}: {md_escape(text)}")
    return "\n".join(lines)


def marked_lookalike(frame: pd.DataFrame, model: str) -> bool:
    """Whether a table that has the model marks it as a lookalike (`tables.lookalikes`, as
    the test-set tables mark it)."""
    for test_set, track in _order(frame[frame["model_name"] == model]):
        part = frame[(frame["test_set"] == test_set) & (frame["track"] == track)]
        if any(look and name == model for look, name in zip(lookalikes(part), part["model_name"])):
            return True
    return False


def model_header(frame: pd.DataFrame, model: str) -> str:
    rows = frame[frame["model_name"] == model]
    if rows.empty:
        return NO_SUCH_MODEL
    first = rows.iloc[0]
    lookalike = marked_lookalike(frame, model)
    lines = [f"### {md_escape(model)}" + (f" {LOOKALIKE_MARK}" if lookalike else "")]
    if lookalike:
        lines.append("Its name reads like another model's on this board (letters that look alike, case or invisible "
                     "characters): check the namespace and institution.")
    if first["institution"]:
        lines.append(f"Institution: {md_escape(first['institution'])}")
    url = web_url(first["model_url"])
    if url:
        lines.append(f"Model: <{url}>")
    sources = sorted(set(rows["source"]))
    lines.append(f"{plural(len(rows), 'result')}; source: {', '.join(sources)}.")
    lines.append(f"[Link to this page]({model_link(model)}) (opens the leaderboard on this model).")
    if (rows["source"] == "published").any():
        lines.append(PUBLISHED_FIGURES)
    if not rows["per_study_available"].any():
        lines.append(
            "These results have no per-study scores (published numbers are system-level means), "
            "so there are no confidence intervals or significance tests for them."
        )
    return "  \n".join(lines)


def neighbour_significance(source, model: str, rank_by: str = DEFAULT_RANK_KEY, *, resamples: int = SIGNIFICANCE_RESAMPLES,
                           cached: PartCache = uncached) -> pd.DataFrame:
    """Paired bootstrap test (rexrank.analysis.uncertainty) of the model against the models
    ranked just above and just below it, on the ranking metric's per-study scores, for each
    table where both have per-study data. Δ is in per-study units (RadCliQ-v1 and
    FineRadScore: lower is better, although the table shows 1/mean). `cached` keeps the
    tests of test sets and tracks that did not change."""
    frame = source.frame()
    rows = []
    for test_set, track in _order(frame):
        table = ranked_part(frame, test_set, track, rank_by, cached)
        rows += cached(("significance", model, rank_by, resamples), (test_set, track),
                       lambda: _significance_rows(source, table, model, test_set, track, rank_by, resamples))
    if not rows:  # keep named headers for an empty table
        return pd.DataFrame(columns=SIGNIFICANCE_COLUMNS)
    return pd.DataFrame(rows)


def _significance_rows(source, table: pd.DataFrame, model: str, test_set: str, track: str, rank_by: str,
                       resamples: int) -> list[dict]:
    from rexrank.analysis.uncertainty import paired_bootstrap

    column, inverted = PER_STUDY_COLUMN[rank_by]
    rows = []
    positions = np.flatnonzero((table["model_name"] == model).to_numpy())
    for pos in positions:
        me = table.iloc[pos]
        if not me["per_study_available"] or math.isnan(me["rank"]):
            why = NO_TEST_UNRANKED if me["per_study_available"] else NO_TEST_PUBLISHED
            rows.append({"Test set": TEST_SET_LABELS.get(test_set, test_set), "Track": TRACK_LABELS[track],
                         "Neighbour": MISSING, "Result": why})
            continue
        mine = source.per_study(me["id"])
        for offset, where in ((-1, "above"), (1, "below")):
            j = pos + offset
            if j < 0 or j >= len(table):
                continue
            other = table.iloc[j]
            base = {
                "Test set": TEST_SET_LABELS.get(test_set, test_set),
                "Track": TRACK_LABELS[track],
                "Neighbour": f"{other['model_name']} ({where})",
            }
            theirs = source.per_study(other["id"]) if other["per_study_available"] else None
            unusable = getattr(source, "per_study_problems", {})
            if me["id"] in unusable or other["id"] in unusable:
                whose = "this result's" if me["id"] in unusable else "the neighbour's"
                rows.append({**base, "Result": f"{whose} per-study scores cannot be used (see the problems listed above)"})
                continue
            if mine is None or theirs is None or column not in mine or column not in theirs:
                rows.append({**base, "Result": "no per-study data for both"})
                continue
            joined = mine[["id", column]].merge(theirs[["id", column]], on="id", suffixes=("_a", "_b"))
            complete = joined.dropna()
            if len(complete) < 2:
                rows.append({**base, "Result": "fewer than 2 studies scored by both"})
                continue
            test = paired_bootstrap(complete[f"{column}_a"], complete[f"{column}_b"], resamples=resamples, seed=0)
            better = (test.difference < 0) if inverted else (test.difference > 0)
            significant = test.p_value < ALPHA
            rows.append({
                **base,
                "Studies": f"{len(complete)}" + (f" ({len(joined) - len(complete)} with a missing score left out)" if len(complete) < len(joined) else ""),
                f"Δ mean {column}": f"{test.difference:+.4f}",
                "95 % CI": f"[{test.ci_low:+.4f}, {test.ci_high:+.4f}]",
                "p": f"{test.p_value:.3g}",
                "Result": ("better" if better else "worse") + (" (significant)" if significant else " (not significant)"),
            })
    return rows
