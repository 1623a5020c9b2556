"""Statistical tiers of a ranked leaderboard table.

Walking down the ranking, each result with per-study scores is compared with the next
result above it that also has them: a paired t-test on the ranking metric's per-study
scores (studies both scored), two-sided. The p-values of all these neighbour tests in one
table are Holm-adjusted together; a result starts a new tier when its adjusted p-value is
below ALPHA, else it shares the tier of the one above. Results without per-study scores
(the published rows) get no tier. Computed once per table version (the source's part
cache), never per page load.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

ALPHA = 0.05
METHOD = ("paired t-test on the ranking metric's per-study scores against the next model above "
          "with per-study scores, Holm-corrected over the table's neighbour tests, α = 0.05")
NO_TIER = "n/a"

# leaderboard key -> per-study column written by rexrank.scoring (1/mean columns are
# tested on the per-study scores themselves: the order of the means is the same)
PER_STUDY_COLUMN = {
    "bleu2": "bleu2",
    "bertscore": "bertscore",
    "sembscore": "sembscore",
    "radgraph": "radgraph",
    "radcliq_v1_inv": "radcliq_v1",
    "ratescore": "ratescore",
    "green": "green",
    "fineradscore_inv": "fineradscore",
}


def paired_p(a: pd.DataFrame, b: pd.DataFrame, column: str) -> tuple[float, int]:
    """(two-sided paired t-test p-value, studies used) on `column`, over the studies both
    scored; p = 1 when fewer than 2 such studies or the differences are all equal (no
    evidence of a difference)."""
    from scipy.stats import ttest_rel

    joined = a[["id", column]].merge(b[["id", column]], on="id", suffixes=("_a", "_b")).dropna()
    if len(joined) < 2:
        return 1.0, len(joined)
    d = joined[f"{column}_a"].to_numpy(np.float64) - joined[f"{column}_b"].to_numpy(np.float64)
    if np.all(d == d[0]):
        return (1.0 if d[0] == 0 else 0.0), len(joined)  # no spread: identical, or a constant shift
    p = float(ttest_rel(joined[f"{column}_a"], joined[f"{column}_b"]).pvalue)
    return (1.0 if math.isnan(p) else p), len(joined)


def table_tiers(table: pd.DataFrame, rank_by: str, per_study: Callable[[str], pd.DataFrame | None]) -> dict[str, int]:
    """{result id: tier} for the ranked rows (best first) of `table` that have per-study
    scores for `rank_by`; rows left out have no tier."""
    from rexrank.analysis.uncertainty import holm

    column = PER_STUDY_COLUMN.get(rank_by)
    if column is None:
        return {}
    scored = []
    for row in table[table["rank"].notna() & table["per_study_available"]][["id"]].itertuples(index=False):
        data = per_study(row.id)
        if data is not None and column in data and "id" in data:
            scored.append((row.id, data))
    if not scored:
        return {}
    p_values = [paired_p(above, below, column)[0] for (_, above), (_, below) in zip(scored, scored[1:])]
    adjusted = holm(p_values)
    tiers = {scored[0][0]: 1}
    tier = 1
    for (rid, _), p in zip(scored[1:], adjusted):
        if p < ALPHA:
            tier += 1
        tiers[rid] = tier
    return tiers
