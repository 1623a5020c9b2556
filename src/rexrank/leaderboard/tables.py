"""Leaderboard tables: ranking by any metric, search, best-value highlighting, ± CI display,
"trained on this test set" marker, and the overview of top models per test set.

Numeric work happens on the frame from `records.records_frame`; `display_*` functions
turn a ranked frame into strings for `gr.Dataframe` (markdown cells), `csv_*` functions
into the plain table a user downloads.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Callable, Hashable, TypeVar

import numpy as np
import pandas as pd

from rexrank.errors import RexrankError
from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, METRIC_KEYS, TEST_SET_LABELS, TRACK_LABELS
from rexrank.leaderboard.tiers import table_tiers
from rexrank.results_schema import COLUMNS_BY_KEY, DEFAULT_RANK_KEY, LEADERBOARD_COLUMNS

DECIMALS = 3  # the published tables give three decimals
TRAINED_MARK = "*"
MISSING = "–"
# why a row has no value for the ranking metric (so no rank), by source
UNRANKED_WHY = {"published": "not published", "submitted": "not scored"}
# the ReXrank site's columns: shown unless hidden; an optional one added since (ROUGE-L,
# CRIMSON, ...) is hidden until chosen (or ranked by)
DEFAULT_COLUMNS = tuple(k for k in METRIC_KEYS if not COLUMNS_BY_KEY[k].optional)
# source filter: a record's source -> the label a reader picks
SOURCE_LABELS = {"published": "published", "rexrank": "submitted"}
SOURCES = ("published", "submitted")

T = TypeVar("T")
# cached(key, (test_set, track), compute): a view of one test set and track, memoised by a
# caller that knows when those rows change (LeaderboardSource.part_cache); here: computed.
PartCache = Callable[[Hashable, tuple[str, str], Callable[[], T]], T]


def uncached(key: Hashable, part: tuple[str, str], compute: Callable[[], T]) -> T:
    return compute()


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """"1 model", "3 models"."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def rank_choices() -> list[tuple[str, str]]:
    """(label, key) pairs for a ranking dropdown, default first."""
    ordered = [COLUMNS_BY_KEY[DEFAULT_RANK_KEY], COLUMNS_BY_KEY["fineradscore_inv"]]
    ordered += [c for c in LEADERBOARD_COLUMNS if c not in ordered]
    labels = {
        DEFAULT_RANK_KEY: "1/RadCliQ-v1 (ReXrank default)",
        "fineradscore_inv": "1/FineRadScore (ReXrank Challenge)",
    }
    return [(labels.get(c.key, c.display), c.key) for c in ordered]


def _check_rank_key(rank_by: str) -> None:
    if rank_by not in COLUMNS_BY_KEY:
        raise RexrankError(f"cannot rank by {rank_by!r}: known columns are {', '.join(COLUMNS_BY_KEY)}")


def source_label(source: str) -> str:
    return SOURCE_LABELS.get(source, "submitted")


@dataclass(frozen=True)
class Filters:
    """Rows left out of a view (and of its ranking): models trained on the test set, and
    results from a source not chosen."""

    hide_trained: bool = False
    sources: tuple[str, ...] = SOURCES

    def apply(self, table: pd.DataFrame) -> pd.DataFrame:
        keep = np.ones(len(table), dtype=bool)
        if self.hide_trained:
            keep &= ~table["trained"].to_numpy(dtype=bool)
        if set(self.sources) != set(SOURCES):
            keep &= table["source"].map(source_label).isin(self.sources).to_numpy()
        return table[keep]

    def describe(self) -> str:
        """"" when nothing is left out, else what is, for the note above a table."""
        parts = []
        if self.hide_trained:
            parts.append(f"models trained on this test set (\\{TRAINED_MARK}) hidden")
        if set(self.sources) != set(SOURCES):
            parts.append("only " + " and ".join(self.sources) + " results" if self.sources else "no source chosen")
        return "; ".join(parts)


NO_FILTERS = Filters()


def ranked(frame: pd.DataFrame, test_set: str, track: str, rank_by: str = DEFAULT_RANK_KEY,
           filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """Rows of one test set and track that pass `filters`, best first by `rank_by`; `rank` is
    1-based with ties sharing the best rank. Models without a value for `rank_by` come last,
    unranked (NaN). `lookalike`: the row's name reads like another row's (`lookalikes`)."""
    _check_rank_key(rank_by)
    part = frame[(frame["test_set"] == test_set) & (frame["track"] == track)]
    table = filters.apply(part.assign(lookalike=lookalikes(part)))  # a filter hides no lookalike's mark
    ascending = not COLUMNS_BY_KEY[rank_by].higher_is_better
    table = table.sort_values([rank_by, "model_name"], ascending=[ascending, True], na_position="last", kind="mergesort")
    table = table.assign(rank=table[rank_by].rank(method="min", ascending=ascending))
    return table.reset_index(drop=True)


def search(table: pd.DataFrame, query: str | None) -> pd.DataFrame:
    """Rows whose model name or institution contains every word of `query` (case-insensitive)."""
    words = (query or "").lower().split()
    if not words:
        return table
    haystack = (table["model_name"] + " " + table["institution"]).str.lower()
    mask = np.ones(len(table), dtype=bool)
    for word in words:
        mask &= haystack.str.contains(word, regex=False).to_numpy()
    return table[mask]


def best_values(table: pd.DataFrame) -> dict[str, float]:
    """Best mean per column over the whole table (NaN when no model has the column)."""
    best = {}
    for key in METRIC_KEYS:
        col = table[key]
        if col.notna().any():
            best[key] = float(col.max() if COLUMNS_BY_KEY[key].higher_is_better else col.min())
        else:
            best[key] = math.nan
    return best


_MD_SPECIAL = re.compile(r"([\\`*_\[\]()#|<>!~])")


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", str(text))


# between a mean and its CI: no-break spaces, so that "0.833 ± 0.016" never breaks over two
# lines in a narrow column (the column is as wide as the value: page_style.results_layout)
PLUS_MINUS = "\u00a0±\u00a0"


def format_value(mean: float, ci: float, *, best: bool = False) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return MISSING
    text = f"{mean:.{DECIMALS}f}"
    if best:
        text = f"**{text}**"
    if ci is not None and not (isinstance(ci, float) and math.isnan(ci)):
        text += f"{PLUS_MINUS}{ci:.{DECIMALS}f}"
    return text


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def standings(table: pd.DataFrame, rank_by: str, *, with_values: bool = False) -> dict[str, str]:
    """Where each row without a `rank_by` value stands by each metric it has, by result id:
    "3rd of 26 by BLEU; 5th of 20 by BertScore" (ranks among the rows of `table` that have
    that metric, ties sharing the best rank, as `ranked` ranks; metrics with the same place
    share it: "1st of 7 by BLEU, BertScore"; `with_values`: "3rd of 26 by BLEU (0.250)"). A
    run scored without the ranking metric (BLEU only, offline) is then placed all the same."""
    lacking = table[table[rank_by].isna()]
    if lacking.empty:
        return {}
    places: dict[str, dict[str, list[str]]] = {i: {} for i in lacking["id"]}  # id -> place -> metrics
    for key in METRIC_KEYS:
        if key == rank_by or lacking[key].isna().all():
            continue
        column = COLUMNS_BY_KEY[key]
        ranks = table[key].rank(method="min", ascending=not column.higher_is_better)
        n_ranked = int(table[key].notna().sum())
        for rid, rank, mean, ci in zip(table["id"], ranks, table[key], table[f"{key}_ci"]):
            if rid in places and not math.isnan(rank):
                value = f" ({format_value(mean, ci)})" if with_values else ""
                places[rid].setdefault(f"{ordinal(int(rank))} of {n_ranked}", []).append(f"{column.display}{value}")
    return {rid: "; ".join(f"{place} by {', '.join(names)}" for place, names in found.items())
            for rid, found in places.items() if found}


def unranked_cell(source: str, standing: str = "") -> str:
    """The ranking metric's cell of a row without it: why, and where the row stands by the
    metrics it has."""
    text = f"{MISSING} {UNRANKED_WHY[source_label(source)]}"
    return f"{text} · {standing}" if standing else text


def web_url(url) -> str | None:
    """The URL if it is a plain web link, else None: a submitted URL must not become a
    javascript: or data: link, nor break out of the markdown around it."""
    url = str(url or "")
    return url if re.match(r"^https?://[^\s()<>]+$", url) else None


LOOKALIKE_MARK = "⚠ lookalike name"


def lookalikes(table: pd.DataFrame) -> list[bool]:
    """For each row: whether its model's name, or its whole title ("namespace / name"),
    reads the same as another row's that is spelt otherwise (rexrank.store.names.name_key:
    case, lookalike letters, invisible characters): "mallory / MAlRA-2" beside the published
    "MAIRA-2", "stanford-aiml / X" beside "stanford-aimi / X". Nobody owns a name: such rows
    are marked, never refused or merged; a published ReXrank entry is the original and is
    not marked. Two namespaces' models of one name spelt alike are not lookalikes."""
    from rexrank.store.names import name_key

    titles = list(table["model_name"])
    spaces = list(table["namespace"]) if "namespace" in table else [""] * len(titles)
    names = [t[len(ns) + 3:] if ns and t.startswith(f"{ns} / ") else t for t, ns in zip(titles, spaces)]
    spellings: dict[tuple[str, str], set[str]] = {}
    for title, name in zip(titles, names):
        spellings.setdefault(("title", name_key(title)), set()).add(title)
        spellings.setdefault(("name", name_key(name)), set()).add(name)
    published = [s == "published" for s in table["source"]] if "source" in table else [False] * len(titles)
    return [not pub and (len(spellings[("title", name_key(t))]) > 1 or len(spellings[("name", name_key(n))]) > 1)
            for t, n, pub in zip(titles, names, published)]


def model_cell(row, *, link: bool = True) -> str:
    name = md_escape(row["model_name"])
    url = web_url(row.get("model_url"))
    if link and url:
        name = f"[{name}]({url})"
    if row["trained"]:
        name += f" \\{TRAINED_MARK}"
    if row.get("lookalike"):
        name += f" {LOOKALIKE_MARK}"
    return name


def column_header(key: str, rank_by: str) -> str:
    col = COLUMNS_BY_KEY[key]
    arrow = "↑" if col.higher_is_better else "↓"
    return f"{col.display} {arrow}" + (f" {sort_mark(key)}" if key == rank_by else "")


def sort_mark(key: str) -> str:
    """The ranking column's mark: ▼ where the values fall down the table (higher is better),
    ▲ where they rise (lower is better: best = lowest first)."""
    return "▼" if COLUMNS_BY_KEY[key].higher_is_better else "▲"


def shown_columns(columns, rank_by: str, table: pd.DataFrame | None = None) -> tuple[str, ...]:
    """The metric columns a view shows, in the site's order: those chosen and always the
    ranking metric. Nothing chosen (None: an API call, not the page's column picker): the
    default ones and an optional one where a row of `table` has it."""
    if columns is None:
        chosen = set(DEFAULT_COLUMNS)
        if table is not None:
            chosen |= {k for k in METRIC_KEYS if k in table and table[k].notna().any()}
    else:
        chosen = set(columns)
    return tuple(k for k in METRIC_KEYS if k in chosen | {rank_by})


def display_slots(keys, rank_by: str, *, with_n: bool = True, with_tier: bool = True) -> tuple[str, ...]:
    """A test-set grid's columns, as fixed names and metric keys: rank, model and the ranking
    metric first (on a phone they are what fits), n and tier where a row has them, then the
    rest. `keys`: the metric columns shown (`shown_columns`)."""
    first = ["Rank", "Model", rank_by, *(["n"] if with_n else []), *(["Tier"] if with_tier else [])]
    return (*first, "Institution", "Date", *(k for k in keys if k != rank_by), "Source")


def slot_header(slot: str, rank_by: str) -> str:
    return column_header(slot, rank_by) if slot in COLUMNS_BY_KEY else slot


def display_headers(rank_by: str = DEFAULT_RANK_KEY, columns=None, table: pd.DataFrame | None = None, *,
                    with_n: bool = True, with_tier: bool = True) -> list[str]:
    slots = display_slots(shown_columns(columns, rank_by, table), rank_by, with_n=with_n, with_tier=with_tier)
    return [slot_header(s, rank_by) for s in slots]


def year(date) -> str:
    """The year of a date ("2025", "2026-11-25" -> "2026"): the precision every result has
    (the published ones give a year only), so the Date column reads the same in every row."""
    match = re.match(r"\s*(\d{4})", str(date or ""))
    return match.group(1) if match else md_escape(str(date or ""))


def rank_key_for_header(header: str) -> str | None:
    """The column key behind a displayed header ("BLEU ↑", "1/RadCliQ-v1 ↑ ▼", "GREEN"), or
    None for a header that is not a metric (Model, Rank, ...): what a header click ranks by."""
    name = re.sub(r"(\s+[↑↓▼▲])+$", "", str(header or "").strip())
    return next((c.key for c in LEADERBOARD_COLUMNS if c.display == name), None)


def shown_n(table: pd.DataFrame, rank_by: str) -> np.ndarray:
    """Studies each row's ranking metric was computed on (the result's n where the metric does
    not say), NaN where unknown."""
    n = table[f"{rank_by}_n"].to_numpy(np.float64)
    return np.where(np.isnan(n), table["n"].to_numpy(np.float64), n)


def has_tiers(tiers: dict | None) -> bool:
    """A Tier column only where at least two rows have per-study scores: one row alone is no tier."""
    return tiers is not None and len(tiers) >= 2


def display_table(table: pd.DataFrame, best: dict[str, float], rank_by: str = DEFAULT_RANK_KEY, *,
                  columns=None, tiers: dict | None = None, with_n: bool | None = None,
                  placed: dict[str, str] | None = None) -> pd.DataFrame:
    """Ranked rows -> strings: rank, linked model name (+ trained marker), the ranking metric,
    n (`with_n`; None: where a row has it), tier (`tiers`: {id: tier}, shown where two rows or
    more have one; empty for the others), institution, year, one "mean ± CI" cell per other
    shown column with the column's best value in bold, source. A row without the ranking
    metric says why in its cell, and where it stands by the metrics it has (`placed`:
    `standings` of the whole table, before a search; None: of `table`). Built column by
    column (a table of a thousand results is rebuilt whenever one of them changes)."""
    placed = standings(table, rank_by) if placed is None else placed
    keys = shown_columns(columns, rank_by, table)
    rank = table["rank"].to_numpy(np.float64)
    n = shown_n(table, rank_by)
    with_n = bool((~np.isnan(n)).any()) if with_n is None else with_n
    slots = display_slots(keys, rank_by, with_n=with_n, with_tier=has_tiers(tiers))
    needed = ["model_name", "model_url", "trained"]
    marked = table["lookalike"] if "lookalike" in table else lookalikes(table)
    cells = {
        "Rank": [MISSING if math.isnan(r) else str(int(r)) for r in rank],
        "Model": [model_cell({**dict(zip(needed, row)), "lookalike": look})
                  for row, look in zip(zip(*(table[c] for c in needed)), marked)],
        "Tier": [str(tiers[i]) if i in tiers else "" for i in table["id"]] if has_tiers(tiers) else None,
        "Institution": [md_escape(i) for i in table["institution"]],
        "Date": [year(d) for d in table["date"]],
        "n": [MISSING if math.isnan(x) else str(int(x)) for x in n],
        "Source": [source_label(x) for x in table["source"]],
    }
    out = {}
    for slot in slots:
        if slot in COLUMNS_BY_KEY:
            values = metric_cells(table[slot].to_numpy(np.float64), table[f"{slot}_ci"].to_numpy(np.float64), best[slot])
            if slot == rank_by:  # an unranked row says why, and where it stands, in the row itself
                values = [v if v != MISSING else unranked_cell(s, placed.get(i, ""))
                          for v, s, i in zip(values, table["source"], table["id"])]
            out[slot_header(slot, rank_by)] = values
        else:
            out[slot] = cells[slot]
    return pd.DataFrame(out, columns=list(out))


def metric_cells(means: np.ndarray, cis: np.ndarray, best: float) -> list[str]:
    """`format_value` for a whole column: "mean ± CI", the best value bold, "–" where none."""
    text = np.char.mod(f"%.{DECIMALS}f", np.nan_to_num(means)).astype(object)
    if not math.isnan(best):
        bold = ~np.isnan(means) & (np.abs(means - best) <= 1e-12)
        text[bold] = "**" + text[bold] + "**"
    has_ci = ~np.isnan(cis)
    if has_ci.any():
        text[has_ci] = text[has_ci] + np.char.mod(f"{PLUS_MINUS}%.{DECIMALS}f", cis[has_ci]).astype(object)
    text[np.isnan(means)] = MISSING
    return text.tolist()


def overview(frame: pd.DataFrame, track: str, rank_by: str = DEFAULT_RANK_KEY, top: int | None = 10,
             test_sets=LEADERBOARD_TEST_SETS, *, ranked_tables: dict | None = None, markdown: bool = True) -> pd.DataFrame:
    """Top models per test set side by side (as the ReXrank site's overview): one column per
    test set, cell = model (institution), trained marker as in the test-set tables.
    `ranked_tables`: {test_set: ranked(...)} already computed for this track and metric.
    `markdown=False`: plain text cells (the CSV download)."""
    cells = {t: overview_cells(ranked_tables[t] if ranked_tables else ranked(frame, t, track, rank_by), top)
             for t in test_sets}
    return overview_grid(cells, test_sets, markdown=markdown)


def overview_grid(cells: dict, test_sets=LEADERBOARD_TEST_SETS, *, markdown: bool = True) -> pd.DataFrame:
    """The overview from each test set's `overview_cells` (markdown or plain), in the order of
    `test_sets`, shorter columns padded with empty cells."""
    columns = {TEST_SET_LABELS.get(t, t): cells[t][0 if markdown else 1] for t in test_sets}
    depth = max((len(v) for v in columns.values()), default=0)
    data = {"Rank": [str(i + 1) for i in range(depth)]}
    for label, column in columns.items():
        data[label] = column + [""] * (depth - len(column))
    return pd.DataFrame(data)


def overview_cells(table: pd.DataFrame, top: int | None = 10) -> tuple[list[str], list[str]]:
    """One test set's overview column: (markdown cells, plain cells) of its top ranked models."""
    table = table[table["rank"].notna()]
    if top is not None:
        table = table.head(top)
    rows = table[["model_name", "model_url", "trained", "institution", "lookalike"]].to_dict("records")
    return ([f"{model_cell(r, link=False)} ({md_escape(r['institution'])})" for r in rows],
            [f"{r['model_name']}{' ' + TRAINED_MARK if r['trained'] else ''}"
             f"{' ' + LOOKALIKE_MARK if r['lookalike'] else ''} ({r['institution']})" for r in rows])


CSV_FIXED = ("Test set", "Track", "Rank", "Tier", "Model", "Institution", "Date", "n", "Trained on this test set",
             "Lookalike name")


def _ints(values) -> pd.array:
    return pd.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v) for v in values], dtype="Int64")


def csv_table(table: pd.DataFrame, test_set: str, track: str, *, rank_by: str = DEFAULT_RANK_KEY,
              tiers: dict | None = None) -> pd.DataFrame:
    """Ranked rows as the plain table a user downloads: the rows the grid shows, in its order,
    without markdown, means at full precision and each CI half-width in its own column
    (empty where the result has none); n = studies the ranking metric was computed on (empty
    where the result does not say), Tier empty where there are no per-study scores."""
    columns = [*CSV_FIXED]
    for key in METRIC_KEYS:
        columns += [COLUMNS_BY_KEY[key].display, f"{COLUMNS_BY_KEY[key].display} 95% CI ±"]
    columns += ["Source", "Model URL"]
    n = table[f"{rank_by}_n"].where(table[f"{rank_by}_n"].notna(), table["n"])
    out = pd.DataFrame({
        "Test set": TEST_SET_LABELS.get(test_set, test_set),
        "Track": TRACK_LABELS.get(track, track),
        "Rank": _ints(table["rank"]),
        "Tier": _ints([(tiers if has_tiers(tiers) else {}).get(i) for i in table["id"]]),
        "Model": table["model_name"],
        "Institution": table["institution"],
        "Date": table["date"],
        "n": _ints(n),
        "Trained on this test set": ["yes" if t else "" for t in table["trained"]],
        "Lookalike name": ["yes" if look else "" for look in table["lookalike"]],  # reads like another row's (`lookalikes`)
        **{COLUMNS_BY_KEY[k].display: table[k] for k in METRIC_KEYS},
        **{f"{COLUMNS_BY_KEY[k].display} 95% CI ±": table[f"{k}_ci"] for k in METRIC_KEYS},
        "Source": [source_label(x) for x in table["source"]],
        "Model URL": table["model_url"],
    }, index=table.index)
    return out[columns].reset_index(drop=True)


def table_note(n_shown: int, n_total: int, query: str | None, track: str, *, rank_by: str = DEFAULT_RANK_KEY,
               n_unranked: int = 0, none_ranked: bool = False, tiers_note: str = "", filters: Filters = NO_FILTERS,
               values_note: str = "") -> str:
    """The line above a test-set table: how many results, what a search matched, why rows
    are unranked (`n_unranked` of those shown; `none_ranked`: no row of the table has the
    ranking metric), what its values are (`values_note`) and `tiers_note` (`tier_note`)."""
    words = (query or "").split()
    track_label = TRACK_LABELS.get(track, track)
    left_out = filters.describe()
    if n_total == 0:
        if left_out:
            return f"No results in the {track_label} track on this test set with these filters ({left_out})."
        return f"No results in the {track_label} track on this test set yet."
    if not words:
        text = f"{plural(n_total, 'result')} in the {track_label} track."
    else:
        # the search is in the search box; not repeated here, where a link's q= would put
        # any text (a URL, say) into the page
        if n_shown == 0:
            text = (f"No model or institution matches the search: the table is empty. "
                    f"Clear the search to see all {plural(n_total, 'result')}.")
        else:
            text = f"{n_shown} of {plural(n_total, 'result')} {'matches' if n_shown == 1 else 'match'} the search."
    if left_out:
        text += f" Filters: {left_out}."
    metric = COLUMNS_BY_KEY[rank_by].display
    if none_ranked:
        text += f" No result here has a {metric} value, so none is ranked (–): rank by another metric."
    elif n_unranked:
        text += (f" {plural(n_unranked, 'result')} without a {metric} value: unranked (–), listed last; "
                 + ("its row gives its place by the metrics it has." if n_unranked == 1 else
                    "their rows give their places by the metrics they have."))
    return text + "".join(" " + part for part in (values_note, tiers_note) if part)


def values_note(table: pd.DataFrame) -> str:
    """What the values of the rows shown are, said only where they are shown: "mean ± 95 % CI"
    and n where a row has a CI, and why the published rows have neither (the legend above
    every table cannot promise them: the published tables have none)."""
    cis = table[[f"{k}_ci" for k in METRIC_KEYS]].notna().any(axis=1)
    if not cis.any():
        return ""
    published = int((table["source"].map(source_label) == "published").sum())
    why = f"; {plural(published, 'published result')} {'gives' if published == 1 else 'give'} means only" if published else ""
    return f"Values: mean ± 95\u00a0% CI, n = studies scored{why}."


def elsewhere_note(matches: dict[str, int], link: Callable[[str], str]) -> str:
    """Where a search that matched nothing on this tab does match: "It matches on
    [IU-Xray](?tab=iu_xray&q=…) (1 result)." (`matches`: test set -> matching results;
    `link(test set)`: the address of the same view on that tab)."""
    found = [f"[{TEST_SET_LABELS.get(t, t)}]({link(t)}) ({plural(n, 'result')})" for t, n in matches.items() if n]
    return f"It matches on {', '.join(found)}." if found else ""


def rank_key_of(frame: pd.DataFrame, test_set: str, track: str, model: str, rank_by: str = DEFAULT_RANK_KEY) -> str:
    """The ranking under which `model`'s result on this table has a rank: `rank_by` when it has
    that value (or has no result here), else the first of the ranking menu's metrics it has
    (a run scored offline with BLEU only is ranked by BLEU)."""
    rows = frame[(frame["test_set"] == test_set) & (frame["track"] == track) & (frame["model_name"] == model)]
    if rows.empty or rows[rank_by].notna().any():
        return rank_by
    return next((key for _, key in rank_choices() if rows[key].notna().any()), rank_by)


def tier_note(table: pd.DataFrame, tiers: dict | None) -> str:
    """Which rows of a table with a Tier column have no tier, and why (the tier is a paired
    test on per-study scores, which published results do not have)."""
    if not has_tiers(tiers):
        return ""
    untiered = table[~table["id"].isin(list(tiers))]
    text = f"Tiers compare the {len(tiers)} results with per-study scores (About)"
    if untiered.empty:
        return text + "."
    published = int((untiered["source"].map(source_label) == "published").sum())
    whys = [f"{published} published (the site gives means only)" if published else "",
            f"{len(untiered) - published} submitted without per-study scores of the ranking metric"
            if len(untiered) > published else ""]
    return text + "; no tier for " + " and ".join(w for w in whys if w) + "."


def overview_note(ranked_tables: dict[str, pd.DataFrame], rank_by: str) -> str:
    """Why an overview column is empty: its test set has results, none with the ranking metric."""
    metric = COLUMNS_BY_KEY[rank_by].display
    empty = [f"{TEST_SET_LABELS.get(t, t)} ({plural(len(table), 'result')})" for t, table in ranked_tables.items()
             if len(table) and table["rank"].isna().all()]
    if not empty:
        return ""
    return (f"No result on {', '.join(empty)} has a {metric} value, so nothing is ranked there: "
            "rank by another metric to see them.")


@dataclass(frozen=True)
class TableView:
    """One test set's table as the page shows it: grid cells (markdown), the same rows as a
    plain table (the CSV download), and the note above it."""

    display: pd.DataFrame
    plain: pd.DataFrame
    note: str
    slots: tuple[str, ...] = ()  # the grid's columns (`display_slots`), for their widths
    n_shown: int = 0  # rows after the search
    ci_columns: frozenset = frozenset()  # metric columns with a CI in a shown row (wider: "0.833 ± 0.016")


@dataclass(frozen=True)
class PageViews:
    overview: pd.DataFrame
    overview_plain: pd.DataFrame
    tables: dict[str, TableView]
    overview_note: str = ""


def page_views(frame: pd.DataFrame, track: str, rank_by: str = DEFAULT_RANK_KEY, query: str = "",
               test_sets=LEADERBOARD_TEST_SETS, *, cached: PartCache = uncached, filters: Filters = NO_FILTERS,
               columns=None, per_study=None, p_cache: dict | None = None,
               link: Callable[[str], str] | None = None) -> PageViews:
    """Everything the leaderboard's tabs show for one track, ranking, filters and search; each
    table is ranked once. Best values come from the whole (filtered) table, before the search.
    `cached` keeps the tables (and tiers) of test sets whose rows did not change since it last
    saw them. `per_study(result id)`: a result's per-study scores, for the tiers (None: no tiers);
    `p_cache`: the tiers' paired tests kept between calls (`tiers.table_tiers`). `link(test set)`:
    the address of this view on another tab, for a search that matches nothing on one tab
    but does on others (None: not said)."""
    ranked_tables = {t: ranked_part(frame, t, track, rank_by, cached, filters) for t in test_sets}
    columns = None if columns is None else tuple(columns)
    views = {}
    for t in test_sets:
        tiers = (cached(("tiers", rank_by, filters), (t, track), lambda t=t: table_tiers(ranked_tables[t], rank_by, per_study, p_cache))
                 if per_study else None)
        views[t] = cached(("view", rank_by, query, filters, columns), (t, track),
                          lambda t=t, tiers=tiers: test_set_view(ranked_tables[t], t, track, rank_by, query,
                                                                 filters=filters, columns=columns, tiers=tiers))
    if link is not None and (query or "").strip():
        for t, view in views.items():
            if view.n_shown == 0:
                hint = elsewhere_note({o: views[o].n_shown for o in test_sets if o != t}, link)
                views[t] = replace(view, note=f"{view.note} {hint}" if hint else view.note)
    cells = {t: cached(("overview", rank_by, filters), (t, track), lambda t=t: overview_cells(ranked_tables[t]))
             for t in test_sets}
    return PageViews(
        overview=overview_grid(cells, test_sets),
        overview_plain=overview_grid(cells, test_sets, markdown=False),
        tables=views,
        overview_note=overview_note(ranked_tables, rank_by),
    )


def ranked_part(frame: pd.DataFrame, test_set: str, track: str, rank_by: str, cached: PartCache = uncached,
                filters: Filters = NO_FILTERS) -> pd.DataFrame:
    """`ranked(...)`, through a part cache."""
    return cached(("ranked", rank_by, filters), (test_set, track), lambda: ranked(frame, test_set, track, rank_by, filters))


def test_set_view(table: pd.DataFrame, test_set: str, track: str, rank_by: str, query: str, *,
                  filters: Filters = NO_FILTERS, columns=None, tiers: dict | None = None) -> TableView:
    """A ranked table as its tab shows it (grid cells, CSV rows, note), after the search."""
    shown = search(table, query)
    with_n = bool((~np.isnan(shown_n(table, rank_by))).any())  # of the whole table: a search keeps the columns
    slots = display_slots(shown_columns(columns, rank_by, shown), rank_by, with_n=with_n, with_tier=has_tiers(tiers))
    return TableView(
        display=display_table(shown, best_values(table), rank_by, columns=columns, tiers=tiers, with_n=with_n,
                              placed=standings(table, rank_by)),
        plain=csv_table(shown, test_set, track, rank_by=rank_by, tiers=tiers),
        note=table_note(len(shown), len(table), query, track, rank_by=rank_by,
                        n_unranked=int(shown["rank"].isna().sum()), none_ranked=bool(len(table)) and table["rank"].isna().all(),
                        tiers_note=tier_note(table, tiers), filters=filters, values_note=values_note(shown)),
        slots=slots,
        n_shown=len(shown),
        ci_columns=frozenset(k for k in METRIC_KEYS if shown[f"{k}_ci"].notna().any()),
    )


def system_table(frame: pd.DataFrame, test_set: str, track: str) -> pd.DataFrame:
    """Rows = systems (model name; the source is appended when a model has results from
    several sources), columns = leaderboard keys: the input of rexrank.analysis.figures."""
    table = frame[(frame["test_set"] == test_set) & (frame["track"] == track)]
    names = table["model_name"]
    dup = names.duplicated(keep=False)
    index = names.where(~dup, names + " (" + table["source"] + ")")
    out = table[list(METRIC_KEYS)].copy()
    out.index = pd.Index(index.tolist(), name="system")
    return out
