"""Merge a dispatched request's K shard outputs into one run's results: the per-study table
in test-set order, and every published value computed once over all studies by the same
functions a single worker's `score_submission` calls (each metric's `Metric.aggregate` of
its study rows, then rexrank.scoring.metric_summary).

A shard writes its studies' rows (rexrank.metrics.base.StudyRows): the published per-study
columns, and beside them in the same table the per-study values its corpus values and
details come from (labels, judgements, failures), one JSON cell per study; its header holds
what is the same for every study (settings) and the run's accounting (tallies, added up).
The merge concatenates the rows, so a sharded run is a single run by construction as far
as the per-study values are the single run's: exactly for the metrics that score each study
alone and for the LLM judges (whose batches each metric keeps whole, Metric.shard_rule), and
for SRR-BERT (each shard classifies the whole run's sentence batches, Metric.score's
`part`); within 1e-6 for the encoder metrics (BERTScore, SembScore), whose batch mates and
padding change with the shard (RadCliQ, combining them, within 2e-6).
The coverage rule and "nothing scored" apply to the whole request, here and after.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

import rexrank
from rexrank.errors import RexrankError

SHARD_FORMAT = 2
SIDE = "::"  # a side column of a shard's table: "<metric>::<key>" (never a published column's name)
FAILURE = "failure"  # the side key of each study's failure reason (null: scored)


class MergeError(RexrankError):
    """The shard outputs cannot make one run: one is missing, or they were made by
    different code, metric sets or options."""


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """rexrank's version and a hash of its source files: shards made by different code never merge."""
    digest = hashlib.sha256(rexrank.__version__.encode())
    root = Path(rexrank.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return f"{rexrank.__version__}+{digest.hexdigest()[:16]}"


def options_fingerprint(metrics, metric_options: dict) -> str:
    text = json.dumps({"metrics": list(metrics), "options": metric_options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_header(run, *, request_id: str, shard: int, attempt: int, start: int, stop: int,
                 metrics, metric_options: dict) -> dict:
    """The JSON a shard writes beside its table (shard_table), from its ScoreRun."""
    parts = {}
    for name, summary in run.results["metrics"].items():
        rows = run.metric_results[name].rows
        parts[name] = {"provenance": summary["provenance"], "higher_is_better": summary["higher_is_better"],
                       "seconds": summary["seconds"], "columns": list(rows.columns), "side": list(rows.side),
                       "settings": rows.settings, "tallies": rows.tallies}
    return {
        "format": SHARD_FORMAT,
        "request_id": request_id,
        "shard": shard,
        "attempt": attempt,
        "range": [start, stop],
        "code": code_fingerprint(),
        "metrics": list(metrics),
        "options": options_fingerprint(metrics, metric_options),
        "parts": parts,
        "seconds": run.results["seconds"],
    }


def shard_table(run):
    """A shard's per-study table: the published columns, then each metric's side values and
    failure reasons as JSON cells (columns "<metric>::<key>")."""
    table = run.per_study.copy()
    for name, result in run.metric_results.items():
        rows = result.rows
        for key, values in rows.side.items():
            table[f"{name}{SIDE}{key}"] = [json.dumps(_plain(v)) for v in values]
        table[f"{name}{SIDE}{FAILURE}"] = [json.dumps(rows.failures.get(i)) for i in range(len(table))]
    return table


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def merge_shards(shards: list[tuple[dict, "object"]], *, plan_ranges: list[list[int]], header: dict,
                 nothing_scored_is_error: bool = True):
    """(results, per-study DataFrame) of the whole request from `shards` [(shard JSON,
    shard table)] in shard order; `header`: the whole run's results header (rexrank.scoring's,
    from all predictions and references, with "predictions_ids"); `nothing_scored_is_error`:
    as rexrank.scoring.score_predictions, for the whole request. Raises MergeError, or
    MetricError (a metric scored none of the request's studies, or its values are undefined)."""
    import pandas as pd

    from rexrank.metrics.base import StudyRows
    from rexrank.metrics.registry import metric_class
    from rexrank.scoring import metric_summary

    if len(shards) != len(plan_ranges):
        raise MergeError(f"{len(shards)} of {len(plan_ranges)} shards present")
    first = shards[0][0]
    if not str(first["code"]).startswith(f"{rexrank.__version__}+"):
        raise MergeError(f"the shards were scored by rexrank {str(first['code']).split('+')[0]}, the dispatcher is "
                         f"{rexrank.__version__}: set the Jobs' install to this version (\"install\" in the dispatch "
                         "settings) and requeue the request")
    for (meta, table), (start, stop) in zip(shards, plan_ranges):
        for key in ("code", "metrics", "options"):
            if meta[key] != first[key]:
                raise MergeError(f"shard {meta['shard']} was made with another {key} ({meta[key]!r}, shard 0: "
                                 f"{first[key]!r}); requeue the request so that every shard is scored again")
        if meta.get("format") != SHARD_FORMAT:
            raise MergeError(f"shard {meta['shard']} is in shard format {meta.get('format')}, this merge reads "
                             f"{SHARD_FORMAT}; requeue the request so that every shard is scored again")
        if meta["range"] != [start, stop] or len(table) != stop - start:
            raise MergeError(f"shard {meta['shard']} holds studies {meta['range']} ({len(table)} rows), "
                             f"the plan says [{start}, {stop})")
    table = pd.concat([t for _, t in shards], ignore_index=True)
    ids = list(table["id"])
    if ids != header["predictions_ids"]:
        raise MergeError("the shards' studies are not the request's studies in test-set order")
    results = {k: v for k, v in header.items() if k != "predictions_ids"}
    bootstrap = (results.get("statistics") or {}).get("bootstrap") or {}
    results["metrics"] = {}
    for name in first["metrics"]:
        parts = [meta["parts"][name] for meta, _ in shards]
        if any(part["provenance"] != parts[0]["provenance"] for part in parts):
            shard = next(meta["shard"] for meta, _ in shards if meta["parts"][name]["provenance"] != parts[0]["provenance"])
            raise MergeError(f"shard {shard} ran {name} with another checkpoint or settings")
        try:
            rows = StudyRows.concat([_study_rows(name, part, t) for part, (_, t) in zip(parts, shards)])
        except ValueError as exc:
            raise MergeError(f"the shards' {name} rows cannot make one run: {exc}") from None
        result = metric_class(name).aggregate(rows)
        results["metrics"][name] = metric_summary(
            result, ids, provenance=parts[0]["provenance"], higher_is_better=parts[0]["higher_is_better"],
            seconds=sum(part["seconds"] for part in parts), bootstrap=bootstrap.get("resamples", 0),
            seed=bootstrap.get("seed", 0), nothing_scored_is_error=nothing_scored_is_error)
    results["pending"] = []
    results["failed"] = {}
    results["complete"] = True
    results["seconds"] = round(sum(meta["seconds"] for meta, _ in shards), 3)
    published = table[[c for c in table.columns if SIDE not in c]]
    return results, published


def _study_rows(name: str, part: dict, table):
    """One shard's StudyRows of metric `name` from its header entry and table."""
    from rexrank.metrics.base import StudyRows

    def cells(key: str) -> list:  # one JSON value per study, parsed as one array (a parse per cell is 10x slower)
        return json.loads("[" + ",".join(table[f"{name}{SIDE}{key}"].tolist()) + "]")

    failures = {i: why for i, why in enumerate(cells(FAILURE)) if why is not None}
    columns = {c: table[c].to_numpy(dtype=np.float64) for c in part["columns"]}
    return StudyRows(columns, {key: cells(key) for key in part["side"]}, failures, part["settings"], part["tallies"])
