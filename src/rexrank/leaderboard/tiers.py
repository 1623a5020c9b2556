"""Statistical tiers of a ranked leaderboard table.

Walking down the ranking, each result with per-study scores is compared with the next
result above it that also has them: a paired t-test on the ranking metric's per-study
scores (studies both scored), two-sided. The p-values of all these neighbour tests in one
table are Holm-adjusted together; a result starts a new tier when its adjusted p-value is
below ALPHA, else it shares the tier of the one above. Results without per-study scores
(the published rows) get no tier; the table shows tiers where two rows or more have one. Computed once per table version (the source's part
cache), never per page load.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from rexrank.results_schema import COLUMNS_BY_KEY

ALPHA = 0.05

def _aligned(data: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(study ids, scores) of one result, sorted by id, studies without a score left out."""
    frame = data[["id", column]].dropna()
    order = np.argsort(frame["id"].to_numpy(dtype=str), kind="stable")
    return frame["id"].to_numpy(dtype=str)[order], frame[column].to_numpy(np.float64)[order]


def paired_p(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[float, int]:
    """(two-sided paired t-test p-value, studies used) of two results' aligned scores
    (`_aligned`), over the studies both scored; p = 1 when fewer than 2 such studies or the
    differences are all equal to 0 (no evidence of a difference), 0 when they are all equal
    to another value (a constant shift)."""
    from scipy.special import stdtr

    common, ia, ib = np.intersect1d(a[0], b[0], assume_unique=True, return_indices=True)
    n = common.size
    if n < 2:
        return 1.0, n
    d = a[1][ia] - b[1][ib]
    sd = float(np.std(d, ddof=1))
    mean = float(d.mean())
    if sd == 0.0:
        return (1.0 if mean == 0.0 else 0.0), n
    t = mean / (sd / np.sqrt(n))
    return float(2.0 * stdtr(n - 1, -abs(t))), n


def table_tiers(table: pd.DataFrame, rank_by: str, per_study: Callable[[str], pd.DataFrame | None],
                p_cache: dict | None = None) -> dict[str, int]:
    """{result id: tier} for the ranked rows (best first) of `table` that have per-study
    scores for `rank_by`; rows left out have no tier. `p_cache`: {(id above, id below,
    column): p} kept by the caller while both results stay the same, so that a new result
    costs the tests of its own neighbours only."""
    from rexrank.analysis.uncertainty import holm

    column = COLUMNS_BY_KEY[rank_by].per_study_column if rank_by in COLUMNS_BY_KEY else None
    if column is None:
        return {}
    scored = []
    for rid in table.loc[table["rank"].notna() & table["per_study_available"], "id"]:
        data = per_study(rid)
        if data is not None and column in data and "id" in data:
            scored.append((rid, data))
    if not scored:
        return {}
    cache = {} if p_cache is None else p_cache
    aligned: dict[str, tuple] = {}

    def scores(rid, data):
        if rid not in aligned:
            aligned[rid] = _aligned(data, column)
        return aligned[rid]

    p_values = []
    for (up, up_data), (down, down_data) in zip(scored, scored[1:]):
        key = (up, down, column)
        if key not in cache:
            cache[key] = paired_p(scores(up, up_data), scores(down, down_data))[0]
        p_values.append(cache[key])
    adjusted = holm(p_values)
    tiers = {scored[0][0]: 1}
    tier = 1
    for (rid, _), p in zip(scored[1:], adjusted):
        if p < ALPHA:
            tier += 1
        tiers[rid] = tier
    return tiers
