"""Where records live in the two repos, and the request record's fields.

requests repo:
    queue/<id>.json                 an open request (PENDING, RUNNING, or HELD for the
                                    maintainers' review: rexrank.store.review)
    done/<id>.json                  a settled one (FINISHED or FAILED): moved here when it
                                    settles, so that the queue a worker lists stays small
    predictions/<id>/test.parquet   its predictions (columns id, prediction), loadable with
                                    datasets.load_dataset("parquet", data_files=...)
    index/names/<key>.json          settled requests by model name, and
    index/submitters/<key>.json     by submitter: their Hub id, or a typed name on a local
                                    store (summaries: what the submission rules read)
    index/predictions/<key>.json    by the predictions' content sha256 (whose predictions they are)
    index/recent.json               the last RECENT_LIMIT settled requests (the queue tables)
    index/received.json             when each open request was filed (or first seen)
    config.json                     the store's settings (rexrank.store.config)
    accounts/approved.json          which Hub account (by id) each approved name was bound
                                    to (rexrank.store.accounts)
    copies/                         per-study fingerprints of every filing and their index:
                                    who filed which predictions first (rexrank.store.copies)
    ledger/<test_set>/<key>.json    the privacy ledger: ε spent per submitter on a private
                                    test set (rexrank.store.ledger; the backend writes it)
    scratch/<id>/shard-<k>-attempt-<a>.{json,parquet}
                                    a dispatched request's shard outputs (rexrank.backend.dispatch),
                                    removed once the request settles
results repo:
    records/<test_set>/<track>/<id>.json      result records (rexrank.results_schema format)
    per_study/<test_set>/<track>/<id>.parquet per-study scores, public test sets only
    index/records/<xx>.json                   every record's path and content id, in 256
                                              shards (what changed since a reader's last look)
    index/names/<key>.json                    result records by model name
    index/layout.json                         present once the indexes cover every record

A store written before the indexes existed (every request in queue/, no results index)
is read as it is and moved to this layout by the first worker (rexrank.store.layout).
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from datetime import datetime, timezone

from rexrank.store.names import NAME_KEY_VERSION
from rexrank.errors import RexrankError

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
# predictions another namespace had first: waiting for the maintainers (`rexrank review`),
# never claimed by a worker
HELD = "HELD"
STATUSES = (PENDING, RUNNING, HELD, FINISHED, FAILED)

# why a request is FAILED (its "failure_kind"): the quota treats them differently
VALIDATION = "validation"  # the predictions do not match the test set (counts against a private set's quota)
REFUSED = "refused"  # the backend's policy refused it (quota, duplicate, name) before scoring
COVERAGE = "coverage"  # a metric scored too few studies: nothing published; can be requeued
CANCELLED = "cancelled"  # by the maintainers
REJECTED = "rejected"  # held for review, and rejected by the maintainers
INTERNAL = "internal"  # a metric or the worker failed

OPEN = (PENDING, RUNNING, HELD)
SETTLED = (FINISHED, FAILED)

QUEUE_DIR = "queue/"
DONE_DIR = "done/"
PREDICTIONS_DIR = "predictions/"
REQUEST_NAMES_DIR = "index/names/"
REQUEST_SUBMITTERS_DIR = "index/submitters/"
REQUEST_CONTENTS_DIR = "index/predictions/"
RECENT_INDEX = "index/recent.json"
# when each open request was filed (the server's time, which quota windows, queue order and
# displayed dates use): the filing server's clock for filings through Store.submit, else
# when the backend first saw the request file; never a time written in the request
RECEIVED_INDEX = "index/received.json"
RECENT_LIMIT = 100
CONFIG_FILE = "config.json"
SCRATCH_DIR = "scratch/"  # shard outputs of dispatched requests (organisers only: the requests repo)

RECORDS_DIR = "records/"
PER_STUDY_DIR = "per_study/"
RESULT_SHARDS_DIR = "index/records/"
RESULT_NAMES_DIR = "index/names/"
RESULTS_LAYOUT = "index/layout.json"
REQUESTS_LAYOUT = "index/layout.json"  # in the requests repo: the name key version of its indexes
INDEX_DIR = "index/"
# what the layout files say once the indexes are current: index files of model and submitter
# names are named by name_key, so indexes of another name key version are rebuilt
RESULTS_LAYOUT_CONTENT = {"layout": 2, "names": NAME_KEY_VERSION}
REQUESTS_LAYOUT_CONTENT = {"names": NAME_KEY_VERSION, "contents": 1}  # contents: the index by content sha
# what the store itself writes into each repo (anything else there is not store data)
LEDGER_DIR = "ledger/"
ACCOUNTS_DIR = "accounts/"
COPIES_DIR = "copies/"
REQUESTS_DATA_PREFIXES = (QUEUE_DIR, DONE_DIR, PREDICTIONS_DIR, INDEX_DIR, CONFIG_FILE, LEDGER_DIR, SCRATCH_DIR,
                          ACCOUNTS_DIR, COPIES_DIR)
RESULTS_DATA_PREFIXES = (RECORDS_DIR, PER_STUDY_DIR, INDEX_DIR)


# what `new_request_id` makes: the only ids a path is ever built from (no "../", no 300 characters)
REQUEST_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}-[0-9a-f]{10}")  # ASCII digits only
REQUEST_ID_EXAMPLE = "20260101T120000.000000-0123456789"


class BadRequestId(RexrankError, ValueError):
    """Not a request id; str() says so in one line, without repeating the whole text."""


def check_request_id(request_id) -> str:
    """`request_id` if it has the format `new_request_id` gives, else BadRequestId: checked
    before any path is built from an id a user or a record supplied."""
    if isinstance(request_id, str) and REQUEST_ID.fullmatch(request_id):
        return request_id
    text = repr(request_id)
    shown = text if len(text) <= 60 else f"{text[:40]}... ({len(str(request_id))} characters)"
    raise BadRequestId(f"{shown} is not a request id (expected the form {REQUEST_ID_EXAMPLE})")


def request_path(request_id: str, status: str = PENDING) -> str:
    """Where a request with `status` lives: queue/ while open, done/ once settled."""
    return f"{DONE_DIR if status in SETTLED else QUEUE_DIR}{check_request_id(request_id)}.json"


def request_paths(request_id: str) -> tuple[str, str]:
    """Both places a request can be (the queue first)."""
    check_request_id(request_id)
    return f"{QUEUE_DIR}{request_id}.json", f"{DONE_DIR}{request_id}.json"


def key_file(folder: str, name: str) -> str:
    """The index file for a model or submitter name: names that compare equal
    (rexrank.store.names.name_key) share it."""
    from rexrank.store.names import name_key

    return f"{folder}{hashlib.sha256(name_key(name).encode('utf-8')).hexdigest()[:32]}.json"


def request_index_files(model_name: str, submitter: str, sha256: str) -> tuple[str, str, str]:
    """The index files a settled request is listed in: by model name, by submitter (its
    id, or its name: rexrank.store.accounts.index_name), by the content of its predictions."""
    content = hashlib.sha256(str(sha256).encode("utf-8")).hexdigest()[:32]
    return (key_file(REQUEST_NAMES_DIR, model_name), key_file(REQUEST_SUBMITTERS_DIR, submitter),
            f"{REQUEST_CONTENTS_DIR}{content}.json")


def result_shard(path: str) -> str:
    return f"{RESULT_SHARDS_DIR}{hashlib.sha256(path.encode('utf-8')).hexdigest()[:2]}.json"


def predictions_path(request_id: str) -> str:
    return f"{PREDICTIONS_DIR}{check_request_id(request_id)}/test.parquet"


def shard_paths(request_id: str, shard: int, attempt: int) -> tuple[str, str]:
    """(summary JSON, per-study parquet) of one attempt of one shard of a dispatched request."""
    stem = f"{SCRATCH_DIR}{check_request_id(request_id)}/shard-{int(shard):03d}-attempt-{int(attempt)}"
    return f"{stem}.json", f"{stem}.parquet"


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(part)) or "_"


def result_path(record: dict) -> str:
    return f"{RECORDS_DIR}{_safe(record['test_set'])}/{_safe(record['track'])}/{_safe(record['id'])}.json"


def per_study_path(test_set: str, track: str, result_id: str) -> str:
    return f"{PER_STUDY_DIR}{_safe(test_set)}/{_safe(track)}/{_safe(result_id)}.parquet"


def public_source(source) -> str:
    """How a request names its predictions where others can read it: a Hub id as it is
    (hf://USER/REPO@SHA), a local file by its base name only (never the submitter's or the
    server's folders)."""
    text = str(source or "")
    if text.startswith("hf://"):
        return text
    return text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


PRIVATE_DATASET = "a private dataset"


def public_predictions_source(predictions: dict) -> str:
    """How a request's predictions (its `predictions` field) are named where anyone can read
    them: a Hub dataset by its id (hf://USER/REPO@SHA) only if the Hub said it was public
    when it was filed (`public`, recorded by the filing server), else as a private dataset
    with its commit sha (enough for its owner to check); a local file by its base name."""
    source = str(predictions.get("source") or "")
    if not source.startswith("hf://"):
        return public_source(source)
    if predictions.get("public") is True:
        return source
    sha = predictions.get("revision") or source.rpartition("@")[2]
    return f"{PRIVATE_DATASET} at commit {sha}"


_LOCAL_PATH = re.compile(r"^(?:/|~|[A-Za-z]:[\\/]|\\\\|\.{1,2}[\\/])")


def public_paths(obj):
    r"""`obj` (JSON values) with every string that is a local path (/..., ~..., C:\..., ./...)
    cut to its base name: a metric's provenance names the backend's checkpoint files, and
    the server's folders are nobody's business (a Hub id or a URL is kept)."""
    if isinstance(obj, dict):
        return {k: public_paths(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [public_paths(v) for v in obj]
    if isinstance(obj, str) and _LOCAL_PATH.match(obj):
        return public_source(obj)
    return obj


def public_store_name(store_name: str) -> str:
    """A store as a page names it: a Hub store by its hf:// name, a local store by its
    folder's own name (not the server's path to it)."""
    text = str(store_name)
    return text if text.startswith("hf://") else f"local store {public_source(text)}"


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def new_request_id(ts: float, *parts: str) -> str:
    """Sortable by submission time to the microsecond (the queue's order, and so who used a
    model name first, must not depend on a hash within one second); the hash keeps
    simultaneous submissions apart."""
    digest = hashlib.sha256("\x00".join([repr(ts), *parts]).encode()).hexdigest()[:10]
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y%m%dT%H%M%S.%f") + f"-{digest}"


def dumps(record: dict) -> bytes:
    return (json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def status_view(request: dict, result: dict | None = None) -> dict:
    """What `rexrank status --json` prints for one request."""
    return {
        "id": request["id"],
        "status": request["status"],
        "error": request.get("error"),
        "results": result.get("values") if result else None,
        # what the result lacks and why (e.g. a metric this backend could not run), when anything
        **({"notes": list(request["notes"])} if request.get("notes") else {}),
    }


class BadRecord(ValueError):
    """A queue or result file that cannot be used; str() says why (one line)."""


REQUEST_FIELDS = {"id": str, "status": str, "test_set": str, "track": str, "model_name": str, "submitter": str,
                  "submitted_time": str, "predictions": dict}
RESULT_FIELDS = {"id": str, "model_name": str, "test_set": str, "track": str, "values": dict}


def _check_fields(record, fields: dict) -> None:
    if not isinstance(record, dict):
        raise BadRecord(f"a JSON {type(record).__name__}, not an object")
    missing = [k for k in fields if k not in record]
    if missing:
        raise BadRecord(f"lacks {', '.join(missing)}")
    wrong = [f"{k} is {type(record[k]).__name__}, not {t.__name__}" for k, t in fields.items() if not isinstance(record[k], t)]
    if wrong:
        raise BadRecord("; ".join(wrong))


def _load(data: bytes) -> dict:
    from rexrank.strict_json import JSONProblem, duplicate_keys, loads

    try:
        record = loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRecord(f"not UTF-8 (byte {exc.start})") from None
    except JSONProblem as exc:
        raise BadRecord(str(exc)) from None
    if duplicate_keys(record):
        raise BadRecord(f"repeated keys {duplicate_keys(record)[0][1]}")
    return record


def parse_request(data: bytes, path: str) -> dict:
    """A queue file's record, checked enough that every queue operation can rely on it."""
    record = _load(data)
    _check_fields(record, REQUEST_FIELDS)
    try:
        check_request_id(record["id"])
    except BadRequestId as exc:
        raise BadRecord(str(exc)) from None
    if path not in request_paths(record["id"]):
        raise BadRecord(f"holds request id {record['id']!r}, which belongs in {request_path(record['id'], record['status'])}")
    if record["status"] not in STATUSES:
        raise BadRecord(f"unknown status {record['status']!r}")
    if record["status"] in OPEN and path.startswith(DONE_DIR):
        # a worker lists only the queue: an open request here would never be scored
        raise BadRecord(f"is {record['status']} but lies among the settled requests; it belongs in {request_path(record['id'])}")
    try:
        parse_iso(record["submitted_time"])
    except ValueError:
        raise BadRecord(f"submitted_time {record['submitted_time']!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    preds = record["predictions"]
    if not isinstance(preds.get("path"), str) or not isinstance(preds.get("sha256"), str):
        raise BadRecord("predictions lacks its path or sha256")
    for key, types in (("attempts", (int,)), ("lease_expires", (int, float, type(None)))):
        if key in record and (isinstance(record[key], bool) or not isinstance(record[key], types)):
            raise BadRecord(f"{key} is {type(record[key]).__name__}")
    return record


def with_server_time(path: str, request: dict, received: dict) -> dict:
    """An open request as the server dates it: `submitted_time` (and `received_time`) is
    the time in the register (`received`: filed through the API, or first seen by the
    backend), whatever time the file's writer put there; a request file not seen yet has
    no `received_time`. Settled requests were written by the backend itself and are
    returned as they are."""
    if not path.startswith(QUEUE_DIR) or request["status"] not in OPEN:
        return request
    out = dict(request)
    out.pop("received_time", None)
    when = received.get(request["id"])
    if _is_iso(when):
        out["submitted_time"] = out["received_time"] = when
    return out


def _is_iso(text) -> bool:
    try:
        parse_iso(text)
        return True
    except (TypeError, ValueError):
        return False


SUMMARY_FIELDS = ("id", "status", "failure_kind", "private", "submitted_time", "submitter", "model_name", "test_set",
                  "track")
# who filed it, by Hub id, and under which namespace (rexrank.store.accounts): absent from
# requests filed before ids (or, the ids, on a local store)
ACCOUNT_FIELDS = ("submitter_id", "namespace", "namespace_id")
RECENT_FIELDS = ("institution", "error", "finished_time", "worker", "result_id")


def summary(request: dict) -> dict:
    """What the submission rules (rexrank.store.policy) read of a settled request, shaped
    like the request itself so that the same rules apply to either."""
    out = {k: request.get(k) for k in SUMMARY_FIELDS}
    out.update({k: request[k] for k in ACCOUNT_FIELDS if request.get(k)})
    out["predictions"] = {"sha256": request["predictions"]["sha256"]}
    return out


def recent_entry(request: dict) -> dict:
    """A settled request as the queue tables show it."""
    return {**summary(request), **{k: request.get(k) for k in RECENT_FIELDS}}


def parse_result(data: bytes, path: str) -> dict:
    record = _load(data)
    _check_fields(record, RESULT_FIELDS)
    return record


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
