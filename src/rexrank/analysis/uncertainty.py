"""Uncertainty of means, differences and ranks over studies.

- normal CI: mean ± 1.96 × SEM (sample SD), the papers' method (rexrank.stats).
- percentile bootstrap: studies resampled with replacement, seeded. All systems are
  resampled with the *same* study draws (a paired design), so rank intervals and
  differences keep the correlation between systems.
- paired bootstrap test: CI of the mean difference; two-sided p-value from the bootstrap
  distribution centred on the null (Koehn 2004; Berg-Kirkpatrick et al. 2012).
- approximate randomisation (sign-flip) test: under the null the two systems' scores on a
  study are exchangeable, so the per-study difference flips sign at random
  (Noreen 1989; Riezler & Maxwell 2005). p = (1 + #{|T*| >= |T|}) / (1 + R).
- effect size: Cohen's d_z = mean(d) / sd(d) of the per-study differences.
- Holm step-down adjustment for the many pairwise comparisons.

Resampling uses multinomial count weights and a matrix product (equivalent to index
resampling) in chunks, so 1,000 resamples of 10,000 studies × 24 systems stay fast.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from rexrank.analysis.io import AnalysisError
from rexrank.stats import PAPER_Z, aggregate

DEFAULT_RESAMPLES = 1000
_CHUNK_CELLS = 4_000_000  # resample-weight cells per chunk (~32 MB as float64)


def _matrix(values) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise AnalysisError(f"expected studies × systems scores, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise AnalysisError("scores contain NaN; drop unscored studies first (complete_cases)")
    if arr.shape[0] < 2:
        raise AnalysisError(f"need at least 2 studies to resample, got {arr.shape[0]}")
    return arr


def _weight_chunks(n: int, resamples: int, rng: np.random.Generator):
    """Yield (k, n) bootstrap count matrices: row b counts how often each study is drawn
    in resample b (n draws with replacement — a multinomial(n, 1/n) row, built by bincount
    because numpy's multinomial is slow for many categories)."""
    if resamples < 1:
        raise AnalysisError(f"bootstrap resamples must be >= 1, got {resamples}")
    step = max(1, _CHUNK_CELLS // max(n, 1))
    for start in range(0, resamples, step):
        k = min(step, resamples - start)
        idx = rng.integers(0, n, size=(k, n)) + (np.arange(k) * n)[:, None]
        yield np.bincount(idx.ravel(), minlength=k * n).reshape(k, n).astype(np.float64)


def bootstrap_means(values, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """(resamples, systems) matrix of bootstrap means; every row uses one study draw for
    all systems."""
    x = _matrix(values)
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    return np.vstack([w @ x / n for w in _weight_chunks(n, resamples, rng)])


def normal_ci(values) -> tuple[float, float, float]:
    """(mean, low, high) with the papers' 1.96 × SEM half-width."""
    s = aggregate(values)
    return s.mean, s.mean - s.ci95, s.mean + s.ci95


def percentile_ci(values, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95):
    """Percentile bootstrap CI of the mean, per column: (low, high) arrays."""
    means = bootstrap_means(values, resamples=resamples, seed=seed)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha], axis=0)
    return low, high


@dataclass(frozen=True)
class PairedTest:
    method: str
    n: int
    mean_a: float
    mean_b: float
    difference: float  # mean(a - b)
    ci_low: float  # 95 % CI of the difference (bootstrap percentile, or normal for AR)
    ci_high: float
    p_value: float
    effect_size: float  # Cohen's d_z
    resamples: int
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def _paired(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise AnalysisError(f"paired scores must be two 1-D arrays of equal length, got {a.shape} and {b.shape}")
    return _matrix(a - b)[:, 0]


def cohens_dz(d: np.ndarray) -> float:
    sd = float(np.std(d, ddof=1)) if d.size > 1 else math.nan
    mean = float(d.mean())
    if not sd:
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / sd


def paired_bootstrap(a, b, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95) -> PairedTest:
    d = _paired(a, b)
    observed = float(d.mean())
    boot = bootstrap_means(d, resamples=resamples, seed=seed)[:, 0]
    alpha = (1 - level) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    # Null distribution: the bootstrap distribution shifted to mean zero.
    extreme = int(np.sum(np.abs(boot - observed) >= abs(observed) - 1e-12))
    p = (1 + extreme) / (1 + resamples)
    return PairedTest("paired bootstrap", d.size, float(np.mean(a)), float(np.mean(b)), observed,
                      float(low), float(high), p, cohens_dz(d), resamples, seed)


def randomisation_test(a, b, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> PairedTest:
    """Approximate randomisation (paired sign-flip) test of mean(a) == mean(b).
    Its CI is the normal one (1.96 × SEM of the differences): the test itself gives none."""
    d = _paired(a, b)
    n = d.size
    observed = float(d.mean())
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_CELLS // n)
    extreme = 0
    for start in range(0, resamples, step):
        k = min(step, resamples - start)
        signs = rng.integers(0, 2, size=(k, n), dtype=np.int8) * 2 - 1
        stats = signs @ d / n
        extreme += int(np.sum(np.abs(stats) >= abs(observed) - 1e-12))
    p = (1 + extreme) / (1 + resamples)
    sem = float(np.std(d, ddof=1)) / math.sqrt(n)
    return PairedTest("approximate randomisation", n, float(np.mean(a)), float(np.mean(b)), observed,
                      observed - PAPER_Z * sem, observed + PAPER_Z * sem, p, cohens_dz(d), resamples, seed)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control, any dependence)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted_sorted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted_sorted, 1.0)
    return out


def rank_intervals(
    values: pd.DataFrame,
    *,
    higher_is_better: bool = True,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Bootstrap rank intervals: rank every system in each resample (1 = best, ties share
    the best rank), report the percentile interval of its rank."""
    from scipy.stats import rankdata

    x = _matrix(values.to_numpy())
    systems = list(values.columns)
    sign = -1.0 if higher_is_better else 1.0
    observed = x.mean(axis=0)
    obs_rank = rankdata(sign * observed, method="min")
    boot = bootstrap_means(x, resamples=resamples, seed=seed)
    ranks = rankdata(sign * boot, method="min", axis=1)
    alpha = (1 - level) / 2
    low = np.floor(np.quantile(ranks, alpha, axis=0, method="lower")).astype(int)
    high = np.ceil(np.quantile(ranks, 1 - alpha, axis=0, method="higher")).astype(int)
    k = len(systems)
    table = pd.DataFrame(
        {
            "system": systems,
            "mean": observed,
            "rank": obs_rank.astype(int),
            "rank_low": low,
            "rank_high": high,
            "p_rank_1": (ranks == 1).mean(axis=0),
        }
    )
    table["rank_interval"] = [f"rank {lo}–{hi} of {k}" if lo != hi else f"rank {lo} of {k}" for lo, hi in zip(low, high)]
    return table.sort_values(["rank", "system"]).reset_index(drop=True)


def complete_cases(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Studies every system could score, and how many were excluded."""
    keep = frame.notna().all(axis=1)
    return frame[keep], int((~keep).sum())


def pairwise_tests(
    frame: pd.DataFrame,
    *,
    method: str = "bootstrap",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Every pair of systems (columns of `frame`, studies as rows, no NaN), with Holm-adjusted
    p-values over all pairs of this table."""
    tests = {"bootstrap": paired_bootstrap, "randomisation": randomisation_test}
    if method not in tests:
        raise AnalysisError(f"unknown paired test {method!r}; use one of {', '.join(tests)}")
    systems = list(frame.columns)
    rows = []
    for i, a in enumerate(systems):
        for b in systems[i + 1 :]:
            t = tests[method](frame[a].to_numpy(), frame[b].to_numpy(), resamples=resamples, seed=seed)
            rows.append({"system_a": a, "system_b": b, **t.to_dict()})
    table = pd.DataFrame(rows)
    if not table.empty:
        table["p_holm"] = holm(table["p_value"].to_numpy())
    return table


def summary_row(values: np.ndarray, *, boot_low: float | None = None, boot_high: float | None = None) -> dict:
    s = aggregate(values, allow_missing=True)
    return {
        "n": s.n, "n_missing": s.n_missing, "mean": s.mean, "ci95": s.ci95,
        "ci_low": s.mean - s.ci95, "ci_high": s.mean + s.ci95,
        "boot_low": boot_low, "boot_high": boot_high,
    }


STATISTICAL_NOTES = """\
- **Confidence intervals.** `ci95` is the papers' normal approximation, mean ± 1.96 × SEM
  (sample SD). `boot_low`/`boot_high` are seeded percentile-bootstrap intervals over studies;
  they do not assume normality and are the better guide for skewed scores (RadCliQ, GREEN).
- **Paired comparisons.** Systems are scored on the same studies, so differences are tested
  per study (paired bootstrap: CI of the mean difference and a two-sided p-value from the
  null-centred bootstrap distribution; approximate randomisation: random sign flips of the
  per-study differences). Effect size is Cohen's d_z = mean difference / SD of differences.
  A small p with a tiny d_z is a real but practically negligible difference.
- **Multiple comparisons.** With k systems there are k(k−1)/2 pairs per metric, and several
  metrics and strata: at α = 0.05 some "significant" pairs are expected by chance.
  `p_bootstrap_holm` and `p_randomisation_holm` control the family-wise error over the pairs
  of one table (one metric, one stratum) by Holm's step-down method, each for its own test;
  they do not correct across metrics or strata.
- **Ranks.** A rank interval "rank 2–5 of 24" is the 95 % percentile interval of the
  system's rank over bootstrap resamples of the studies (all systems resampled together).
  Overlapping intervals mean the order of those systems is not settled by this test set.
- **Strata and sites.** Small strata (few studies) give wide intervals; a rank change between
  sites is only meaningful if it exceeds the within-site rank intervals.
- **Missing scores.** Studies a metric could not score for some system are left out of that
  metric's paired tests and rank intervals (`n_missing` counts them); means use the rest.
"""
