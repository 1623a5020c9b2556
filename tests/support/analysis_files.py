"""Input files for the analysis tests: ReXVal-like error tables and runs' per-study files."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rexrank.analysis.alignment import CANDIDATE_COLUMNS, CANDIDATES_FILE, ERRORS_FILE


def write_rexval(directory, n_studies=50, seed=0):
    """Synthetic files in ReXVal's exact schema; returns the per-rater error array
    [study, candidate, category, rater, significant] used to build them."""
    rng = np.random.default_rng(seed)
    pd.DataFrame({
        "study_id": [str(50000000 + i) for i in range(n_studies)],
        "gt_report": [f"reference report {i}." for i in range(n_studies)],
        **{c: [f"{c} candidate {i} ." for i in range(n_studies)] for c in CANDIDATE_COLUMNS},
    })[["study_id", "gt_report", "radgraph", "bertscore", "s_emb", "bleu"]].to_csv(directory / CANDIDATES_FILE, index=False)
    counts = rng.poisson(0.12, size=(n_studies, 4, 6, 6, 2))
    rows = []
    for s in range(n_studies):
        for c, ctype in enumerate(CANDIDATE_COLUMNS):
            for cat in range(6):
                for r in range(6):
                    for sig_i, sig in enumerate((True, False)):
                        rows.append((s, ctype, cat + 1, r, sig, int(counts[s, c, cat, r, sig_i])))
    pd.DataFrame(rows, columns=["study_number", "candidate_type", "error_category", "rater_index",
                                "clinically_significant", "num_errors"]).to_csv(directory / ERRORS_FILE, index=False)
    return counts


def write_runs(tmp_path, n=40, systems=("alpha", "beta", "gamma")):
    rng = np.random.default_rng(0)
    ids = [f"st{i:03d}" for i in range(n)]
    paths = []
    for k, s in enumerate(systems):
        frame = pd.DataFrame({"id": ids, "bleu2": rng.uniform(0, 0.5, n) + 0.05 * k,
                              "radcliq_v1": rng.normal(1.0, 0.3, n), "fineradscore": rng.integers(0, 5, n).astype(float)})
        path = tmp_path / f"{s}.parquet"
        frame.to_parquet(path, index=False)
        paths.append(path)
    attrs = pd.DataFrame({"id": ids, "site": ["north"] * 20 + ["south"] * 12 + ["east"] * 8,
                          "is_abnormal": [True, False] * (n // 2)})
    attrs.to_csv(tmp_path / "attrs.csv", index=False)
    return paths
