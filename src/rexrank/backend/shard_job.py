"""One shard of a dispatched request, as a Job runs it (`rexrank backend-shard`): read the
request and its plan from the store, score the shard's studies, write the per-study file
and the summaries to the store's scratch area, keyed by request, shard and attempt.

The Job gets everything from its spec (rexrank.backend.dispatch.Dispatcher.job_spec): the
store token as the secret HF_TOKEN; a private test set read here, inside the Job, from its
private data repo (or a local Job's data folder): nothing of it is on the command line. It
scores only under the rexrank build the dispatcher runs (the plan names it), or the shards
would not merge. On a private test set its log names no study range or count: the track's
size is private (its shard count comes from the whole set's public size, so a shard may
hold no study at all).
A failure the submitter must hear about (their predictions do not match the test set, a
metric cannot run) is written as the shard's outcome, already in the words the public
may read (Worker.failure_message), so the dispatcher fails the request without retrying.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os

from rexrank import __version__
from rexrank.errors import ReaderKilled, TestSetError
from rexrank.store import records as R
from rexrank.store.repo import transact

log = logging.getLogger("rexrank.backend")

# failure kinds a retry cannot change (Worker.failure_message's; the rules' refusals are the
# dispatcher's, before any Job)
FINAL_KINDS = (R.VALIDATION, R.COVERAGE)
# a private Hub dataset holding the test sets' folder (as the backend Space reads it)
PRIVATE_DATA_REPO = "REXRANK_PRIVATE_DATA_REPO"
VERSION_VARIABLE = "REXRANK_VERSION"  # the dispatcher's build, in the Job's env


@contextlib.contextmanager
def job_data_dir(data_dir):
    """The data folder inside a Job, for the block's length: the private data repo,
    downloaded with the Job's token (HF_TOKEN, a secret) when one is named, into `data_dir`
    or else a scratch folder removed when the block ends, however it ends (the private test
    set is on disk only while a shard is scored); without one, `data_dir`."""
    repo = os.environ.get(PRIVATE_DATA_REPO)
    if not repo:
        yield data_dir
        return
    from huggingface_hub import snapshot_download

    from rexrank.store.scratch import ScratchDir

    with contextlib.ExitStack() as stack:
        target = data_dir or stack.enter_context(ScratchDir("private-data"))
        snapshot_download(repo, repo_type="dataset", local_dir=str(target), token=os.environ.get("HF_TOKEN"))
        yield target


def run_shard(store, request_id: str, shard: int, attempt: int, *, data_dir=None, progress: bool = False) -> int:
    """Score one shard; the process's exit status (0: written)."""
    request = store.get_request(request_id)
    plan = (request.get("dispatch") or {}).get("plan")
    if request["status"] != R.RUNNING or not plan:
        log.warning("%s is %s: shard %d not scored", request_id, request["status"], shard)
        return 3
    json_path, _ = R.shard_paths(request_id, shard, attempt)
    wanted = plan.get("rexrank_version") or os.environ.get(VERSION_VARIABLE)
    if wanted and wanted != __version__:  # shards of two builds do not merge: another attempt cannot help here
        _write(store, {json_path: _outcome(request_id, shard, attempt, "machine",
                                           f"the Job runs rexrank {__version__} and the dispatcher {wanted}: install "
                                           "the dispatcher's build in its Jobs (the dispatch setting `install`)")})
        return 1
    with job_data_dir(data_dir) as data_dir:
        return _score_shard(store, request, shard, attempt, data_dir=data_dir, progress=progress)


def _score_shard(store, request: dict, shard: int, attempt: int, *, data_dir, progress: bool) -> int:
    """run_shard's scoring and writing, with the test set's folder at hand."""
    from rexrank.backend.merge import shard_header, shard_table
    from rexrank.backend.resolved import resolve_request
    from rexrank.backend.worker import Worker

    request_id, plan = request["id"], request["dispatch"]["plan"]
    start, stop = plan["ranges"][shard]
    json_path, parquet_path = R.shard_paths(request_id, shard, attempt)
    options = plan.get("metric_options") or {}
    worker = Worker(store, data_dir=data_dir, metrics=plan["metrics"], metric_options=options,
                    worker_id=f"job-{shard}-{attempt}", progress=progress)
    resolved = resolve_request(request, data_dir)
    if start >= stop:  # no study of this request falls in the shard
        _write(store, {json_path: R.dumps({"request_id": request_id, "shard": shard, "attempt": attempt, "empty": True}),
                       parquet_path: _empty_table()})
        _log_written(resolved, request_id, shard, attempt, start, stop)
        return 0
    try:
        run = worker.score_studies(resolved, (start, stop))
    except TestSetError as exc:  # this machine's problem: another attempt may succeed
        _write(store, {json_path: _outcome(request_id, shard, attempt, "machine", f"cannot load the test set: {exc}")})
        return 1
    except ReaderKilled as exc:  # the machine stopped the predictions reader, not the file: the same
        _write(store, {json_path: _outcome(request_id, shard, attempt, "machine", str(exc))})
        return 1
    except Exception as exc:
        message, kind = worker.failure_message(request, exc, resolved=resolved)
        log.error("shard %d of %s failed: %s", shard, request_id, message)
        _write(store, {json_path: _outcome(request_id, shard, attempt, kind, message)})
        return 1
    if store.get_request(request_id)["status"] != R.RUNNING:  # cancelled while this shard was scored
        log.warning("%s is no longer running: shard %d not written", request_id, shard)
        return 3
    meta = shard_header(run, request_id=request_id, shard=shard, attempt=attempt, start=start, stop=stop,
                        metrics=worker.metrics, metric_options=options)
    buf = io.BytesIO()
    shard_table(run).to_parquet(buf, index=False)
    _write(store, {json_path: R.dumps(R.jsonable(meta)), parquet_path: buf.getvalue()})
    _log_written(resolved, request_id, shard, attempt, start, stop)
    return 0


def _log_written(resolved, request_id: str, shard: int, attempt: int, start: int, stop: int) -> None:
    if resolved.private:  # the same line whatever the shard holds: the track's size is private
        log.info("shard %d of %s (attempt %d) written", shard, request_id, attempt)
    else:
        log.info("shard %d of %s (studies [%d, %d), attempt %d) written", shard, request_id, start, stop, attempt)


def _empty_table() -> bytes:
    import pandas as pd

    buf = io.BytesIO()
    pd.DataFrame({"id": pd.Series([], dtype=str)}).to_parquet(buf, index=False)
    return buf.getvalue()


def _outcome(request_id: str, shard: int, attempt: int, kind: str, message: str) -> bytes:
    return R.dumps({"request_id": request_id, "shard": shard, "attempt": attempt,
                    "failed": {"kind": kind, "message": message, "final": kind in FINAL_KINDS}})


def _write(store, files: dict[str, bytes]) -> None:
    transact(store.requests, lambda snap: (files, f"shard output {next(iter(files))}", None))


def read_shard(store, request_id: str, shard: int, attempt: int):
    """(shard JSON, per-study DataFrame or None), or None when the attempt wrote nothing."""
    import pandas as pd

    json_path, parquet_path = R.shard_paths(request_id, shard, attempt)
    snap = store.requests.snapshot()
    data = store.requests.read_optional(snap, json_path)
    if data is None:
        return None
    meta = json.loads(data)
    if "failed" in meta:
        return meta, None
    table = store.requests.read_optional(snap, parquet_path)
    if table is None:
        return None
    return meta, pd.read_parquet(io.BytesIO(table))
