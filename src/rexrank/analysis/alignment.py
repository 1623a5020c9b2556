"""Metrics against radiologists on ReXVal (Yu et al., Patterns 2023; PhysioNet
rexval-dataset 1.0.0, credentialed — the user supplies the files).

Files (exact schema, see shared reference metrics_llm.md §5):
- 50_samples_gt_and_candidates.csv: study_id, gt_report, radgraph, bertscore, s_emb, bleu
  (row index = study_number; each candidate column holds one candidate report)
- 6_valid_raters_per_rater_error_categories.csv: study_number, candidate_type,
  error_category, rater_index, clinically_significant, num_errors

Aggregation follows the dataset's data_analysis.ipynb: for significant and insignificant
errors separately, mean over raters per (study, candidate, category), then sum over
categories; total = significant + insignificant.

Alignment = Kendall tau-b (scipy.stats.kendalltau) between a metric's "badness" (−score for
higher-is-better metrics, the score itself otherwise) and the radiologists' error count over
the 200 pairs, so aligned metrics get a positive tau, as the metric papers report. The CI
is a seeded percentile bootstrap over pairs.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from rexrank.analysis.io import AnalysisError, higher_is_better

if TYPE_CHECKING:
    from rexrank.scoring import ScoreRun

CANDIDATES_FILE = "50_samples_gt_and_candidates.csv"
ERRORS_FILE = "6_valid_raters_per_rater_error_categories.csv"
CANDIDATE_COLUMNS = ("radgraph", "bertscore", "s_emb", "bleu")
CANDIDATES_SCHEMA = ("study_id", "gt_report", *CANDIDATE_COLUMNS)
ERRORS_SCHEMA = ("study_number", "candidate_type", "error_category", "rater_index", "clinically_significant", "num_errors")
TARGETS = ("total_errors", "significant_errors", "insignificant_errors")


def _read_csv(path: Path, schema: Sequence[str]) -> pd.DataFrame:
    if not path.is_file():
        raise AnalysisError(f"ReXVal file {path} does not exist (download it from PhysioNet rexval-dataset 1.0.0)")
    frame = pd.read_csv(path)
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise AnalysisError(f"{path}: not the ReXVal schema, missing columns {missing} (has {list(frame.columns)})")
    return frame


def _as_bool(series: pd.Series, where: str) -> pd.Series:
    if series.dtype == bool:
        return series
    mapped = series.astype(str).str.strip().str.lower().map({"true": True, "false": False, "1": True, "0": False})
    if mapped.isna().any():
        raise AnalysisError(f"{where}: clinically_significant values must be True/False, got {sorted({str(v) for v in series[mapped.isna()]})[:5]}")
    return mapped.astype(bool)


def read_rexval(directory: str | Path) -> pd.DataFrame:
    """One row per (study_number, candidate_type) pair: pair_id, study_id, candidate,
    reference, significant_errors, insignificant_errors, total_errors, n_raters."""
    directory = Path(directory)
    cand_path, err_path = directory / CANDIDATES_FILE, directory / ERRORS_FILE
    candidates = _read_csv(cand_path, CANDIDATES_SCHEMA)
    errors = _read_csv(err_path, ERRORS_SCHEMA)
    errors["clinically_significant"] = _as_bool(errors["clinically_significant"], str(err_path))
    bad_types = sorted(set(errors["candidate_type"]) - set(CANDIDATE_COLUMNS))
    if bad_types:
        raise AnalysisError(f"{err_path}: unknown candidate_type values {bad_types}; expected {list(CANDIDATE_COLUMNS)}")
    bad_studies = sorted(set(errors["study_number"]) - set(range(len(candidates))))
    if bad_studies:
        raise AnalysisError(f"{err_path}: study_number {bad_studies[:5]} not in {cand_path} (rows 0–{len(candidates) - 1})")
    if errors["num_errors"].isna().any() or (errors["num_errors"] < 0).any():
        raise AnalysisError(f"{err_path}: num_errors must be non-negative numbers")
    keys = ["study_number", "candidate_type", "error_category"]
    dup = errors.duplicated(keys + ["rater_index", "clinically_significant"])
    if dup.any():
        raise AnalysisError(f"{err_path}: {int(dup.sum())} duplicate rows for the same rater/category/significance")
    # Official aggregation: per significance, mean over raters, then sum over categories.
    per_cat = errors.groupby([*keys, "clinically_significant"])["num_errors"].mean().reset_index()
    per_pair = per_cat.groupby(["study_number", "candidate_type", "clinically_significant"])["num_errors"].sum().unstack(
        "clinically_significant", fill_value=0.0)
    per_pair = per_pair.reindex(columns=[True, False], fill_value=0.0)
    raters = errors.groupby(["study_number", "candidate_type"])["rater_index"].nunique()
    rows = []
    for (study_number, ctype), counts in per_pair.iterrows():
        study = candidates.iloc[int(study_number)]
        rows.append({
            "pair_id": f"{int(study_number)}_{ctype}",
            "study_number": int(study_number),
            "study_id": str(study["study_id"]),
            "candidate_type": ctype,
            "candidate": "" if pd.isna(study[ctype]) else str(study[ctype]),
            "reference": str(study["gt_report"]),
            "significant_errors": float(counts[True]),
            "insignificant_errors": float(counts[False]),
            "total_errors": float(counts[True] + counts[False]),
            "n_raters": int(raters.loc[(study_number, ctype)]),
        })
    return pd.DataFrame(rows)


def score_rexval(pairs: pd.DataFrame, metrics: Sequence[str] | str, *, progress: bool = True) -> ScoreRun:
    """Score every (candidate, reference) pair with rexrank metrics. The run's `per_study`
    is `id` (= pair_id) + one column per per-study score, like `rexrank score --per-study`;
    its `results` describe the run (empty candidates, the test set "rexval")."""
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    texts = pairs["candidate"].tolist()
    empty = [pid for pid, t in zip(pairs["pair_id"], texts) if not t.strip()]
    predictions = Predictions(ids=pairs["pair_id"].tolist(), texts=texts, source="ReXVal candidates",
                              n_empty=len(empty), empty_ids=empty)
    return score_predictions(predictions, pairs["reference"].tolist(), metrics=metrics, progress=progress,
                             test_set_info={"name": "rexval"})


def kendall_tau_b(x, y) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(x, y, variant="b").statistic)


def human_alignment(
    pairs: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    target: str = "total_errors",
    resamples: int = 1000,
    seed: int = 0,
    lower_is_better: Sequence[str] = (),
    level: float = 0.95,
) -> pd.DataFrame:
    """Per metric: tau_b (badness vs radiologist errors), bootstrap CI over pairs, scipy's
    asymptotic p-value, n. `scores`: `id` = pair_id + one numeric column per score."""
    from scipy.stats import kendalltau

    if target not in TARGETS:
        raise AnalysisError(f"unknown ReXVal target {target!r}; use one of {', '.join(TARGETS)}")
    if "id" not in scores.columns:
        raise AnalysisError("ReXVal scores need an `id` column holding pair ids like '0_bleu'")
    scores = scores.assign(id=scores["id"].astype(str)).set_index("id")
    missing = sorted(set(pairs["pair_id"]) - set(scores.index))
    extra = sorted(set(scores.index) - set(pairs["pair_id"]))
    if missing or extra:
        raise AnalysisError(f"ReXVal scores do not match the pairs: missing {missing[:5]} ({len(missing)}), "
                            f"unknown {extra[:5]} ({len(extra)})")
    scores = scores.loc[pairs["pair_id"]]
    errors = pairs[target].to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    n = len(pairs)
    idx = rng.integers(0, n, size=(resamples, n)) if resamples else None
    rows = []
    for metric in scores.columns:
        if not pd.api.types.is_numeric_dtype(scores[metric]) or pd.api.types.is_bool_dtype(scores[metric]):
            continue
        values = scores[metric].to_numpy(dtype=float)
        ok = ~np.isnan(values)
        badness = -values if higher_is_better(metric, lower_is_better) else values
        result = kendalltau(badness[ok], errors[ok], variant="b")
        low = high = np.nan
        if resamples:
            boot = np.array([kendall_tau_b(badness[i][ok[i]], errors[i][ok[i]]) for i in idx])
            boot = boot[~np.isnan(boot)]
            alpha = (1 - level) / 2
            low, high = np.quantile(boot, [alpha, 1 - alpha])
        rows.append({"metric": metric, "target": target, "tau_b": float(result.statistic), "ci_low": float(low),
                     "ci_high": float(high), "p_value": float(result.pvalue), "n": int(ok.sum()),
                     "n_missing": int((~ok).sum()), "resamples": resamples, "seed": seed})
    if not rows:
        raise AnalysisError("ReXVal scores have no numeric score column")
    return pd.DataFrame(rows)
