"""Score a predictions file on a test set and track: the engine behind `rexrank score`,
the backend and the leaderboard."""
from __future__ import annotations

import hashlib
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from rexrank import __version__
from rexrank.metrics.base import MetricResult
from rexrank.metrics.registry import get_metric, metric_class, parse_metric_list
from rexrank.stats import aggregate
from rexrank.submissions import Predictions, load_predictions


@dataclass
class ScoreRun:
    results: dict[str, Any]  # JSON-ready: provenance, per-metric summaries
    per_study: "Any"  # pandas.DataFrame: id + one column per per-study score
    metric_results: dict[str, MetricResult]


def _fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _with_progress(name: str, options: dict, progress: bool) -> dict:
    """`progress=False` reaches the metric's own (per-batch) bars too, unless set explicitly."""
    import inspect

    if progress or "progress" not in inspect.signature(metric_class(name)).parameters:
        return options
    return {"progress": False, **options}


def _with_run_context(name: str, options: dict, run_context) -> dict:
    """Metrics that can share model outputs and results within the run get the run's context."""
    import inspect

    if "run_context" not in inspect.signature(metric_class(name)).parameters:
        return options
    return {"run_context": run_context, **options}


def score_predictions(
    predictions: Predictions,
    references: Sequence[str],
    *,
    metrics: Sequence[str] | str | None = None,
    metric_options: dict[str, dict] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = True,
    test_set_info: dict | None = None,
) -> ScoreRun:
    import pandas as pd
    from tqdm.auto import tqdm

    from rexrank.metrics.run_context import RunContext

    names = parse_metric_list(metrics)
    metric_options = metric_options or {}
    started = time.time()
    per_study = pd.DataFrame({"id": predictions.ids})
    summaries: dict[str, Any] = {}
    metric_results: dict[str, MetricResult] = {}
    run_context = RunContext(names)  # one model pass per text, shared by every metric of the run
    bar = tqdm(names, desc="scoring", unit="metric", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        options = _with_run_context(name, _with_progress(name, metric_options.get(name, {}), progress), run_context)
        metric = get_metric(name, **options)
        t0 = time.time()
        result = run_context.score(metric, predictions.texts, list(references))
        seconds = time.time() - t0
        metric_results[name] = result
        scores = {}
        for column, values in result.per_study.items():
            per_study[column] = values
            scores[column] = aggregate(
                values, bootstrap=bootstrap, seed=seed, allow_missing=bool(result.failures), name=column
            ).to_dict()
        summaries[name] = {
            "provenance": metric.provenance(),
            "higher_is_better": metric.higher_is_better,
            "corpus": result.corpus,
            "scores": scores,
            "details": result.details,
            "n_failed": len(result.failures),
            "failures": {predictions.ids[i]: why for i, why in result.failures.items()},
            "seconds": round(seconds, 3),
        }
    results = {
        "rexrank_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "test_set": test_set_info or {},
        "predictions": {
            "source": predictions.source,
            "n": len(predictions),
            "n_empty": predictions.n_empty,
            "empty_ids": predictions.empty_ids,
            "n_not_in_track": len(predictions.not_in_track_ids),
            "not_in_track_ids": predictions.not_in_track_ids,
            "sha256": _fingerprint(predictions.texts),
        },
        "statistics": {
            "ci": "normal approximation: mean ± 1.96 × SEM (sample std, ddof=1), as the ReXrank papers",
            "bootstrap": {"resamples": bootstrap, "seed": seed, "method": "percentile"} if bootstrap else None,
        },
        "metrics": summaries,
        "seconds": round(time.time() - started, 3),
    }
    return ScoreRun(results, per_study, metric_results)


def score_submission(
    dataset: str,
    track: str,
    predictions_path: str | Path,
    *,
    data_dir: str | Path | None = None,
    metrics: Sequence[str] | str | None = None,
    metric_options: dict[str, dict] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = True,
) -> ScoreRun:
    """Load the test set, validate the predictions file against it, run the metrics."""
    from rexrank.testsets.loading import REFERENCE_COLUMN, apply_track, load_all_studies
    from rexrank.testsets.registry import check_track, get_spec

    names = parse_metric_list(metrics)  # fail on a bad metric name before any loading
    spec = get_spec(dataset)
    check_track(track)
    studies = load_all_studies(dataset, data_dir=data_dir)
    test = apply_track(studies, track)
    outside = set(studies["id"]) - set(test["id"])
    predictions = load_predictions(
        predictions_path, test["id"], test_set=f"{spec.title}, {track} track", outside_track_ids=outside
    )
    info = {
        "name": dataset,
        "title": spec.title,
        "split": spec.split,
        "track": track,
        "n_studies": len(test),
        "n_studies_outside_track": len(outside),
        "access": spec.access,
        "references_sha256": _fingerprint(test[REFERENCE_COLUMN]),
    }
    return score_predictions(
        predictions,
        test[REFERENCE_COLUMN],
        metrics=names,
        metric_options=metric_options,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        test_set_info=info,
    )
