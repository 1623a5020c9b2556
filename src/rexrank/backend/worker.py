"""The backend worker: claim the oldest request, score it, write one result, settle it.

Exactly-once: a claim is an atomic commit (rexrank.store), the worker renews its lease
while scoring and writes nothing if it lost the lease, and the result's id is the
request's id, so a request re-scored after a crash replaces its result instead of adding
a second one (and a result already written before the crash is reused, not recomputed).
"""
from __future__ import annotations

import errno
import io
import logging
import os
import socket
import tempfile
import threading
import traceback
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, Sequence

from rexrank import __version__
from rexrank.backend import public_door as door
from rexrank.backend.privacy import DEFAULT_MIN_COVERAGE, find_leaks, public_message
from rexrank.backend.publication_slot import SYSTEM_CLOCK, hold_until_slot, slot_seconds
from rexrank.backend.public_door import PRIVATE_INTERNAL_ERROR, CoverageError  # noqa: F401 (their old home)
from rexrank.backend.resolved import ResolvedRequest, resolve_request
from rexrank.errors import ReaderKilled, RexrankError, SubmissionError, TestSetError
from rexrank.store import records as R
from rexrank.store.names import display
from rexrank.store.repo import StoreError, StoreWriteError
from rexrank.store.scratch import ScratchDir, remove_stale
from rexrank.store.store import Store

log = logging.getLogger("rexrank.backend")

DEFAULT_LEASE_SECONDS = 600.0
# OS errors that say the machine, not the request, failed: the request goes back to the queue
MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG, errno.ENFILE, errno.EMFILE}


def min_coverage_from(percent: float | None) -> float:
    """--min-coverage PERCENT, else $REXRANK_MIN_COVERAGE (percent), else 99 %, as a share."""
    if percent is None:
        text = os.environ.get("REXRANK_MIN_COVERAGE", "").strip().rstrip("%")
        try:
            percent = float(text) if text else DEFAULT_MIN_COVERAGE * 100
        except ValueError:
            raise RexrankError(f"REXRANK_MIN_COVERAGE={text!r}: expected a percentage, e.g. 99") from None
    if not 0 < percent <= 100:
        raise RexrankError(f"minimum coverage {percent:g} %: expected a percentage in (0, 100]")
    return percent / 100


class BackendStop(RexrankError):
    """The worker cannot go on (it cannot load a test set); the request it held is PENDING again."""


# a reader this machine kills on the same file again and again is that file's doing after all
# (one that drives the machine out of memory below the reader's limit): its next kill fails it,
# so that no file keeps a request circling the queue
READER_KILLS_GIVEN_BACK = 3
READER_KILLED_NOTE = "this machine stopped the predictions reader"


def gives_back(request: dict, exc: BaseException) -> str | None:
    """Why `request` goes back to the queue after `exc` (the note its history keeps), or None
    when `exc` settles it."""
    if not passing_fault(exc):
        return None
    if not isinstance(exc, ReaderKilled):
        return "the Hub did not answer for a moment"
    kills = sum(1 for h in request.get("history", ()) if h.get("given_back") and h.get("note") == READER_KILLED_NOTE)
    return READER_KILLED_NOTE if kills < READER_KILLS_GIVEN_BACK else None


def passing_fault(exc: BaseException) -> bool:
    """The Hub's passing fault (a 5xx, a 429, a dropped connection that outlasted the
    retries), or this machine's (the predictions reader killed by it, not by the file's
    limits), not the request's: it goes back to the queue instead of failing."""
    from rexrank.backend.jobs import JobsError
    from rexrank.store.repo import StoreUnreachable

    return isinstance(exc, (StoreUnreachable, ReaderKilled)) or (isinstance(exc, JobsError) and exc.transient)


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class LeaseKeeper:
    """Renews a request's lease every lease/3 seconds in a thread; `lost` is set when
    the store says this worker no longer holds it."""

    def __init__(self, store: Store, request_id: str, worker_id: str, lease_seconds: float):
        self.store, self.request_id, self.worker_id, self.lease = store, request_id, worker_id, lease_seconds
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{request_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                if not self.store.renew_lease(self.request_id, self.worker_id, lease_seconds=self.lease):
                    log.warning("lost the lease on %s", self.request_id)
                    self.lost.set()
                    return
            except Exception as exc:  # the store is unreachable for a moment: try again next tick
                log.warning("could not renew the lease on %s: %s", self.request_id, exc)

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Worker:
    def __init__(
        self,
        store: Store,
        *,
        data_dir: str | Path | None = None,
        metrics: Sequence[str] | str | None = None,
        metric_options: dict[str, dict] | None = None,
        worker_id: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_attempts: int = 3,
        publish_per_study: bool = True,
        progress: bool = False,
        min_coverage: float = DEFAULT_MIN_COVERAGE,
        clock=None,
    ):
        from rexrank.backend.metric_set import runnable_metrics, worker_metric_set

        self.store = store
        self.data_dir = Path(data_dir) if data_dir else None
        if self.data_dir is not None and not self.data_dir.is_dir():
            raise TestSetError(f"--data-dir {self.data_dir} is not a folder")
        self.metric_options = metric_options or {}
        # `metrics` given: this worker's own list, every metric required; else the store's set
        # (ReXrank's, recorded in the store when it records none). An unknown metric, or a
        # required one that cannot be set up, stops the worker at start.
        self.metric_set = worker_metric_set(store, metrics)
        self.metrics, not_scored = runnable_metrics(self.metric_set, self.metric_options)
        # published with every result: said without this server's paths
        self.not_scored = {name: public_message(why, known_paths=self._server_paths()) for name, why in not_scored.items()}
        self.worker_id = worker_id or default_worker_id()
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.publish_per_study = publish_per_study
        self.progress = progress
        if not 0 < min_coverage <= 1:
            raise RexrankError(f"minimum coverage must be a share in (0, 1], got {min_coverage!r}")
        self.min_coverage = min_coverage
        # when a private request's outcome is settled (rexrank.backend.publication_slot): read at start
        self.clock, self.slot_seconds = clock or SYSTEM_CLOCK, slot_seconds(store)
        remove_stale()  # temporary files of workers that were killed

    # ---- the loop ----------------------------------------------------------------------
    def run(self, *, once: bool = False, poll: float = 60.0, stop: threading.Event | None = None,
            step=None) -> int:
        """Process requests until the queue is empty (`once`) or forever, polling every
        `poll` seconds; returns how many requests were processed. Raises BackendStop when
        this worker cannot score what it claimed (the request stays PENDING). `step`: what
        processes one request (default `process_next`; the dispatcher's own)."""
        stop = stop or threading.Event()
        step = step or self.process_next
        done = 0
        while not stop.is_set():
            try:
                request = step()
            except BackendStop:
                raise
            except RexrankError as exc:  # the store is unreachable: log, wait, retry
                if once:
                    raise
                log.error("%s", display(exc, keep_newlines=True))
                request = None
            except Exception:  # a bug must not end a long-running worker: log it and go on
                if once:
                    raise
                log.exception("unexpected error in the worker loop; going on")
                request = None
            if request is not None:
                done += 1
                continue
            if once:
                break
            stop.wait(poll)
        return done

    def process_next(self, handle=None, on_failed=None) -> dict | None:
        """Claim and process one request; the settled request, or None if none is waiting
        (or the one claimed went back to the queue: after the Hub's passing fault, or given
        back by `handle` before an error).
        `handle(request, keeper)`: what processes it (default: score it here; the
        dispatcher's own); `on_failed(request_id)`: called once this worker has settled it
        FAILED after an unexpected error (the dispatcher stops its Jobs)."""
        request = self.store.claim(self.worker_id, lease_seconds=self.lease_seconds, max_attempts=self.max_attempts)
        if request is None:
            return None
        rid = request["id"]
        log.info("claimed %s (%s on %s/%s, attempt %d)", rid, display(request["model_name"]),
                 display(request["test_set"]), display(request["track"]), request.get("attempts", 1))
        with LeaseKeeper(self.store, rid, self.worker_id, self.lease_seconds) as keeper:
            if request.get("out_of_attempts"):
                return self._fail_out_of_attempts(request, keeper, on_failed)
            try:
                return (handle or self._process)(request, keeper)
            except BackendStop:
                raise
            except Exception as exc:  # whatever one request does, the worker settles it and goes on
                reason = gives_back(request, exc)
                if reason is not None:  # the Hub's moment or this machine's, not the request's: back to the queue
                    log.warning("%s: %s; the request is PENDING again", rid, display(str(exc)))
                    if not keeper.lost.is_set():
                        self.store.release(rid, self.worker_id, reason=reason)
                    return None  # as if nothing waited: the loop waits its poll (--once ends) before claiming again
                log.exception("%s: unexpected error", rid)
                if not keeper.lost.is_set():
                    message, kind = self.failure_message(request, exc)
                    if self.store.fail(rid, self.worker_id, error=message, kind=kind) and on_failed is not None:
                        on_failed(rid)
                after = self.store.get_request(rid)
                # given back before the error (by `handle`): in the queue, not settled; claiming it
                # again at once would meet the same error for ever
                return None if after is not None and after["status"] == R.PENDING else after

    def _fail_out_of_attempts(self, request: dict, keeper: LeaseKeeper, on_failed) -> dict:
        """A private request whose workers died scoring it `max_attempts` times (claimed so by
        the queue): FAILED with the door's fixed sentence at its publication slot, since when
        it was interrupted depends on the scoring it died in."""
        rid = request["id"]
        log.error("%s: interrupted %d times (workers stopped or timed out); FAILED at its publication slot", rid,
                  request.get("attempts", 0))
        hold_until_slot(rid, seconds=self.slot_seconds, clock=self.clock)
        if not keeper.lost.is_set() and self.store.fail(rid, self.worker_id, error=door.PRIVATE_INTERNAL_ERROR,
                                                        kind=R.INTERNAL) and on_failed is not None:
            on_failed(rid)
        return self.store.get_request(rid)

    def admit(self, request: dict, *, also=None) -> tuple[ResolvedRequest | None, dict | None]:
        """The steps before scoring, one sequence for the worker and the dispatcher: a result
        already written (a previous holder died before FINISHED), the request resolved once,
        the submission rules, `also(resolved)` (the dispatcher's plan: a refusal or None),
        the privacy budget charged. (resolved, None) to go on scoring, or (None, the settled
        request)."""
        rid = request["id"]
        # whatever its attempt count says (a give-back lowers it): scoring it again would publish
        # a second result, on a private set with a second noise draw for one charge
        if self.store.get_result(rid, test_set=request["test_set"], track=request["track"]) is not None:
            log.info("%s already has its result; marking it FINISHED", rid)
            self.store.finish(rid, self.worker_id, result_id=rid)
            return None, self.store.get_request(rid)
        resolved, refusal = self.resolve(request)
        if refusal is None:  # the submission rules, checked here whatever the submitting client did
            refusal = self.store.policy_problem(request)
        if refusal is None and also is not None:
            refusal = also(resolved)
        settled = self.refuse_or_charge(request, refusal)
        return (None, settled) if settled is not None else (resolved, None)

    def _process(self, request: dict, keeper: LeaseKeeper) -> dict:
        rid = request["id"]
        resolved, settled = self.admit(request)
        if settled is not None:
            return settled
        try:
            record, per_study = self.score(resolved)
        except TestSetError as exc:
            self.cannot_load(request, exc)
        except Exception as exc:
            if passing_fault(exc):  # the Hub's moment (e.g. reading the predictions): process_next gives it back
                raise
            if isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS:  # e.g. no space for scratch files
                self._give_back(rid, f"{exc.strerror or exc} (scratch space: {tempfile.gettempdir()})")
            message, kind = self.failure_message(request, exc, resolved=resolved)
            log.error("%s FAILED: %s", rid, display(message))
            if not keeper.lost.is_set():
                self.store.fail(rid, self.worker_id, error=message, kind=kind)
            return self.store.get_request(rid)
        return self.publish(request, record, per_study, keeper)

    def publish(self, request: dict, record: dict, per_study: bytes | None, keeper: LeaseKeeper) -> dict:
        """Publish once: a commit on the version in which this worker still holds the
        request, then the result, then FINISHED (the single worker's and the dispatcher's
        merge step's last step)."""
        rid = request["id"]
        published = False
        try:
            if keeper.lost.is_set() or not self.store.begin_publish(rid, self.worker_id):
                # cancelled, or taken by another worker, since the last renewal: the publishing
                # step is a commit on the version in which this worker holds it, so it failed
                log.warning("%s: no longer held by this worker (cancelled or taken over); nothing published", rid)
                return self.store.get_request(rid)
            self.store.add_result(record, per_study=per_study)
            published = True
            notes = door.notes(self.not_scored)
            finished = self.store.finish(rid, self.worker_id, result_id=record["id"], notes=notes)
        except Exception as exc:
            if not published:
                if isinstance(exc, StoreWriteError):  # a full disk, a read-only store: nothing of that commit was written
                    self._give_back(rid, str(exc))
                raise
            # the result is out: never given back or failed (a second claim would score and publish it
            # again); the request stays RUNNING until its lease ends, and the next claim marks it FINISHED
            if isinstance(exc, StoreWriteError):
                raise BackendStop(f"cannot write: {exc}; the result of {rid} is published and the request stays "
                                  "RUNNING until its lease ends — free space and start the worker again") from None
            log.warning("%s: its result is published but FINISHED could not be written (%s); the next claim after "
                        "its lease marks it FINISHED", rid, display(str(exc)))
            return request
        if not finished:
            log.warning("%s: lease lost before FINISHED; the holder settles it (same result id)", rid)
        else:
            log.info("%s FINISHED", rid)
        return self.store.get_request(rid)

    def cannot_load(self, request: dict, exc: TestSetError) -> NoReturn:
        """This machine cannot load the request's test set: the worker's problem, not the
        submitter's. The request is given back and the worker (or dispatcher) stops."""
        rid = request["id"]
        self.store.release(rid, self.worker_id, reason="the backend could not load the test set")
        raise BackendStop(f"cannot load test set {request['test_set']!r} ({exc}); request {rid} is PENDING "
                          "again — fix the worker's data (--data-dir) and start it again, or withdraw the request "
                          f"with `rexrank cancel {rid}`") from None

    def _give_back(self, rid: str, why: str) -> NoReturn:
        """The machine, not the request, failed (no space, a read-only store): the request
        is PENDING again at once, attempt not counted, and the worker stops with one line."""
        try:
            self.store.release(rid, self.worker_id, reason="the backend could not write its output")
            state = "is PENDING again"
        except StoreError as exc:  # the same disk refused this small write too
            state = f"stays RUNNING until its lease ends (it could not be put back: {exc})"
        raise BackendStop(f"cannot write: {why}; request {rid} {state} — free space or fix the store's "
                          "permissions and start the worker again")

    def resolve(self, request: dict) -> tuple[ResolvedRequest | None, str | None]:
        """The request resolved once (test set, track, data location), or why it is refused."""
        try:
            return resolve_request(request, self.data_dir), None
        except RexrankError as exc:
            return None, str(exc)

    def refuse_or_charge(self, request: dict, refusal: str | None) -> dict | None:
        """Settle a request the rules refuse (`refusal`) or its submitter's privacy budget
        cannot pay for, and return it; else charge the budget and return None (go on scoring)."""
        rid = request["id"]
        if refusal is None:  # after every other rule: a copy of predictions another account had first waits for review
            held = self.store.hold_if_copied(request, self.worker_id)
            if held is not None:
                log.warning("%s held for the maintainers' review (rexrank review)", rid)
                return held
        if refusal is not None:
            log.warning("%s refused: %s", rid, display(refusal))
            error = door.policy_refusal(refusal)
        else:
            error = self.charge_privacy(request)
            if error is None:
                return None
            log.warning("%s %s", rid, error)
        self.store.fail(rid, self.worker_id, error=error, kind=R.REFUSED)
        return self.store.get_request(rid)

    def charge_privacy(self, request: dict) -> str | None:
        """A private request's ε on its submitter's ledger (rexrank.store.ledger), charged
        before scoring whatever then happens to it; the refusal message if the budget
        cannot pay for it, else None."""
        from rexrank.backend import privacy
        from rexrank.store import ledger

        if not door.is_private(request["test_set"]):
            return None
        limit = ledger.budget(self.store, request["test_set"], default_total=privacy.LEDGER_TOTAL,
                              days=privacy.LEDGER_DAYS)
        cost, numbers = door.request_cost(self.metrics)
        refusal = ledger.charge(self.store, request, cost=cost, numbers=numbers, decisions=1, limit=limit)
        return None if refusal is None else door.budget_refusal(request, refusal)

    # ---- scoring -----------------------------------------------------------------------
    def score(self, resolved: ResolvedRequest) -> tuple[dict, bytes | None]:
        """Score the whole request: (result record, per-study parquet or None). On a private
        test set it returns, or raises, at the request's publication slot."""
        try:
            run = self.score_studies(resolved)
        except TestSetError:  # this machine cannot read the set: given back at once, nothing private in it
            raise
        except Exception:
            self.hold_for_slot(resolved)
            raise
        return self.published_parts(resolved, run.results, run.per_study)

    def score_studies(self, resolved: ResolvedRequest, studies: tuple[int, int] | None = None):
        """A ScoreRun of the request's studies [start, stop) (`studies`; None: all), in
        test-set order: the single worker's run, or one shard of a dispatched request."""
        from rexrank.scoring import score_resolved

        with self._predictions_file(resolved) as preds_file:
            try:
                if resolved.private:  # against all of the set's ids: track membership stays private
                    door.check_private_ids(preds_file, resolved.studies, title=resolved.spec.title)
                return score_resolved(
                    resolved, preds_file, metrics=self.metrics, metric_options=self.metric_options,
                    progress=self.progress, select=studies,
                    nothing_scored_is_error=not resolved.private,  # on a private set, the noisy coverage rule decides
                )
            except SubmissionError as exc:
                # name the submitter's predictions, not this worker's temporary file
                raise exc.renamed(str(preds_file), "predictions") from None

    def whole_header(self, resolved: ResolvedRequest) -> dict:
        """The whole request's results header, as its single run writes it (the dispatcher
        merges its shards under it), with the predictions' ids in test-set order."""
        from rexrank.scoring import load_submission, run_header

        with self._predictions_file(resolved) as preds_file:
            predictions = load_submission(resolved, preds_file)
        return {**run_header(resolved, predictions, self.metrics), "predictions_ids": list(predictions.ids)}

    @contextmanager
    def _predictions_file(self, resolved: ResolvedRequest):
        """The request's predictions in a scratch file (removed after)."""
        with ScratchDir("backend") as tmp:
            path = tmp / "predictions.parquet"
            path.write_bytes(self.store.read_predictions(resolved.request))
            yield path

    def published_parts(self, resolved: ResolvedRequest, results: dict, per_study_table) -> tuple[dict, bytes | None]:
        """What publishing writes, from a whole request's results and per-study table (a
        single run's or the merged shards'): the coverage rule, the record, the per-study
        parquet of a public set; the leak check of a private one, which returns (or raises)
        at the request's publication slot, so that what follows it is dated by the slot."""
        try:
            parts = self._published_parts(resolved, results, per_study_table)
        except Exception:
            self.hold_for_slot(resolved)
            raise
        self.hold_for_slot(resolved)
        return parts

    def hold_for_slot(self, resolved: ResolvedRequest) -> None:
        """Wait for a private request's publication slot (rexrank.backend.publication_slot):
        how long it took to score is private."""
        if resolved.private:
            hold_until_slot(resolved.id, seconds=self.slot_seconds, clock=self.clock)

    def _published_parts(self, resolved: ResolvedRequest, results: dict, per_study_table) -> tuple[dict, bytes | None]:
        private = resolved.private
        self.check_coverage(results, private=private)
        record = self.result_record(resolved.request, results, private=private)
        per_study = None
        if not private and self.publish_per_study:
            buf = io.BytesIO()
            per_study_table.to_parquet(buf, index=False)
            per_study = buf.getvalue()
        if private:
            leaks = find_leaks([record], resolved.references)
            if leaks:  # a bug upstream put reference text into a summary: refuse to publish
                raise RuntimeError(f"result record would quote {len(leaks)} private references")
        return record, per_study

    def check_coverage(self, results: dict, *, private: bool, rng=None) -> None:
        """Raise CoverageError when any metric scored less than `min_coverage` of the
        studies: a mean over the studies an LLM happened to answer is not the model's score
        (on a private test set a noisy threshold decides; rexrank.backend.public_door)."""
        problem = door.coverage_failure(results, self.metrics, min_coverage=self.min_coverage, private=private, rng=rng)
        if problem is not None:
            raise problem

    def result_record(self, request: dict, results: dict, *, private: bool, rng=None) -> dict:
        return door.result_record(request, results, private=private, worker_id=self.worker_id,
                                  not_scored=self.not_scored, version=__version__, min_coverage=self.min_coverage,
                                  rng=rng)

    def failure_message(self, request: dict, exc: BaseException, *,
                        resolved: ResolvedRequest | None = None) -> tuple[str, str]:
        """(what the submitter sees, failure kind), from rexrank.backend.public_door."""
        log.debug("failure of %s:\n%s", request["id"], "".join(traceback.format_exception(exc)))
        return door.failure(request, exc, known_paths=self._server_paths(),
                            private=None if resolved is None else resolved.private)

    def _server_paths(self) -> list[str]:
        paths = [str(self.data_dir) if self.data_dir else "", tempfile.gettempdir(), str(Path.home()), os.getcwd()]
        return [p for p in paths if p and p != "/"]

