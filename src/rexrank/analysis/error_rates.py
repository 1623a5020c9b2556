"""Error-free rates from FineRadScore severities (ReXrank Challenge paper, Figure 1).

Input: per-study *maximum* line severity on FineRadScore's 0–4 scale (0 no error,
1 not actionable, 2 actionable non-urgent, 3 urgent, 4 emergent) in column `fineradscore`.
- no actionable error  = max severity <= 1
- no significant error = max severity <= 2
The paper gives no formula for these; the thresholds are our reading (see
shared reference metrics_llm.md §2.5, marked unverified there) and are parameters.
Intervals are Wilson score intervals for a binomial proportion (scipy).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rexrank.analysis.io import AnalysisError, RunSet
from rexrank.analysis.strata import ALL

SEVERITY_COLUMN = "fineradscore"
DEFAULT_THRESHOLDS = {"no actionable error": 1, "no significant error": 2}


def _check_severities(values: np.ndarray, column: str) -> None:
    kept = values[~np.isnan(values)]
    if kept.size and ((kept < 0).any() or (kept > 4).any() or (np.abs(kept - np.round(kept)) > 1e-9).any()):
        bad = kept[(kept < 0) | (kept > 4) | (np.abs(kept - np.round(kept)) > 1e-9)][:5].tolist()
        raise AnalysisError(
            f"column {column!r} does not hold per-study maximum FineRadScore severities (integers 0–4): "
            f"found {bad}; pass the max-severity column"
        )


def error_rates(
    runs: RunSet,
    *,
    strata: pd.Series | None = None,
    column: str = SEVERITY_COLUMN,
    thresholds: dict[str, float] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Long table: stratum, system, measure, k (studies meeting it), n (scored), rate,
    ci_low, ci_high."""
    from scipy.stats import binomtest

    thresholds = thresholds or DEFAULT_THRESHOLDS
    frame = runs.matrix(column)
    _check_severities(frame.to_numpy(), column)
    labels = pd.Series(ALL, index=runs.ids) if strata is None else strata.loc[runs.ids].astype(str)
    rows = []
    for stratum in dict.fromkeys(labels):
        sub = frame[labels == stratum]
        for system in runs.systems:
            sev = sub[system].dropna().to_numpy()
            for measure, max_sev in thresholds.items():
                n = int(sev.size)
                k = int((sev <= max_sev).sum())
                if n:
                    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
                    low, high = ci.low, ci.high
                else:
                    low = high = np.nan
                rows.append({"stratum": stratum, "system": system, "measure": measure, "max_severity": max_sev,
                             "k": k, "n": n, "n_missing": int(len(sub) - n),
                             "rate": k / n if n else np.nan, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)
