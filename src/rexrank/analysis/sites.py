"""Per-site ranking (ReXrank Challenge paper, Figure 2: how systems' ranks vary across the
sites of ReXGradient). Sites are the `top_n` with the most studies (ties by name)."""
from __future__ import annotations

import pandas as pd

from rexrank.analysis.io import AnalysisError, RunSet
from rexrank.analysis.strata import ALL
from rexrank.analysis.uncertainty import complete_cases, rank_intervals

DEFAULT_TOP_N = 10


def top_sites(sites: pd.Series, top_n: int = DEFAULT_TOP_N) -> list[str]:
    if top_n < 1:
        raise AnalysisError(f"top-N sites must be >= 1, got {top_n}")
    counts = sites.value_counts()
    order = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return [str(site) for site, _ in order[:top_n]]


def site_ranking(
    runs: RunSet,
    sites: pd.Series,
    metric: str,
    *,
    top_n: int = DEFAULT_TOP_N,
    resamples: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """Long table (site, n, system, mean, rank[, rank_low, rank_high]) for all studies
    (site "all") and each of the top-N sites. Rank 1 = best on `metric`."""
    if len(runs.systems) < 2:
        raise AnalysisError("a per-site ranking needs at least two systems")
    sites = sites.loc[runs.ids].astype(str)
    chosen = top_sites(sites, top_n)
    rows = []
    for site in [ALL, *chosen]:
        ids = runs.ids if site == ALL else sites.index[sites == site]
        frame, n_excluded = complete_cases(runs.matrix(metric, ids))
        if len(frame) < 2:
            raise AnalysisError(f"site {site!r}: fewer than 2 studies scored by every system on {metric}")
        ranks = rank_intervals(frame, higher_is_better=runs.higher_is_better(metric),
                               resamples=max(resamples, 1), seed=seed)
        for r in ranks.itertuples():
            row = {"site": site, "n": len(frame), "n_excluded": n_excluded, "system": r.system,
                   "metric": metric, "mean": r.mean, "rank": r.rank}
            if resamples:
                row.update(rank_low=r.rank_low, rank_high=r.rank_high)
            rows.append(row)
    return pd.DataFrame(rows)


def rank_matrix(table: pd.DataFrame, value: str = "rank") -> pd.DataFrame:
    """Systems × sites (overall first, then by study count) of `value`, systems ordered by
    overall rank."""
    wide = table.pivot(index="system", columns="site", values=value)
    sites = list(dict.fromkeys(table["site"]))
    overall = table[table["site"] == sites[0]].sort_values(["rank", "system"])["system"]
    return wide.loc[list(overall), sites]
