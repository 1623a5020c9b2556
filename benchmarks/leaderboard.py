"""Leaderboard table data for 100 systems × 4 test sets × 2 tracks: goal < 1 s.

Times (median of 5 runs) building the frame from 800 result records and every view the app
renders at start (the overview and the four test-set tables, for both tracks), plus one
re-rank by another metric with a search. Run: python benchmarks/leaderboard.py
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from rexrank.leaderboard import tables
from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, METRIC_KEYS, records_frame
from rexrank.testsets.registry import TRACKS

N_SYSTEMS = 100
GOAL_S = 1.0
CPU: list[float] = []  # CPU seconds of the full build (less sensitive to other load on the machine)


def synthetic_records(n_systems: int = N_SYSTEMS, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_systems):
        for test_set in LEADERBOARD_TEST_SETS:
            for track in TRACKS:
                values = {k: {"mean": float(rng.uniform(0.1, 1.5)), "ci95": float(rng.uniform(0.005, 0.03)), "n": 500} for k in METRIC_KEYS}
                records.append({
                    "id": f"bench/{test_set}/{track}/system-{i:03d}", "model_name": f"System-{i:03d}",
                    "institution": f"Institution {i % 17}", "model_url": f"https://example.org/{i}",
                    "submitter": "bench", "date": "2025", "test_set": test_set, "track": track,
                    "source": "rexrank", "trained_on": ["mimic_cxr"] if i % 5 == 0 else [],
                    "per_study_available": True, "values": values, "provenance": {},
                })
    return records


def run_once(records):
    t0 = time.perf_counter()
    c0 = time.process_time()
    frame = records_frame(records)
    views = tables.all_views(frame)
    t1 = time.perf_counter()
    CPU.append(time.process_time() - c0)
    tables.leaderboard_view(frame, "mimic_cxr", "findings", "fineradscore_inv", "institution 3")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, views


def main() -> None:
    records = synthetic_records()
    run_once(records)  # warm-up (imports, pandas caches)
    full, rerank = [], []
    for _ in range(5):
        a, b, views = run_once(records)
        full.append(a)
        rerank.append(b)
    n_rows = sum(len(v) for k, v in views.items() if k[0] != "overview")
    med = statistics.median(full)
    print(f"records: {len(records)} ({N_SYSTEMS} systems x {len(LEADERBOARD_TEST_SETS)} test sets x {len(TRACKS)} tracks)")
    print(f"frame + all start views ({len(views)} tables, {n_rows} test-set rows): median {med * 1000:.1f} ms "
          f"(min {min(full) * 1000:.1f}, max {max(full) * 1000:.1f}); CPU time median {statistics.median(CPU[1:]) * 1000:.1f} ms")
    print(f"one re-rank + search: median {statistics.median(rerank) * 1000:.1f} ms")
    print(f"goal < {GOAL_S:.0f} s: {'met' if med < GOAL_S else 'NOT met'} ({GOAL_S / med:.1f}x headroom)")


if __name__ == "__main__":
    main()
