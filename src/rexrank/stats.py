"""Aggregation of per-study scores: the papers' normal-approximation CI and a bootstrap CI.

The ReXrank papers report mean ± 1.96 × SEM. SEM uses the sample standard deviation
(ddof=1), as scipy.stats.sem does.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

PAPER_Z = 1.96  # the papers' rounding of the two-sided 95 % normal quantile


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float  # sample standard deviation (ddof=1)
    sem: float
    ci95: float  # half-width, PAPER_Z × SEM
    n_missing: int = 0
    bootstrap_low: float | None = None
    bootstrap_high: float | None = None
    bootstrap_resamples: int | None = None
    bootstrap_seed: int | None = None

    @property
    def ci_low(self) -> float:
        return self.mean - self.ci95

    @property
    def ci_high(self) -> float:
        return self.mean + self.ci95

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None}


def as_score_array(values: Sequence[float], *, name: str = "scores") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence of per-study scores, got shape {arr.shape}")
    if np.isinf(arr).any():
        bad = np.flatnonzero(np.isinf(arr))[:10].tolist()
        raise ValueError(f"{name}: infinite per-study scores at positions {bad}")
    return arr


def aggregate(
    values: Sequence[float],
    *,
    bootstrap: int = 0,
    seed: int = 0,
    allow_missing: bool = False,
    name: str = "scores",
) -> Summary:
    """n, mean, 95 % CI half-width (1.96 × SEM) and, if `bootstrap` > 0, a seeded
    percentile bootstrap interval.

    NaN marks a study the metric could not score. It is an error unless `allow_missing`,
    in which case it is left out of the mean *and counted* in `n_missing`.
    """
    arr = as_score_array(values, name=name)
    missing = np.isnan(arr)
    if missing.any() and not allow_missing:
        bad = np.flatnonzero(missing)[:10].tolist()
        raise ValueError(
            f"{name}: {int(missing.sum())} per-study scores are NaN (first positions {bad}); "
            "pass allow_missing=True to report them as missing"
        )
    kept = arr[~missing]
    n = int(kept.size)
    if n == 0:
        return Summary(n=0, mean=math.nan, std=math.nan, sem=math.nan, ci95=math.nan, n_missing=int(missing.sum()))
    mean = float(kept.mean())
    std = float(kept.std(ddof=1)) if n > 1 else math.nan
    sem = std / math.sqrt(n)  # NaN for one study, as its std
    low = high = None
    if bootstrap:
        low, high = bootstrap_ci(kept, resamples=bootstrap, seed=seed)
    return Summary(
        n=n,
        mean=mean,
        std=std,
        sem=sem,
        ci95=PAPER_Z * sem,
        n_missing=int(missing.sum()),
        bootstrap_low=low,
        bootstrap_high=high,
        bootstrap_resamples=bootstrap or None,
        bootstrap_seed=seed if bootstrap else None,
    )


def bootstrap_ci(
    values: np.ndarray, *, resamples: int = 1000, seed: int = 0, level: float = 0.95, chunk: int = 256
) -> tuple[float, float]:
    """Seeded percentile bootstrap CI of the mean. Resamples in chunks to bound memory."""
    values = np.asarray(values, dtype=np.float64)
    if resamples < 1:
        raise ValueError(f"bootstrap resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    n = values.size
    means = np.empty(resamples)
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(k, n))
        means[start : start + k] = values[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)
