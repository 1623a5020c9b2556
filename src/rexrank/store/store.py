"""`Store`: the requests queue and the results, over two repos (local or Hub)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rexrank.errors import SubmissionError
from rexrank.store import records as R
from rexrank.store.policy import Quota, check_lengths, check_names, check_policy
from rexrank.store.repo import Repo, Snapshot, StoreError, transact

log = logging.getLogger("rexrank.store")

REQUIRED_RESULT_KEYS = ("id", "model_name", "test_set", "track", "values")


@dataclass(frozen=True)
class Problem:
    """A quarantined record: which repo ("requests" or "results"), its path there, why."""

    repo: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.repo}/{self.path}: {self.reason}"


class Store:
    def __init__(self, requests: Repo, results: Repo, *, name: str, quota: Quota | None = None):
        self.requests = requests
        self.results = results
        self.name = name
        self.quota = quota if quota is not None else Quota.from_env()
        self._problems: dict[str, dict[str, Problem]] = {"requests": {}, "results": {}}
        self._reported: set[tuple[str, str, str]] = set()

    def __repr__(self) -> str:
        return f"Store({self.name!r})"

    # ---- reading ----------------------------------------------------------------------
    # A file that cannot be used (not JSON, a field missing, ...) is quarantined: left out
    # of every listing, kept in `problems()`, logged once per version of the file. It never
    # stops the other requests or results.
    def _records(self, which: str, snap: Snapshot, prefix: str, parse) -> list[dict]:
        repo = self.requests if which == "requests" else self.results
        good, bad = [], {}
        for path in snap.paths(prefix, ".json"):
            try:
                good.append(parse(repo.read(snap, path), path))
            except R.BadRecord as exc:
                problem = Problem(which, path, str(exc))
                bad[path] = problem
                if (which, path, snap.files[path]) not in self._reported:
                    self._reported.add((which, path, snap.files[path]))
                    log.warning("%s: skipped an unreadable record: %s", self.name, problem)
        self._problems[which] = bad
        return good

    def _requests_in(self, snap: Snapshot) -> list[dict]:
        reqs = self._records("requests", snap, R.QUEUE_DIR, R.parse_request)
        return sorted(reqs, key=lambda r: (r["submitted_time"], r["id"]))

    def problems(self) -> list[Problem]:
        """Queue and result files skipped because they cannot be used (re-read now)."""
        self._requests_in(self.requests.snapshot())
        self._records("results", self.results.snapshot(), R.RECORDS_DIR, R.parse_result)
        return [*self._problems["requests"].values(), *self._problems["results"].values()]

    def quarantined(self, repo: str) -> list[Problem]:
        """Problems found by the last listing of `repo` ("requests" or "results"), not re-read."""
        return list(self._problems[repo].values())

    def list_requests(self, status: str | Iterable[str] | None = None) -> list[dict]:
        """Request records, oldest first; optionally only those with `status`."""
        reqs = self._requests_in(self.requests.snapshot())
        if status is None:
            return reqs
        wanted = {status} if isinstance(status, str) else set(status)
        return [r for r in reqs if r["status"] in wanted]

    def _read_request(self, snap: Snapshot, request_id: str) -> dict:
        path = R.request_path(request_id)
        if path not in snap.files:
            raise StoreError(f"no request {request_id!r} in {self.name}")
        try:
            return R.parse_request(self.requests.read(snap, path), path)
        except R.BadRecord as exc:
            raise StoreError(f"request {request_id!r} in {self.name} cannot be read: {exc}") from None

    def get_request(self, request_id: str) -> dict:
        return self._read_request(self.requests.snapshot(), request_id)

    def read_predictions(self, request: dict) -> bytes:
        """The stored predictions parquet of a request."""
        snap = self.requests.snapshot()
        return self.requests.read(snap, request["predictions"]["path"])

    def list_results(self) -> list[dict]:
        """Result records (format: rexrank.results_schema), sorted by test set, track, id."""
        out = self._records("results", self.results.snapshot(), R.RECORDS_DIR, R.parse_result)
        return sorted(out, key=lambda r: (str(r["test_set"]), str(r["track"]), str(r["id"])))

    def get_result(self, result_id: str) -> dict | None:
        return next((r for r in self.list_results() if r["id"] == result_id), None)

    def read_per_study(self, record: dict) -> bytes | None:
        path = record.get("per_study_path")
        if not path:
            return None
        return self.results.read(self.results.snapshot(), path)

    # ---- writing results -------------------------------------------------------------
    def add_result(self, record: dict, *, per_study: bytes | None = None) -> None:
        """Write (or replace, same id) one result record atomically; with `per_study`
        (parquet bytes, public test sets only) in the same commit."""
        missing = [k for k in REQUIRED_RESULT_KEYS if k not in record]
        if missing:
            raise StoreError(f"result record lacks {', '.join(missing)}")
        record = R.jsonable(dict(record))
        changes: dict[str, bytes | None] = {}
        if per_study is not None:
            record["per_study_path"] = R.per_study_path(record["test_set"], record["track"], record["id"])
            record["per_study_available"] = True
            changes[record["per_study_path"]] = per_study
        changes[R.result_path(record)] = R.dumps(record)
        transact(self.results, lambda snap: (changes, f"result {record['id']}", None))

    def add_results(self, records: Iterable[dict]) -> int:
        """Write many result records in one commit (e.g. seeding the published tables:
        one Hub commit instead of one per record). Returns how many were written."""
        changes: dict[str, bytes | None] = {}
        for record in records:
            missing = [k for k in REQUIRED_RESULT_KEYS if k not in record]
            if missing:
                raise StoreError(f"result record {record.get('id')!r} lacks {', '.join(missing)}")
            record = R.jsonable(dict(record))
            changes[R.result_path(record)] = R.dumps(record)
        if changes:
            transact(self.results, lambda snap: (changes, f"{len(changes)} results", None))
        return len(changes)

    # ---- submitting ------------------------------------------------------------------
    def submit(
        self,
        *,
        test_set: str,
        track: str,
        predictions: str | Path,
        model_name: str,
        submitter: str,
        institution: str = "",
        model_url: str = "",
        trained_on: Iterable[str] = (),
        data_dir: str | Path | None = None,
        hub_endpoint: str | None = None,
        hub_token: str | None = None,
        source_label: str | None = None,
        now: float | None = None,
        id_column: str | None = None,
        prediction_column: str | None = None,
    ) -> dict:
        """File a PENDING request; returns the request record (`id`, `status`, ...).

        test_set, track: e.g. "iu_xray", "findings" (rexrank.testsets.registry).
        predictions: a file (ReXrank submission JSON, CSV/JSONL/JSON list with id and
            prediction columns, parquet), a `datasets.save_to_disk` folder, or
            "hf://USER/REPO[@REVISION]" (a Hub dataset repo; pinned to its commit).
        model_name, submitter (user or org name; the quota counts per submitter),
        institution, model_url, trained_on (test set names the model was trained on).
        data_dir: where the test set's JSON is (needed for MIMIC-CXR / CheXpert Plus; for
            a private test set, ids are checked by the backend instead).
        source_label: how the request names a local predictions file (the leaderboard passes
            the uploaded file's own name, never the server's temporary path).
        id_column, prediction_column: the file's column names when they are not the usual ones.

        The predictions are validated with rexrank.submissions (the `rexrank score`
        validator) before anything is written. Raises SubmissionError (a RexrankError)
        with a message for the submitter if they are invalid, identical to an earlier
        request (same predictions and model name), or over the submitter's quota.
        """
        from rexrank.store.predictions import content_sha256, read_raw_from_hub, to_parquet_bytes, validate_for
        from rexrank.testsets.registry import TEST_SETS, check_track, get_spec

        model_name, submitter = (model_name or "").strip(), (submitter or "").strip()
        if not model_name:
            raise SubmissionError("model name is empty")
        if not submitter:
            raise SubmissionError("submitter is empty")
        for label, value in (("model name", model_name), ("submitter", submitter), ("institution", institution), ("model URL", model_url)):
            if len(value or "") > 300:
                raise SubmissionError(f"{label} is longer than 300 characters")
        check_names(model_name=model_name, submitter=submitter, institution=institution, model_url=model_url)
        spec = get_spec(test_set)
        check_track(track)
        trained_on = [t.strip() for t in trained_on if t and t.strip()]
        unknown = [t for t in trained_on if t not in TEST_SETS]
        if unknown:
            raise SubmissionError(f"--trained-on: unknown test set(s) {unknown}; known: {', '.join(TEST_SETS)}")

        source = str(predictions)
        if source.startswith("hf://"):
            raw, source = read_raw_from_hub(source, endpoint=hub_endpoint, token=hub_token,
                                            id_column=id_column, prediction_column=prediction_column)
        else:
            raw = _read_raw_local(predictions, id_column=id_column, prediction_column=prediction_column)
            source = source_label or source
        preds, ids_checked = validate_for(raw, test_set, track, data_dir=data_dir)
        check_lengths(preds.ids, preds.texts, source=source)
        sha = content_sha256(preds)
        parquet = to_parquet_bytes(preds)

        results = self.list_results()  # published entries own their model names

        def decide(snap: Snapshot):
            ts = R.now() if now is None else now
            existing = self._requests_in(snap)
            check_policy(existing, results, {"model_name": model_name, "submitter": submitter, "test_set": test_set,
                                             "track": track, "predictions": {"sha256": sha}}, now=ts, quota=self.quota)
            rid = R.new_request_id(ts, submitter, model_name, sha)
            request = {
                "id": rid,
                "status": R.PENDING,
                "test_set": test_set,
                "track": track,
                "private": spec.private,
                "model_name": model_name,
                "submitter": submitter,
                "institution": (institution or "").strip(),
                "model_url": (model_url or "").strip(),
                "trained_on": trained_on,
                "submitted_time": R.iso(ts),
                "predictions": {
                    "path": R.predictions_path(rid),
                    "source": source,
                    "sha256": sha,
                    "n": len(preds),
                    "n_empty": preds.n_empty,
                    "ids_checked": ids_checked,
                },
                "worker": None,
                "lease_expires": None,
                "attempts": 0,
                "error": None,
                "result_id": None,
                "history": [{"time": R.iso(ts), "status": R.PENDING}],
            }
            changes = {R.request_path(rid): R.dumps(request), R.predictions_path(rid): parquet}
            return changes, f"submit {rid}: {model_name} on {test_set}/{track}", request

        return transact(self.requests, decide)

    # ---- the queue (used by the backend) ---------------------------------------------
    def _update(self, request_id: str, change, message: str):
        """Apply `change(request) -> new request | None` atomically; returns the new
        request, or None if `change` declined."""
        path = R.request_path(request_id)

        def decide(snap: Snapshot):
            if path not in snap.files:
                raise StoreError(f"no request {request_id!r} in {self.name}")
            new = change(self._read_request(snap, request_id))
            if new is None:
                return None
            return {path: R.dumps(new)}, f"{message} {request_id}", new

        return transact(self.requests, decide)

    def claim(self, worker_id: str, *, lease_seconds: float, max_attempts: int = 3) -> dict | None:
        """Atomically take the oldest PENDING request, or a RUNNING one whose lease expired
        (its worker died): it becomes RUNNING with this worker's id and a lease. A request
        interrupted `max_attempts` times is FAILED instead. None if nothing to do."""

        def decide(snap: Snapshot):
            ts = R.now()
            changes: dict[str, bytes | None] = {}
            for req in self._requests_in(snap):
                expired = req["status"] == R.RUNNING and (req.get("lease_expires") or 0) < ts
                if req["status"] != R.PENDING and not expired:
                    continue
                if expired and req.get("attempts", 0) >= max_attempts:
                    changes[R.request_path(req["id"])] = R.dumps(_transition(
                        req, R.FAILED, ts, failure_kind=R.INTERNAL,
                        error=f"scoring was interrupted {req.get('attempts', 0)} times (worker stopped or timed out); "
                        "this usually means it needs more memory or time than the worker has — contact the maintainers",
                    ))
                    continue
                claimed = _transition(req, R.RUNNING, ts, worker=worker_id, lease_expires=ts + lease_seconds,
                                      attempts=req.get("attempts", 0) + 1, started_time=R.iso(ts))
                changes[R.request_path(req["id"])] = R.dumps(claimed)
                return changes, f"claim {req['id']} by {worker_id}", claimed
            return (changes, "fail interrupted requests", None) if changes else None

        return transact(self.requests, decide)

    def _holder_guard(self, worker_id: str, update):
        def change(req):
            if req["status"] != R.RUNNING or req.get("worker") != worker_id:
                return None  # lease lost: another worker holds it, or it was settled
            return update(req)
        return change

    def renew_lease(self, request_id: str, worker_id: str, *, lease_seconds: float) -> bool:
        """Extend this worker's lease; False if it no longer holds the request."""
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: {**r, "lease_expires": R.now() + lease_seconds}),
            "renew lease",
        )
        return new is not None

    def finish(self, request_id: str, worker_id: str, *, result_id: str) -> bool:
        ts = R.now()
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: _transition(r, R.FINISHED, ts, result_id=result_id, lease_expires=None, error=None)),
            "finish",
        )
        return new is not None

    def fail(self, request_id: str, worker_id: str, *, error: str, kind: str = R.INTERNAL) -> bool:
        """Settle as FAILED with a message for the submitter; `kind` (rexrank.store.records)
        says why, which decides whether it counts against the quota."""
        ts = R.now()
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: _transition(r, R.FAILED, ts, error=error, failure_kind=kind, lease_expires=None)),
            "fail",
        )
        return new is not None

    def release(self, request_id: str, worker_id: str, *, reason: str) -> bool:
        """Give a claimed request back: PENDING again, the attempt not counted (the worker,
        not the request, had a problem: e.g. it cannot load the test set)."""
        ts = R.now()

        def back(r):
            new = _transition(r, R.PENDING, ts, worker=None, lease_expires=None, attempts=max(0, r.get("attempts", 1) - 1))
            new["history"][-1]["note"] = reason
            return new

        return self._update(request_id, self._holder_guard(worker_id, back), "release") is not None

    def requeue(self, request_id: str) -> dict:
        """Put a FAILED (or stuck RUNNING) request back to PENDING (maintainers): e.g. after
        an LLM outage made a metric miss the coverage rule. LLM answers already received
        are cached, so only the missing ones are asked again."""
        ts = R.now()
        current = self.get_request(request_id)
        if current["status"] in (R.FINISHED, R.PENDING):
            raise StoreError(f"request {request_id} is {current['status']}; only FAILED or RUNNING requests can be requeued")
        return self._update(
            request_id,
            lambda r: _transition(r, R.PENDING, ts, worker=None, lease_expires=None, error=None, failure_kind=None,
                                  attempts=0) if r["status"] in (R.FAILED, R.RUNNING) else None,
            "requeue",
        ) or self.get_request(request_id)

    def cancel(self, request_id: str, *, reason: str = "") -> dict:
        """Withdraw a PENDING or RUNNING request (maintainers): FAILED, kind "cancelled"
        (no quota used, its model name stays free). A worker scoring it loses its lease and
        writes nothing."""
        ts = R.now()
        current = self.get_request(request_id)
        if current["status"] not in (R.PENDING, R.RUNNING):
            raise StoreError(f"request {request_id} is {current['status']}; only PENDING or RUNNING requests can be cancelled")
        message = "cancelled by the maintainers" + (f": {reason}" if reason else "")
        return self._update(
            request_id,
            lambda r: _transition(r, R.FAILED, ts, error=message, failure_kind=R.CANCELLED, worker=None, lease_expires=None)
            if r["status"] in (R.PENDING, R.RUNNING) else None,
            "cancel",
        ) or self.get_request(request_id)

    def policy_problem(self, request: dict) -> str | None:
        """The backend's own check of the submission rules (rexrank.store.policy) for a
        request, against the requests filed before it and those already scored (a request
        dated back by a rogue client still meets them): a message, or None if it passes."""
        snap = self.requests.snapshot()
        key = (request["submitted_time"], request["id"])
        earlier = [r for r in self._requests_in(snap) if r["id"] != request["id"]
                   and ((r["submitted_time"], r["id"]) < key or r["status"] == R.FINISHED)]
        try:
            check_policy(earlier, self.list_results(), request, now=R.parse_iso(request["submitted_time"]), quota=self.quota)
        except SubmissionError as exc:
            return str(exc)
        return None


def _transition(req: dict, status: str, ts: float, **fields) -> dict:
    new = {**req, **fields, "status": status}
    if status in (R.FINISHED, R.FAILED):
        new["finished_time"] = R.iso(ts)
    entry = {"time": R.iso(ts), "status": status}
    if fields.get("worker"):
        entry["worker"] = fields["worker"]
    new["history"] = [*req.get("history", []), entry]
    return new


def _read_raw_local(path: str | Path, **columns):
    """read_raw_predictions, with undecodable bytes reported instead of a traceback."""
    from rexrank.submissions import read_raw_predictions

    try:
        return read_raw_predictions(path, **columns)
    except UnicodeDecodeError as exc:
        raise SubmissionError(
            f"not UTF-8 text: byte {exc.object[exc.start:exc.start + 1]!r} at position {exc.start}; "
            "save the file as UTF-8",
            source=str(path),
        ) from None
