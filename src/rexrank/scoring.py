"""Score a predictions file on a test set and track: the engine behind `rexrank score`,
the backend and the leaderboard."""
from __future__ import annotations

import hashlib
import platform
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from rexrank import __version__
from rexrank.errors import MetricError
from rexrank.metrics.base import MetricResult
from rexrank.metrics.registry import get_metric, metric_class, parse_metric_list
from rexrank.stats import aggregate
from rexrank.submissions import Predictions, load_predictions


@dataclass
class ScoreRun:
    results: dict[str, Any]  # JSON-ready: provenance, per-metric summaries, failed and pending metrics
    per_study: "Any"  # pandas.DataFrame: id + one column per per-study score
    metric_results: dict[str, MetricResult]
    errors: dict[str, BaseException] = field(default_factory=dict)  # metric -> what stopped it (keep_going)

    @property
    def failed(self) -> dict[str, dict]:
        return self.results["failed"]

    @property
    def complete(self) -> bool:
        """Every metric asked for has its scores."""
        return not self.results["failed"] and not self.results["pending"]

    def provenance(self) -> dict[str, Any]:
        """What the per-study scores are: the per-study file's metadata."""
        r = self.results
        return {
            "rexrank_version": r["rexrank_version"],
            "created": r["created"],
            "test_set": r["test_set"],
            "predictions": {"source": r["predictions"]["source"], "sha256": r["predictions"]["sha256"]},
            "metrics": {name: summary["provenance"] for name, summary in r["metrics"].items()},
            "failed": sorted(r["failed"]),
            "pending": list(r["pending"]),
            "complete": self.complete,
        }

    def write_per_study(self, path: str | Path) -> None:
        from rexrank.per_study_file import write_per_study

        write_per_study(self.per_study, path, self.provenance())


def texts_fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


@dataclass(frozen=True)
class RequestPart:
    """Studies [start, stop) of a request (one shard of a dispatched request) and every pair
    of the request: a metric whose batches span studies scores the part as the whole run does
    (Metric.score's `part`)."""

    predictions: list[str]
    references: list[str]
    start: int
    stop: int


def _n_scored(result: MetricResult, n: int) -> int:
    """Studies with a primary score (the published one); NaN marks a failure."""
    import numpy as np

    primary = result.per_study.get(result.name)
    if primary is None:
        return n - len(result.failures)
    return int(np.count_nonzero(~np.isnan(np.asarray(primary, dtype=np.float64))))


def _with_study_ids(details: dict, ids: Sequence[str]) -> dict:
    """The study positions a metric lists (`*_positions`) also as study ids (`*_ids`)."""
    named = {
        key[: -len("_positions")] + "_ids": [ids[i] for i in value]
        for key, value in details.items()
        if key.endswith("_positions") and isinstance(value, list)
    }
    return {**details, **named}


def _run_options(name: str, options: dict, *, progress: bool, run_context) -> dict:
    """The metric's options plus what the run sets where the metric takes it (explicit
    options win): `progress=False` reaches its own per-batch bars too, and the run's
    context lets it share model outputs and results with the run's other metrics."""
    import inspect

    takes = inspect.signature(metric_class(name)).parameters
    added = {"run_context": run_context} if "run_context" in takes else {}
    if not progress and "progress" in takes:
        added["progress"] = False
    return {**added, **options}


def _score_metric(name: str, predictions: Predictions, references: list[str], *, options: dict, bootstrap: int,
                  seed: int, progress: bool, run_context, nothing_scored_is_error: bool = True,
                  part: RequestPart | None = None) -> tuple[dict[str, Any], MetricResult]:
    """One metric: its summary (the unit of `results["metrics"]`) and its result."""
    metric = get_metric(name, **_run_options(name, options, progress=progress, run_context=run_context))
    t0 = time.time()
    if part is None:
        result = run_context.score(metric, predictions.texts, references)
    else:
        result = run_context.score(metric, part.predictions, part.references, part=(part.start, part.stop))
    seconds = time.time() - t0
    summary = metric_summary(result, predictions.ids, provenance=metric.provenance(),
                             higher_is_better=metric.higher_is_better, seconds=seconds, bootstrap=bootstrap,
                             seed=seed, nothing_scored_is_error=nothing_scored_is_error)
    return summary, result


def metric_summary(result: MetricResult, ids: Sequence[str], *, provenance: dict, higher_is_better: bool,
                   seconds: float, bootstrap: int, seed: int, nothing_scored_is_error: bool = True) -> dict[str, Any]:
    """A metric's summary (the unit of `results["metrics"]`) from its result over the studies
    `ids`: a single run's, or the merge of a dispatched request's shards (Metric.aggregate of
    their rows), so both publish the same numbers. Means and CIs of every per-study column,
    coverage, failures by study id.
    nothing_scored_is_error: a result with no scored study raises MetricError."""
    if nothing_scored_is_error and result.failures and len(result.failures) >= len(ids):
        # nothing scored is a failed metric, not a row of NaN that reads like a result
        reasons = sorted(Counter(result.failures.values()).items(), key=lambda kv: -kv[1])
        listed = "; ".join(f"{why} ({k}x)" for why, k in reasons[:3])
        raise MetricError(f"none of the {len(ids)} studies could be scored: {listed}")
    n_scored = _n_scored(result, len(ids))
    scores = {
        column: aggregate(values, bootstrap=bootstrap, seed=seed, allow_missing=bool(result.failures), name=column).to_dict()
        for column, values in result.per_study.items()
    }
    return {
        "provenance": provenance,
        "higher_is_better": higher_is_better,
        "corpus": result.corpus,
        "scores": scores,
        "details": _with_study_ids(result.details, ids),
        # coverage (the backend publishes a metric only above a share of scored studies)
        "n_studies": len(ids),
        "n_scored": n_scored,
        "n_failed": len(ids) - n_scored,
        "failures": {ids[i]: why for i, why in result.failures.items()},
        "seconds": round(seconds, 3),
    }


def failure_record(exc: BaseException, seconds: float) -> dict[str, Any]:
    """Why a metric produced nothing, and what the user can do (advice in the terms in force)."""
    from rexrank.errors import RexrankError
    from rexrank.models.advice import AdvisedError

    if isinstance(exc, AdvisedError):
        reason, advice = f"{exc.subject} {exc.reason}", exc.advice()
    elif isinstance(exc, RexrankError):
        reason, advice = str(exc), ""
    else:  # a bug or a resource problem (out of memory): the type helps whoever reads it
        reason, advice = f"{type(exc).__name__}: {exc}", ""
    return {"reason": reason, "advice": advice, "error_type": type(exc).__name__, "seconds": round(seconds, 3)}


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
    keep_going: bool = False,
    on_update: Callable[[ScoreRun, str], None] | None = None,
    nothing_scored_is_error: bool = True,
    part: RequestPart | None = None,
) -> ScoreRun:
    """Run the metrics one after the other.

    nothing_scored_is_error: a metric that scored no study raises MetricError (naming the
        reasons); False keeps it as a summary with no score (the backend on a private test
        set, where that is a case of its coverage rule's noisy threshold).
    part: the request these predictions and references are a part of (a shard).

    keep_going: a metric that raises is recorded in `results["failed"]` (reason, advice)
        and the others still run; otherwise its exception propagates.
    on_update(run, name): called after each metric, finished or failed, with the run so far
        (to write results as they come).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from rexrank.metrics.run_context import RunContext

    names = parse_metric_list(metrics)
    metric_options = metric_options or {}
    references = list(references)
    started = time.time()
    run = ScoreRun(_results_header(predictions, references, names, bootstrap, seed, test_set_info),
                   pd.DataFrame({"id": predictions.ids}), {})
    run_context = RunContext(names)  # one model pass per text, shared by every metric of the run
    bar = tqdm(names, desc="scoring", unit="metric", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        t0 = time.time()
        try:
            summary, result = _score_metric(name, predictions, references, options=metric_options.get(name, {}),
                                            bootstrap=bootstrap, seed=seed, progress=progress,
                                            run_context=run_context, nothing_scored_is_error=nothing_scored_is_error,
                                            part=part)
        except Exception as exc:
            if not keep_going:
                raise
            run.errors[name] = exc
            run.results["failed"][name] = failure_record(exc, time.time() - t0)
        else:
            run.metric_results[name] = result
            for column, values in result.per_study.items():
                run.per_study[column] = values
            run.results["metrics"][name] = summary
        run.results["pending"].remove(name)
        run.results["complete"] = run.complete
        run.results["seconds"] = round(time.time() - started, 3)
        if on_update:
            on_update(run, name)
    return run


def _results_header(predictions: Predictions, references: list[str], names: list[str], bootstrap: int, seed: int,
                    test_set_info: dict | None) -> dict[str, Any]:
    return {
        "rexrank_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "test_set": {**(test_set_info or {}), "references_sha256": texts_fingerprint(references)},
        "predictions": {
            "source": predictions.source,
            "n": len(predictions),
            "n_empty": predictions.n_empty,
            "empty_ids": predictions.empty_ids,
            "n_not_in_track": len(predictions.not_in_track_ids),
            "not_in_track_ids": predictions.not_in_track_ids,
            "sha256": texts_fingerprint(predictions.texts),
        },
        "statistics": {
            "ci": "normal approximation: mean ± 1.96 × SEM (sample std, ddof=1), as the ReXrank papers",
            "bootstrap": {"resamples": bootstrap, "seed": seed, "method": "percentile"} if bootstrap else None,
        },
        "metrics": {},
        "failed": {},  # metric -> reason, advice (keep_going)
        "pending": list(names),  # not run yet: non-empty only in results written during a run
        "complete": False,
        "seconds": 0.0,
    }


def _with_test_set_context(metric_options: dict | None, names: list[str], test) -> dict | None:
    """crimson.patient_context="test_set": one context per study from the test set's rows."""
    from rexrank.metrics.crimson_context import FROM_TEST_SET, test_set_contexts

    crimson = (metric_options or {}).get("crimson", {})
    if "crimson" not in names or crimson.get("patient_context") != FROM_TEST_SET:
        return metric_options
    from rexrank.testsets.loading import track_rows

    rows = track_rows(test)
    by_id = dict(zip(rows["id"], test_set_contexts(rows)))
    return {**metric_options, "crimson": {**crimson, "patient_context": [by_id[i] for i in test.studies.ids]}}


def _select(predictions: Predictions, references: list[str], metric_options: dict | None, start: int, stop: int):
    """Studies [start, stop) of validated predictions, their references, and per-study
    options (a list with one value per study, e.g. CRIMSON's contexts) cut alike; and the
    RequestPart they make."""
    if not 0 <= start < stop <= len(predictions):
        raise ValueError(f"shard [{start}, {stop}) is outside the {len(predictions)} studies")
    ids, texts = predictions.ids[start:stop], predictions.texts[start:stop]
    chosen = set(ids)
    empty = [i for i in predictions.empty_ids if i in chosen]
    part = Predictions(ids, texts, predictions.source, n_empty=len(empty), empty_ids=empty, not_in_track_ids=[])
    options = {name: {k: (v[start:stop] if isinstance(v, list) and len(v) == len(predictions) else v)
                      for k, v in opts.items()} for name, opts in (metric_options or {}).items()}
    return part, references[start:stop], options, RequestPart(list(predictions.texts), references, start, stop)


def test_set_info(test) -> dict[str, Any]:
    """What a run's results say about its test set (`test`: a resolved test set)."""
    return {
        "name": test.spec.name,
        "title": test.spec.title,
        "split": test.spec.split,
        "track": test.track,
        "n_studies": len(test.studies.ids),
        "n_studies_outside_track": len(test.studies.outside_ids),
        "access": test.spec.access,
    }


def load_submission(test, predictions_path: str | Path, *, id_column: str | None = None,
                    prediction_column: str | None = None) -> Predictions:
    """A predictions file validated against a resolved test set's track."""
    return load_predictions(
        predictions_path, list(test.studies.ids), test_set=f"{test.spec.title}, {test.track} track",
        outside_track_ids=test.studies.outside_ids, id_column=id_column, prediction_column=prediction_column,
    )


def run_header(test, predictions: Predictions, metrics: Sequence[str], *, bootstrap: int = 0,
               seed: int = 0) -> dict[str, Any]:
    """A whole run's results before any metric (test set, predictions, statistics): what
    score_resolved writes, and the header of a dispatched request's merged shards."""
    return _results_header(predictions, list(test.studies.references), list(metrics), bootstrap, seed,
                           test_set_info(test))


def score_submission(
    dataset: str,
    track: str,
    predictions_path: str | Path,
    *,
    data_dir: str | Path | None = None,
    metrics: Sequence[str] | str | None = None,
    **options: Any,
) -> ScoreRun:
    """Load the test set, validate the predictions file against it, run the metrics: the
    test set looked up here, then `score_resolved` (its options)."""
    from rexrank.testsets.loading import resolve_test_set

    names = parse_metric_list(metrics)  # fail on a bad metric name before any loading
    return score_resolved(resolve_test_set(dataset, track, data_dir=data_dir), predictions_path, metrics=names,
                          **options)


def score_resolved(
    test,
    predictions_path: str | Path,
    *,
    metrics: Sequence[str] | str | None = None,
    metric_options: dict[str, dict] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = True,
    keep_going: bool = False,
    on_update: Callable[[ScoreRun, str], None] | None = None,
    id_column: str | None = None,
    prediction_column: str | None = None,
    nothing_scored_is_error: bool = True,
    select: tuple[int, int] | None = None,
) -> ScoreRun:
    """Validate the predictions file against a test set resolved already (`test`: its spec,
    track, the track's studies and data folder: rexrank.testsets.loading.ResolvedTestSet,
    or the backend's ResolvedRequest), nothing looked up again, and run the metrics
    (`keep_going`, `on_update`, `nothing_scored_is_error`: see score_predictions; `id_column`,
    `prediction_column`: the predictions file's column names when they are not the usual ones).
    `select` = (start, stop): score only those studies, in test-set order (one shard of
    a dispatched request; the whole file is still validated). A shard never fails for
    scoring none of its studies: that rule is the whole request's, applied where the shards
    merge (rexrank.backend.merge)."""
    names = parse_metric_list(metrics)  # fail on a bad metric name before any loading
    predictions = load_submission(test, predictions_path, id_column=id_column, prediction_column=prediction_column)
    metric_options = _with_test_set_context(metric_options, names, test)
    references = list(test.studies.references)
    part = None
    if select is not None:
        predictions, references, metric_options, part = _select(predictions, references, metric_options, *select)
        nothing_scored_is_error = False
    return score_predictions(
        predictions,
        references,
        metrics=names,
        metric_options=metric_options,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        test_set_info=test_set_info(test),
        keep_going=keep_going,
        on_update=on_update,
        nothing_scored_is_error=nothing_scored_is_error,
        part=part,
    )
