"""Metrics against each other across systems (ReXrank Challenge paper, Figure 3): the
correlation, over the systems of one test set, of their metric means.

Works on a system-level table (rows = systems, columns = metrics — e.g. a published
leaderboard table) or a RunSet (per-study means are taken first). Pearson uses pandas;
Kendall is tau-b (pandas calls scipy.stats.kendalltau). Cells use the systems having both
metrics (pairwise complete)."""
from __future__ import annotations

import pandas as pd

from rexrank.analysis.io import AnalysisError, RunSet, as_system_table

METHODS = ("pearson", "kendall", "spearman")


def metric_correlation(table: "pd.DataFrame | RunSet", method: str = "pearson", *, min_systems: int = 3) -> pd.DataFrame:
    if method not in METHODS:
        raise AnalysisError(f"unknown correlation method {method!r}; use one of {', '.join(METHODS)}")
    systems = as_system_table(table)
    if systems.shape[1] < 2:
        raise AnalysisError(f"need at least two metrics to correlate, got {list(systems.columns)}")
    if len(systems) < min_systems:
        raise AnalysisError(f"need at least {min_systems} systems to correlate metrics across systems, got {len(systems)}")
    return systems.corr(method=method, min_periods=min_systems)
