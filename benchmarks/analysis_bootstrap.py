"""Speed of the analysis resampling at ReXGradient scale: 10,000 studies × 24 systems,
1,000 bootstrap resamples (rank intervals), and one paired bootstrap + randomisation test.

    /work/venv/bin/python benchmarks/analysis_bootstrap.py [--studies N] [--systems K] [--resamples B]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from rexrank.analysis.uncertainty import bootstrap_means, paired_bootstrap, randomisation_test, rank_intervals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--studies", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=24)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(args.studies, args.systems)) + np.linspace(0, 0.1, args.systems),
                         columns=[f"s{i}" for i in range(args.systems)])
    rank_intervals(frame, resamples=1, seed=0)  # imports (scipy.stats) outside the timing
    t0 = time.perf_counter()
    rank_intervals(frame, resamples=args.resamples, seed=0)
    t_rank = time.perf_counter() - t0
    x = frame.to_numpy()
    t0 = time.perf_counter()
    bootstrap_means(x, resamples=args.resamples, seed=0)
    t_means = time.perf_counter() - t0
    # naive reference for the resampled means: index resampling, one resample at a time
    t0 = time.perf_counter()
    for _ in range(min(args.resamples, 100)):
        x[rng.integers(0, args.studies, args.studies)].mean(axis=0)
    t_naive = (time.perf_counter() - t0) * args.resamples / min(args.resamples, 100)
    a, b = frame["s0"].to_numpy(), frame["s1"].to_numpy()
    t0 = time.perf_counter()
    paired_bootstrap(a, b, resamples=args.resamples, seed=0)
    t_boot = time.perf_counter() - t0
    t0 = time.perf_counter()
    randomisation_test(a, b, resamples=args.resamples, seed=0)
    t_ar = time.perf_counter() - t0
    print(f"{args.studies} studies × {args.systems} systems, {args.resamples} resamples")
    print(f"rank intervals:              {t_rank:7.2f} s  (resampled means, then ranks and percentiles)")
    print(f"  resampled means:           {t_means:7.2f} s  (naive per-resample indexing ≈ {t_naive:.2f} s: "
          f"{t_naive / t_means:.1f}× faster)")
    print(f"paired bootstrap (1 pair):   {t_boot:7.2f} s")
    print(f"randomisation test (1 pair): {t_ar:7.2f} s")


if __name__ == "__main__":
    main()
