"""Merge a dispatched request's K shard outputs into one run's results, as a single
worker's `score_submission` makes them: per-study table in test-set order, every
aggregate (mean, CI, corpus values) computed once over all studies.

Per-study values are each shard's own: exactly a single worker's for metrics that score
each study alone (BLEU-2, ROUGE, RadGraph, RaTEScore's matching) and for the LLM judges
(shard boundaries fall between their official batches, rexrank.backend.shards); the
encoder metrics (BERTScore, SembScore) batch studies together, so their padding mates
change with the shard and values agree within 1e-6.

Details: `*_positions` are offset to the whole request, counts and usage summed, means
weighted by shard size, equal values kept; anything else is listed under `not_merged`.
"""
from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

import rexrank
from rexrank.errors import RexrankError

SHARD_FORMAT = 1


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


def shard_header(run_results: dict, *, request_id: str, shard: int, attempt: int, start: int, stop: int,
                 metrics, metric_options: dict) -> dict:
    """The JSON a shard writes beside its per-study parquet."""
    return {
        "format": SHARD_FORMAT,
        "request_id": request_id,
        "shard": shard,
        "attempt": attempt,
        "range": [start, stop],
        "code": code_fingerprint(),
        "metrics": list(metrics),
        "options": options_fingerprint(metrics, metric_options),
        "summaries": run_results["metrics"],
        "seconds": run_results.get("seconds", 0.0),
    }


def merge_shards(shards: list[tuple[dict, "object"]], *, plan_ranges: list[list[int]], header: dict):
    """(results, per-study DataFrame) of the whole request from `shards` [(shard JSON,
    per-study DataFrame)] in shard order; `header`: the whole run's results header
    (rexrank.scoring's, from all predictions and references). Raises MergeError."""
    import pandas as pd

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
        if meta["range"] != [start, stop] or len(table) != stop - start:
            raise MergeError(f"shard {meta['shard']} holds studies {meta['range']} ({len(table)} rows), "
                             f"the plan says [{start}, {stop})")
    table = pd.concat([t for _, t in shards], ignore_index=True)
    if list(table["id"]) != header["predictions_ids"]:
        raise MergeError("the shards' studies are not the request's studies in test-set order")
    results = {k: v for k, v in header.items() if k != "predictions_ids"}
    results["metrics"] = {}
    for name in first["metrics"]:
        parts = [(meta["summaries"][name], start) for (meta, _), (start, _stop) in zip(shards, plan_ranges)]
        for meta, _ in shards:
            if meta["summaries"][name]["provenance"] != parts[0][0]["provenance"]:
                raise MergeError(f"shard {meta['shard']} ran {name} with another checkpoint or settings")
        results["metrics"][name] = _merge_summary(name, parts, table, results["predictions"]["n"])
    results["pending"] = []
    results["failed"] = {}
    results["complete"] = True
    results["seconds"] = round(sum(meta.get("seconds", 0.0) for meta, _ in shards), 3)
    return results, table


def _merge_summary(name: str, parts: list[tuple[dict, int]], table, n: int) -> dict:
    from rexrank.metrics.base import nanmean_or_nan
    from rexrank.scoring import _with_study_ids
    from rexrank.stats import aggregate

    columns = list(parts[0][0]["scores"])
    failures = {sid: why for summary, _ in parts for sid, why in summary["failures"].items()}
    values = {c: np.asarray(table[c].to_numpy(), dtype=np.float64) for c in columns}
    scores = {c: aggregate(v, bootstrap=0, seed=0, allow_missing=bool(failures), name=c).to_dict()
              for c, v in values.items()}
    corpus = {c: nanmean_or_nan(v) for c, v in values.items()}
    corpus.update(_corpus_extras(name, values, parts))
    primary = values.get(name)
    n_scored = int(np.count_nonzero(~np.isnan(primary))) if primary is not None else n - len(failures)
    sizes = [summary["n_studies"] for summary, _ in parts]
    details = _merge_details([(summary["details"], offset) for summary, offset in parts], sizes)
    if name == "fineradscore" and "thresholds" in details:
        from rexrank.metrics.fineradscore import error_rates

        t = {k: v for k, v in details["thresholds"].items() if k != "note"}
        details["rates"] = error_rates(values["fineradscore"], **t)
    return {
        "provenance": parts[0][0]["provenance"],
        "higher_is_better": parts[0][0]["higher_is_better"],
        "corpus": corpus,
        "scores": scores,
        "details": _with_study_ids(details, list(table["id"])),
        "n_studies": n,
        "n_scored": n_scored,
        "n_failed": n - n_scored,
        "failures": failures,
        "seconds": round(sum(summary.get("seconds", 0.0) for summary, _ in parts), 3),
    }


def _corpus_extras(name: str, values: dict, parts) -> dict:
    """Corpus values that are not a column's mean, computed over all studies as each metric does."""
    out = {}
    if name in ("green", "crimson") and name in values:
        scored = ~np.isnan(values[name])
        out[f"{name}_std"] = float(np.std(values[name][scored])) if scored.any() else math.nan
        if name == "green":
            from rexrank.metrics.green import SUB_KEYS

            for key in SUB_KEYS:
                v = values[f"green_sig_{key}"][scored]
                out[f"green_zero_error_rate_{key}"] = float(np.mean(v == 0)) if v.size else math.nan
    if name == "radcliq":
        from rexrank.metrics.base import nanmean_or_nan

        mean_v1 = nanmean_or_nan(values["radcliq"])
        out["radcliq_v1_inv"] = 1.0 / mean_v1 if mean_v1 else math.nan
    if name == "fineradscore":
        from rexrank.metrics.fineradscore import error_rates

        thresholds = {k: v for k, v in (parts[0][0]["details"].get("thresholds") or {}).items() if k != "note"}
        out["fineradscore_inv"] = error_rates(values["fineradscore"], **thresholds)["fineradscore_inv"]
    return out


# metrics whose corpus values are not derived from their per-study columns: never sharded
UNSHARDABLE = frozenset({"srr_bert", "spec_cxr"})


def _merge_details(parts: list[tuple[dict, int]], sizes: list[int]) -> dict:
    keys = list(dict.fromkeys(k for d, _ in parts for k in d))
    # `*_ids` mirror `*_positions` (made again from the merged positions)
    keys = [k for k in keys if not (k.endswith("_ids") and k[: -len("_ids")] + "_positions" in keys)]
    merged, not_merged = {}, []
    for key in keys:
        vals = [(d.get(key), offset) for d, offset in parts]
        try:
            merged[key] = _merge_value(key, vals, sizes)
        except _NotMergeable:
            not_merged.append(key)
    if not_merged:  # said, never dropped silently
        merged["not_merged"] = sorted(not_merged)
    return merged


class _NotMergeable(Exception):
    pass


def _merge_value(key: str, vals: list[tuple[object, int]], sizes: list[int]):
    present = [v for v, _ in vals if v is not None]
    if not present:
        return None
    if key.endswith("_positions") and all(isinstance(v, list) for v in present):
        return sorted(offset + i for v, offset in vals for i in (v or []))
    if all(isinstance(v, bool) for v in present) or all(isinstance(v, str) for v in present):
        if all(v == present[0] for v in present):
            return present[0]
        raise _NotMergeable
    if all(isinstance(v, int) for v in present):
        return sum(present)
    if all(isinstance(v, (int, float)) for v in present):
        if key.startswith(("mean_", "entities_per_")) and len(present) == len(sizes):
            return float(sum(v * s for v, s in zip(present, sizes)) / max(1, sum(sizes)))
        if all(v == present[0] for v in present):
            return present[0]
        if "usage" in key or key.endswith(("_usd", "_seconds", "_tokens")):
            return sum(present)
        raise _NotMergeable
    if all(isinstance(v, dict) for v in present):
        if all(v == present[0] for v in present):
            return present[0]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for v in present for x in v.values()) or \
                key in ("llm_usage", "reference_cache", "failure_reasons"):
            out: dict = {}
            for v in present:
                for k, x in v.items():
                    if isinstance(x, (int, float)) and not isinstance(x, bool):
                        out[k] = out.get(k, 0) + x
                    elif out.setdefault(k, x) != x:
                        raise _NotMergeable
            return out
        raise _NotMergeable
    if all(isinstance(v, list) for v in present) and key == "completions":
        return [x for v in present for x in v]
    if all(v == present[0] for v in present):
        return present[0]
    raise _NotMergeable
