"""The queue operations of a `Store` (used by the backend and the maintainers' commands).

A worker lists only queue/ (the open requests): claiming, renewing a lease and settling
cost the same whatever the history holds. A request that settles moves to done/ in the
same commit that indexes it for the submission rules (rexrank.store.index).
"""
from __future__ import annotations

import logging
import time
import uuid

from rexrank.errors import SubmissionError
from rexrank.store import records as R
from rexrank.store import accounts
from rexrank.store.accounts import Account, index_name, submitter_of
from rexrank.store.index import IndexEdit, load_index
from rexrank.store.policy import check_policy, is_private
from rexrank.store.repo import Snapshot, StoreError, consistent_reads, load_json_object, transact

log = logging.getLogger("rexrank.store")


class QueueOperations:
    """Mixed into `Store` (which provides requests, results, name, quota, _queued,
    _find_request, get_request)."""

    def _history(self, snap: Snapshot, request: dict, legacy: dict) -> list[dict]:
        """Every request the submission rules must see for this request's model name,
        submitter and predictions content: the open ones (queue/, listed in `snap`) and
        the settled ones filed under any of them in the index. Rules that read others
        would find nothing there anyway. `request` is as `accounts.adopt` reads it, and so
        is each request returned, with the names recorded before ids bound in `legacy`."""
        found: dict[str, dict] = {}
        paths = set(R.request_index_files(request["model_name"], index_name(request), request["predictions"]["sha256"]))
        paths.update(R.key_file(R.REQUEST_SUBMITTERS_DIR, name)
                     for name in accounts.legacy_names(request.get("submitter_id"), legacy))
        for path in sorted(paths):
            found.update(load_index(self.requests, snap, path).get("requests", {}))
        found.update({req["id"]: req for _, req in self._queued(snap)})  # the live record wins
        return [accounts.adopt(r, legacy) for r in found.values()]

    def bind_legacy_name(self, snap: Snapshot, submitter: Account) -> tuple[dict, dict]:
        """accounts/legacy.json as of `snap` with `submitter`'s name bound to its id when
        this is the first filing by an account with an id under a name that has requests or
        ledger charges recorded before ids (rexrank.store.accounts); and the changes that
        record that binding ({} when none is new)."""
        from rexrank.store.ledger import ledger_path
        from rexrank.testsets.registry import TEST_SETS

        legacy = accounts.legacy_bindings(self.requests, snap)
        name = submitter.name
        if submitter.id is None or accounts.bound_id(name, legacy) is not None:
            return legacy, {}
        settled = load_index(self.requests, snap, R.key_file(R.REQUEST_SUBMITTERS_DIR, name)).get("requests")
        open_ = any(not r.get("submitter_id") and accounts.account_key(r["submitter"]) == accounts.account_key(name)
                    for _, r in self._queued(snap))
        charged = any(self.requests.read_optional(snap, ledger_path(Account(name), test_set)) is not None
                      for test_set, spec in TEST_SETS.items() if spec.private)
        if not (settled or open_ or charged):
            return legacy, {}
        legacy = {**legacy, accounts.account_key(name): accounts.legacy_binding(submitter)}
        return legacy, {accounts.LEGACY_BINDINGS: R.dumps(legacy)}

    def _update(self, request_id: str, change, message: str, *, arrivals: bool = False):
        """Apply `change(request) -> new request | None` atomically (moving the request
        between queue/ and done/ as its status says); returns the new request, or None
        if `change` declined. `arrivals`: also register the requests that arrived since
        the backend last looked (a busy worker's lease renewals keep their times close)."""

        def decide(snap: Snapshot):
            edit = IndexEdit(self.requests, snap)
            ts = R.now()
            if arrivals:
                stamp_arrivals(edit, self._queued(snap), ts)
            found = self._find_request(snap, request_id)
            if found is None:
                raise StoreError(f"no request {request_id!r} in {self.name}")
            [(path, current)] = stamp_arrivals(edit, [found], ts)
            new = change(current)
            if new is None:
                return None
            changes = edit.move_request(path, current, new)
            return {**changes, **edit.changes()}, f"{message} {request_id}", new

        return transact(self.requests, decide, folders=(R.QUEUE_DIR,))

    def claim(self, worker_id: str, *, lease_seconds: float, max_attempts: int = 3) -> dict | None:
        """Atomically take the oldest PENDING request, or a RUNNING one whose lease expired
        (its worker died): it becomes RUNNING with this worker's id and a lease. A request
        interrupted `max_attempts` times is FAILED instead; on a private test set it is
        claimed marked `out_of_attempts`, and the worker fails it at its publication slot
        (rexrank.backend.worker). None if nothing to do.

        Settled requests still in queue/ (settled by an older worker) are moved to done/
        and indexed in the same commit; a store of the earlier layout (every request in
        queue/) is moved and indexed first, once."""
        moved: list[int] = []

        def decide(snap: Snapshot):
            if self.requests_index_stale(snap):
                raise _StaleNameIndex()
            ts = R.now()
            edit = IndexEdit(self.requests, snap)
            changes: dict[str, bytes | None] = {}
            queued = sorted(stamp_arrivals(edit, self._queued(snap), ts), key=lambda pr: (pr[1]["submitted_time"], pr[1]["id"]))
            edit.forget_received({req["id"] for _, req in queued})
            settled = [(path, req) for path, req in queued if req["status"] in R.SETTLED]
            if len(settled) > MOVE_IN_A_CLAIM:
                raise _EarlierLayout(len(settled))
            for path, req in settled:
                changes.update(edit.move_request(path, req, req))
            moved[:] = [len(settled)]
            claimed = None
            leases = self._lease_clock()
            leases.forget({req["id"] for _, req in queued if req["status"] == R.RUNNING})
            for path, req in queued:
                expired = req["status"] == R.RUNNING and leases.expired(req, lease_seconds)
                if req["status"] != R.PENDING and not expired:
                    continue
                if expired and req.get("attempts", 0) >= max_attempts and is_private(req["test_set"]):
                    # when it was interrupted is private (the scoring it died in): claimed to be failed by
                    # this worker at its publication slot, in the door's words (Worker.process_next)
                    claimed = transition(req, R.RUNNING, ts, worker=worker_id, lease_expires=ts + lease_seconds,
                                         out_of_attempts=True, **new_lease(lease_seconds))
                    changes.update(edit.move_request(path, req, claimed))
                    break
                if expired and req.get("attempts", 0) >= max_attempts:
                    changes.update(edit.move_request(path, req, transition(
                        req, R.FAILED, ts, failure_kind=R.INTERNAL,
                        error=f"scoring was interrupted {req.get('attempts', 0)} times (worker stopped or timed out); "
                        "this usually means it needs more memory or time than the worker has — contact the maintainers",
                    )))
                    continue
                claimed = transition(req, R.RUNNING, ts, worker=worker_id, lease_expires=ts + lease_seconds,
                                     attempts=req.get("attempts", 0) + 1, started_time=R.iso(ts),
                                     **new_lease(lease_seconds))
                changes.update(edit.move_request(path, req, claimed))
                break
            if not changes:
                # nothing to claim; register what arrived (the server's time for it)
                arrived = edit.changes()
                return (arrived, "register received requests", None) if arrived else None
            message = f"claim {claimed['id']} by {worker_id}" if claimed else "fail interrupted requests"
            if settled:
                message += f"; move {len(settled)} settled request(s) to {R.DONE_DIR}"
            return {**changes, **edit.changes()}, message, claimed

        try:
            try:
                claimed = transact(self.requests, decide, folders=(R.QUEUE_DIR,))
            except _StaleNameIndex:
                self.reindex_requests_by_names()
                claimed = transact(self.requests, decide, folders=(R.QUEUE_DIR,))
        except _EarlierLayout as exc:
            from rexrank.store.layout import index_requests

            index_requests(self)
            log.info("%s: moved %d settled request(s) from %s to %s and indexed them: the store had the layout of an "
                     "earlier rexrank, in which workers read every request ever filed", self.name, exc.n, R.QUEUE_DIR,
                     R.DONE_DIR)
            claimed = transact(self.requests, decide, folders=(R.QUEUE_DIR,))  # what is left is few
        if moved and moved[0]:
            log.info("%s: moved %d settled request(s) from %s to %s and indexed them (the store layout of this "
                     "version: workers list only open requests)", self.name, moved[0], R.QUEUE_DIR, R.DONE_DIR)
        if claimed is not None:
            self._lease_clock().observe(claimed)  # our own lease: its age counts from now
        return claimed

    def _lease_clock(self) -> "LeaseClock":
        if getattr(self, "_leases", None) is None:
            self._leases = LeaseClock()
        return self._leases

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
            self._holder_guard(worker_id, lambda r: {**r, "lease_expires": R.now() + lease_seconds,
                                                     **new_lease(lease_seconds)}),
            "renew lease",
            arrivals=True,
        )
        if new is not None:
            self._lease_clock().observe(new)
        return new is not None

    def begin_publish(self, request_id: str, worker_id: str) -> bool:
        """The step before a worker publishes: a commit made on the version in which it
        still holds the request (refused if the request changed since: a cancel, another
        worker's claim), marking it as being published, after which a cancel is refused.
        False: nothing may be published."""
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: {**r, "publishing": True}),
            "publish",
        )
        return new is not None

    def record_dispatch(self, request_id: str, worker_id: str, dispatch: dict) -> bool:
        """Keep a dispatched request's shard plan and Jobs (rexrank.backend.dispatch) in its
        record, a commit on the version in which `worker_id` holds it (which also renews
        nothing: the lease keeper does). False if it no longer holds the request."""
        new = self._update(request_id, self._holder_guard(worker_id, lambda r: {**r, "dispatch": dispatch}),
                           "dispatch")
        return new is not None

    def finish(self, request_id: str, worker_id: str, *, result_id: str, notes: list[str] | None = None) -> bool:
        """Settle as FINISHED; `notes` tell the submitter what the result does not hold
        (e.g. a metric of the store's set that this backend cannot run)."""
        ts = R.now()
        extra = {"notes": list(notes)} if notes else {}
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: transition(r, R.FINISHED, ts, result_id=result_id,
                                                               lease_expires=None, error=None, **extra)),
            "finish",
        )
        return new is not None

    def fail(self, request_id: str, worker_id: str, *, error: str, kind: str = R.INTERNAL) -> bool:
        """Settle as FAILED with a message for the submitter; `kind` (rexrank.store.records)
        says why, which decides whether it counts against the quota."""
        ts = R.now()
        new = self._update(
            request_id,
            self._holder_guard(worker_id, lambda r: transition(r, R.FAILED, ts, error=error, failure_kind=kind, lease_expires=None)),
            "fail",
        )
        return new is not None

    def release(self, request_id: str, worker_id: str, *, reason: str) -> bool:
        """Give a claimed request back: PENDING again, the attempt not counted (the worker,
        not the request, had a problem: e.g. it cannot load the test set), and the same
        round for the privacy ledger (rexrank.store.ledger: charged once)."""
        ts = R.now()

        def back(r):
            new = transition(r, R.PENDING, ts, worker=None, lease_expires=None, attempts=max(0, r.get("attempts", 1) - 1),
                             publishing=False)
            new["history"][-1].update(note=reason, given_back=True)
            return new

        return self._update(request_id, self._holder_guard(worker_id, back), "release") is not None

    def requeue(self, request_id: str) -> dict:
        """Put a FAILED (or stuck RUNNING) request back to PENDING (maintainers): e.g. after
        an LLM outage made a metric miss the coverage rule. LLM answers already received
        are cached, so only the missing ones are asked again."""
        ts = R.now()
        current = self.get_request(request_id)
        if current["status"] == R.HELD:
            raise StoreError(f"request {request_id} is HELD for review; release it with `rexrank review --release "
                             f"{request_id}` or reject it with `rexrank review --reject {request_id}`")
        if current["status"] in (R.FINISHED, R.PENDING):
            raise StoreError(f"request {request_id} is {current['status']}; only FAILED or RUNNING requests can be requeued")
        return self._update(
            request_id,
            # a dispatched request starts a new round of shard Jobs (rexrank.backend.dispatch)
            lambda r: transition(r, R.PENDING, ts, worker=None, lease_expires=None, error=None, failure_kind=None,
                                 attempts=0, publishing=False, dispatch=None) if r["status"] in (R.FAILED, R.RUNNING) else None,
            "requeue",
        ) or self.get_request(request_id)

    def cancel(self, request_id: str, *, reason: str = "") -> dict:
        """Withdraw a PENDING or RUNNING request (maintainers): FAILED, kind "cancelled"
        (it counts against the quota like a finished one; its model name stays free). A
        worker scoring it publishes nothing: its publishing step is a commit that fails
        once the request changed. A request whose result is being published can no longer
        be cancelled (StoreError)."""
        ts = R.now()
        current = self.get_request(request_id)
        if current["status"] == R.HELD:
            raise StoreError(f"request {request_id} is HELD for review; reject it with `rexrank review --reject "
                             f"{request_id}` (or release it for scoring with `rexrank review --release {request_id}`)")
        if current["status"] not in (R.PENDING, R.RUNNING):
            raise StoreError(f"request {request_id} is {current['status']}; only PENDING or RUNNING requests can be cancelled")
        message = "cancelled by the maintainers" + (f": {reason}" if reason else "")

        def change(r):
            if r["status"] not in (R.PENDING, R.RUNNING):
                return None
            if r["status"] == R.RUNNING and r.get("publishing"):
                raise StoreError(f"request {request_id}: its result is being published; too late to cancel it")
            return transition(r, R.FAILED, ts, error=message, failure_kind=R.CANCELLED, worker=None, lease_expires=None)

        return self._update(request_id, change, "cancel") or self.get_request(request_id)

    def drop_shard_outputs(self, request_id: str) -> None:
        """Remove a dispatched request's shard outputs (scratch/<id>/, rexrank.backend.dispatch):
        once it is published, failed, cancelled or held, nothing needs them, and on a private
        test set they hold per-study values."""
        prefix = f"{R.SCRATCH_DIR}{R.check_request_id(request_id)}/"

        def decide(snap: Snapshot):
            gone = {path: None for path in snap.paths(prefix)}
            return (gone, f"remove the shard outputs of {request_id}", None) if gone else None

        transact(self.requests, decide, folders=(prefix,))

    def policy_problem(self, request: dict) -> str | None:
        """The backend's own check of the submission rules (rexrank.store.policy) for a
        request, against the requests filed before it (a request dated back by a rogue
        client still meets them): a message, or None if it passes."""
        def read():
            snap = self.requests.snapshot(R.QUEUE_DIR)
            legacy = accounts.legacy_bindings(self.requests, snap)
            adopted = accounts.adopt(request, legacy)
            return adopted, self._history(snap, adopted, legacy)

        # another worker may settle a listed request meanwhile
        request, history = consistent_reads(self.requests, read)
        key = (request["submitted_time"], request["id"])
        # dated by the server (R.with_server_time); one not seen yet arrived after this one
        earlier = [r for r in history if r["id"] != request["id"]
                   and (((r["submitted_time"], r["id"]) < key and _seen(r)) or r["status"] == R.FINISHED)]
        try:
            self.check_approval(self.requests.snapshot(), request["test_set"], submitter_of(request))
            check_policy(earlier, request, now=R.parse_iso(request["submitted_time"]), quota=self.quota)
        except SubmissionError as exc:
            return str(exc)
        return None

    def check_approval(self, snap: Snapshot, test_set: str, submitter) -> dict | None:
        """The approved list's verdict on `submitter` (rexrank.store.accounts.check_approved),
        with the bindings of approved names as of `snap`: the changes that record a first
        binding, or None."""
        from rexrank.store.config import approved_submitters

        approved = approved_submitters(self, test_set)
        if approved is None:
            return None
        bindings = load_json_object(self.requests, snap, accounts.APPROVED_BINDINGS,
                                    damaged=f"{accounts.APPROVED_BINDINGS} is damaged; restore it from the repo's history")
        binding = accounts.check_approved(approved, bindings.get(test_set, {}), submitter=submitter, test_set=test_set)
        if binding is None:
            return None
        return {accounts.APPROVED_BINDINGS: R.dumps(accounts.bind(bindings, test_set, submitter.name, binding))}


MOVE_IN_A_CLAIM = 25  # more settled requests in queue/ than this: a store of the earlier layout


class _StaleNameIndex(Exception):
    """The request indexes were built with an earlier name key."""


class _EarlierLayout(Exception):
    def __init__(self, n: int):
        self.n = n


MAX_LEASE_SECONDS = 86400.0  # a lease a request's writer says lasts longer still ends after a day


def new_lease(lease_seconds: float) -> dict:
    """A fresh lease: a token that changes at every claim and renewal, and how long its
    holder asked for (a duration, not a time: comparing two hosts' clocks is what let a
    backend 15 minutes ahead take live leases)."""
    return {"lease_token": uuid.uuid4().hex[:16], "lease_seconds": float(lease_seconds)}


class LeaseClock:
    """When this process first saw each RUNNING request's current lease token, on its own
    monotonic clock. A lease has expired when its token has not changed for the lease's
    duration as this process measured it: only one host's clock is ever read, so clocks
    set apart (or changed while a worker runs) neither steal a live lease nor keep a dead
    one. A process that starts after a worker died waits one lease from its first look."""

    def __init__(self):
        self._seen: dict[str, tuple[tuple, float]] = {}

    @staticmethod
    def _token(req: dict) -> tuple:
        # a store of an earlier version has no token: any change of these is a renewal
        return req.get("lease_token"), req.get("worker"), req.get("attempts"), req.get("lease_expires")

    def observe(self, req: dict) -> float:
        """Record `req`'s lease; returns how long (seconds) this process has seen it unchanged."""
        token, now = self._token(req), time.monotonic()
        seen = self._seen.get(req["id"])
        if seen is None or seen[0] != token:
            self._seen[req["id"]] = (token, now)
            return 0.0
        return now - seen[1]

    def expired(self, req: dict, default_seconds: float) -> bool:
        duration = req.get("lease_seconds")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 < duration <= MAX_LEASE_SECONDS:
            duration = default_seconds
        return self.observe(req) >= duration

    def forget(self, running: set[str]) -> None:
        """Drop what is known of requests no longer RUNNING."""
        for rid in [r for r in self._seen if r not in running]:
            del self._seen[rid]


def _seen(request: dict) -> bool:
    """Dated by the backend: open and registered, or settled (written by the backend)."""
    return request["status"] not in R.OPEN or "received_time" in request


def stamp_arrivals(edit: IndexEdit, requests: list[tuple[str, dict]], ts: float) -> list[tuple[str, dict]]:
    """Open requests the backend has not seen before are received now: registered in
    `edit`, and returned dated `ts` (the server's time, never their writer's)."""
    when = R.iso(ts)
    out = []
    for path, req in requests:
        if path.startswith(R.QUEUE_DIR) and req["status"] in R.OPEN and "received_time" not in req:
            edit.receive(req["id"], when)
            req = {**req, "submitted_time": when, "received_time": when}
        out.append((path, req))
    return out


def transition(req: dict, status: str, ts: float, **fields) -> dict:
    new = {**req, **fields, "status": status}
    if status in (R.FINISHED, R.FAILED):
        new["finished_time"] = R.iso(ts)
    entry = {"time": R.iso(ts), "status": status}
    if fields.get("worker"):
        entry["worker"] = fields["worker"]
    new["history"] = [*req.get("history", []), entry]
    return new
