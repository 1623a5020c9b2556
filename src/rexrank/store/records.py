"""Where records live in the two repos, and the request record's fields.

requests repo:
    queue/<id>.json                 one request (see `new_request`)
    predictions/<id>/test.parquet   its predictions (columns id, prediction), loadable with
                                    datasets.load_dataset("parquet", data_files=...)
results repo:
    records/<test_set>/<track>/<id>.json      result records (rexrank.results_schema format)
    per_study/<test_set>/<track>/<id>.parquet per-study scores, public test sets only
"""
from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime, timezone

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
STATUSES = (PENDING, RUNNING, FINISHED, FAILED)

QUEUE_DIR = "queue/"
PREDICTIONS_DIR = "predictions/"
RECORDS_DIR = "records/"
PER_STUDY_DIR = "per_study/"


def request_path(request_id: str) -> str:
    return f"{QUEUE_DIR}{request_id}.json"


def predictions_path(request_id: str) -> str:
    return f"{PREDICTIONS_DIR}{request_id}/test.parquet"


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(part)) or "_"


def result_path(record: dict) -> str:
    return f"{RECORDS_DIR}{_safe(record['test_set'])}/{_safe(record['track'])}/{_safe(record['id'])}.json"


def per_study_path(test_set: str, track: str, result_id: str) -> str:
    return f"{PER_STUDY_DIR}{_safe(test_set)}/{_safe(track)}/{_safe(result_id)}.parquet"


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def new_request_id(ts: float, *parts: str) -> str:
    """Sortable by submission time; the hash keeps simultaneous submissions apart."""
    digest = hashlib.sha256("\x00".join([repr(ts), *parts]).encode()).hexdigest()[:10]
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{digest}"


def dumps(record: dict) -> bytes:
    return (json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def status_view(request: dict, result: dict | None = None) -> dict:
    """What `rexrank status --json` prints for one request."""
    return {
        "id": request["id"],
        "status": request["status"],
        "error": request.get("error"),
        "results": result.get("values") if result else None,
    }


def jsonable(obj):
    """Plain JSON values: numpy scalars -> Python, NaN/inf -> None (strict JSON, which
    browsers and `datasets` read), tuples -> lists."""
    import math

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if type(obj).__module__ == "numpy":  # numpy scalar or array
        obj = obj.tolist()
        if isinstance(obj, list):
            return jsonable(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
