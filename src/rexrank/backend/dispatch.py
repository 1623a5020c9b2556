"""The backend as a dispatcher: claim -> plan shards -> score shard (one Job each) ->
merge -> publish.

The dispatcher claims a request with the store's atomic claim (two dispatchers never hold
one request, so never score a shard twice), cuts it into shards (rexrank.backend.shards),
starts one Job per shard (rexrank.backend.jobs: Hugging Face Jobs or local processes; the
Jobs service schedules them, the dispatcher only starts, polls, retries and cancels),
merges the shards' per-study files once all are in (rexrank.backend.merge) and publishes
once with the worker's conditional commit. Claim, resolve, the submission rules, the
privacy charge and publishing are the worker's own steps (Worker.admit, Worker.publish).

A Job is self-contained: its spec (`Dispatcher.job_spec`) carries everything its shard
needs: where the data is (the private data repo for Hub Jobs, the data folder for local
ones), the LLM endpoint and settings its judges use (REXRANK_LLM_*, keys as secrets), the
exact rexrank build, and the store token as the secret HF_TOKEN; the metric options are in
the request's plan. A Job inherits nothing from the dispatcher's environment.

Each Job carries the labels request, shard and attempt: a dispatcher that restarts (or
takes over an expired lease) lists them and adopts the Jobs still running, starting no
duplicate. A shard Job that fails, times out or disappears is started again, up to
`shard_attempts`; then the request FAILs with the shard's cause and nothing is published.
The Hub's passing faults never fail a request: the Jobs client retries them, and a poll
that still meets one (Jobs API or store) is tried again later while its Jobs run on. A
dispatcher that no longer holds a request (its lease passed to another dispatcher, or the
request settled) leaves its Jobs and shard outputs alone; only a cancelled request
(`rexrank cancel`) has its Jobs cancelled, and a request this dispatcher fails stops its
own other Jobs. The plan, the Jobs (flavour, state, seconds, estimated cost) and the
GPU-seconds per metric are kept in the request record, which only the organisers read (the
requests repo). On a private test set the plan is sized from the test set's total (public)
size, never the track's: the number of Jobs, their labels and the GPU-hour ceiling's
refusal say nothing about the track.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, replace

from rexrank import __version__
from rexrank.backend import public_door as door
from rexrank.backend.dispatch_settings import CONFIG_KEY, DispatchSettings, dispatch_settings
from rexrank.backend.job_environment import (LLM_JOB_ENVIRONMENT, LLM_JOB_SECRETS, LOCAL_MACHINE_ENVIRONMENT,
                                             judge_backend, job_llm_problem)
from rexrank.backend.jobs import Jobs, JobsError, JobState
from rexrank.backend.shard_job import PRIVATE_DATA_REPO, VERSION_VARIABLE
from rexrank.backend.shards import PlanError, PriceList, ShardPlan, check_flavor, plan_shards
from rexrank.backend.worker import BackendStop, LeaseKeeper, Worker, passing_fault
from rexrank.errors import RexrankError, TestSetError, first_line
from rexrank.store import records as R
from rexrank.store.names import display
from rexrank.store.repo import StoreError

log = logging.getLogger("rexrank.backend")

LABEL_REQUEST, LABEL_SHARD, LABEL_ATTEMPT = "rexrank-request", "rexrank-shard", "rexrank-attempt"
MAX_FAULT_WAIT = 300.0  # seconds between polls at most while the Hub keeps failing
# what makes a recorded plan's shard outputs this dispatcher's own (a restart reuses it then)
PLAN_IDENTITY = ("ranges", "metrics", "metric_options", "rexrank_version")


def dispatcher_for(worker: Worker, *, dry_run: bool = False, **overrides) -> "Dispatcher | None":
    """The dispatcher the flags (`overrides`, None = not given) or the store's config ask
    for, else None (the worker scores requests itself, as without --dispatch). `dry_run`:
    one that only plans (it starts no Job; it reads the Hub's prices when it can)."""
    from rexrank.store.config import read_config

    if overrides.get("mode") is None and not (read_config(worker.store).get(CONFIG_KEY) or {}).get("mode"):
        return None
    settings = dispatch_settings(worker.store, **overrides)
    if not dry_run:
        jobs = open_jobs(worker.store, settings)
        return Dispatcher(worker, jobs, settings, prices=job_prices(jobs))
    try:  # a plan only: the Hub's prices when its Jobs can be reached, else the table
        jobs = open_jobs(worker.store, settings) if settings.mode == "hf-jobs" else None
    except StoreError:
        jobs = None
    return Dispatcher(worker, None, settings, prices=job_prices(jobs))


def cancel_request_jobs(store, request_id: str) -> int:
    """`rexrank cancel`: cancel the running Jobs of a request the store's dispatcher started
    (found by their labels, whichever dispatcher holds it, if any); how many were cancelled."""
    from rexrank.store.config import read_config

    if not (read_config(store).get(CONFIG_KEY) or {}).get("mode"):
        return 0
    jobs = open_jobs(store, dispatch_settings(store))
    cancelled = 0
    for job in jobs.list({LABEL_REQUEST: request_id}):
        if job.running:
            jobs.cancel(job.job_id)
            cancelled += 1
    return cancelled


def job_prices(jobs) -> PriceList:
    """The Hub's prices (`list_jobs_hardware()`) when its Jobs answer, else the dated table."""
    hardware = getattr(jobs, "hardware", None)
    if hardware is None:
        return PriceList.table()
    try:
        return PriceList.from_hardware(hardware())
    except JobsError as exc:
        table = PriceList.table()
        log.warning("could not read the Hub's Jobs prices (%s); estimating with %s", exc, table.source)
        return table


def open_jobs(store, settings: DispatchSettings) -> Jobs:
    from rexrank.backend.jobs import HubJobs, LocalJobs

    if settings.mode == "local":
        import tempfile
        from pathlib import Path

        return LocalJobs(settings.jobs_dir or Path(tempfile.gettempdir()) / "rexrank-jobs")
    hub = getattr(store.requests, "api", None)
    namespace = settings.namespace or (store.name.removeprefix("hf://") if store.name.startswith("hf://") else None)
    if namespace is None:
        raise StoreError("--dispatch hf-jobs needs a namespace for the Jobs: a Hub store (hf://ORG) or "
                         f"namespace in {R.CONFIG_FILE}'s {CONFIG_KEY} settings")
    return HubJobs(namespace=namespace, image=settings.image, token=_store_token(store),
                   endpoint=getattr(hub, "endpoint", None) or os.environ.get("HF_ENDPOINT"))


def _store_token(store) -> str | None:
    return getattr(store.requests, "token", None)


@dataclass
class _Shard:
    index: int
    attempt: int = 0  # the highest attempt started (numbers Jobs uniquely across requeues)
    failures: int = 0  # failed attempts since the request was last queued (the limit counts these)
    job_id: str | None = None  # the Job of `attempt` while it runs
    done: bool = False
    cause: str = ""


HELD, GONE, CANCELLED = "held", "gone", "cancelled"
_ALL_DONE = object()  # every shard of a request has its output


class Dispatcher:
    """Claims requests and runs them as shard Jobs; `worker` provides the store, the metric
    set, the steps before scoring and publishing (Worker.admit, Worker.publish). `prices`:
    the Hub's, or the dated table (default); the store's flavor_prices go over them."""

    def __init__(self, worker: Worker, jobs: Jobs | None, settings: DispatchSettings, *,
                 prices: PriceList | None = None):
        self.worker, self.jobs, self.settings = worker, jobs, settings
        self.store = worker.store
        self.prices = (prices or PriceList.table()).configured(settings.flavor_prices)
        self._records: dict[str, list[dict]] = {}
        for flavor in {settings.flavor, settings.llm_flavor} - {None}:
            try:
                check_flavor(flavor)
            except PlanError as exc:
                raise RexrankError(str(exc)) from None
        problem = job_llm_problem(worker, settings.mode)
        if problem is not None:
            raise RexrankError(f"dispatch: {problem}")

    # ---- the loop ----------------------------------------------------------------------
    def run(self, *, once: bool = False, stop: threading.Event | None = None) -> int:
        """The worker's loop, each request dispatched; returns how many were settled."""
        stop = stop or threading.Event()
        return self.worker.run(once=once, poll=self.settings.poll, stop=stop, step=lambda: self.process_next(stop))

    def process_next(self, stop: threading.Event | None = None) -> dict | None:
        stop = stop or threading.Event()
        return self.worker.process_next(handle=lambda request, keeper: self._process(request, keeper, stop),
                                        on_failed=self._stop_jobs)

    # ---- one request -------------------------------------------------------------------
    def local_judges(self) -> int:
        """LLM judges each Job generates with itself (no endpoint): their checkpoints are in its start-up."""
        from rexrank.metrics.llm_common import LLM_METRICS

        return sum(1 for m in self.worker.metrics
                   if m in LLM_METRICS and judge_backend(m, self.worker.metric_options.get(m, {})) == "transformers")

    def plan(self, resolved) -> ShardPlan:
        """The request's shards and estimates; on a private test set K and the estimates come
        from the set's total size (public), the ranges split the track's studies."""
        w, s = self.worker, self.settings
        studies = resolved.studies
        public = len(studies.ids) + len(studies.outside_ids) if resolved.private else None
        return plan_shards(len(studies.ids), w.metrics, w.metric_options, flavor=s.flavor_for(w.metrics),
                           max_jobs=s.max_jobs, target_shard_hours=s.target_shard_hours, speed=s.flavor_speed,
                           prices=self.prices, estimate_studies=public, startup=s.job_startup,
                           local_judges=self.local_judges(), job_timeout=s.job_timeout, target_wall=s.target_wall)

    def _plan_or_refusal(self, resolved, plans: dict) -> str | None:
        """The GPU-hour ceiling's refusal (the board's per-request policy), or None; a
        PlanError (the settings cannot plan it) is raised."""
        plan = plans["plan"] = self.plan(resolved)
        ceiling = self.settings.gpu_hours_ceiling
        if ceiling is not None and plan.gpu_hours > ceiling:
            return (f"the estimated {plan.gpu_hours:.2f} GPU-hours exceed this board's per-request ceiling of "
                    f"{ceiling:g} (gpu_hours_ceiling); contact the maintainers")
        return None

    def _process(self, request: dict, keeper: LeaseKeeper, stop: threading.Event) -> dict | None:
        w, rid = self.worker, request["id"]
        if self.settings.mode == "hf-jobs" and door.is_private(request["test_set"]) and not self._private_data_repo():
            w.store.release(rid, w.worker_id, reason="the dispatcher has no private data repo for its Jobs")
            raise BackendStop(f"request {rid} is on the private test set {request['test_set']!r}: Hub Jobs read it "
                              f"from a private data repo; set private_data_repo in {R.CONFIG_FILE}'s {CONFIG_KEY} "
                              f"settings (or ${PRIVATE_DATA_REPO}) and start the dispatcher again; the request is "
                              "PENDING again")
        plans: dict = {}
        try:  # the plan reads the test set's size
            resolved, settled = w.admit(request, also=lambda resolved: self._plan_or_refusal(resolved, plans))
        except TestSetError as exc:
            w.cannot_load(request, exc)
        except PlanError as exc:  # the organisers' settings (each names its own), never the submitter's doing
            w.store.release(rid, w.worker_id, reason="the dispatcher's settings cannot plan it")
            raise BackendStop(f"cannot plan request {rid} with this dispatcher's settings: {exc}; the request is "
                              "PENDING again — change the setting and start the dispatcher again") from None
        if settled is not None:
            return settled
        plan = plans["plan"]
        previous = (request.get("dispatch") or {}).get("plan")
        plan_json = {**plan.to_json(), "metric_options": w.metric_options, "rexrank_version": __version__}
        # a restart: the shards already scored stay valid, if they are what this dispatcher would score
        # (after an upgrade or an options change they are not: their Jobs would refuse or mismatch)
        reused = bool(previous) and all(previous.get(k) == plan_json[k] for k in PLAN_IDENTITY)
        if reused:
            plan_json = previous
        shards = [_Shard(i) for i in range(len(plan_json["ranges"]))]
        self._records[rid] = list((request.get("dispatch") or {}).get("jobs") or [])
        log.info("%s: %d shard(s) on %s, about %.2f GPU-hours ($%.2f)", rid, len(shards), plan.flavor,
                 plan.gpu_hours, plan.cost_usd)
        settled = self._poll(rid, shards, plan_json, resolved, keeper, stop, replanned=bool(previous) and not reused)
        if settled is not _ALL_DONE:
            return settled
        return self._merge_and_publish(request, resolved, shards, plan_json, keeper, stop)

    def _poll(self, rid: str, shards: list[_Shard], plan_json: dict, resolved, keeper: LeaseKeeper,
              stop: threading.Event, *, replanned: bool = False):
        """Adopt, start and poll the request's Jobs until every shard is done (_ALL_DONE), or
        the request is settled (failed, cancelled) or let go (the settled request, or None
        when this dispatcher stops). `replanned`: the recorded plan was replaced (_adopt)."""
        adopted, faults = False, 0
        while True:
            if stop.is_set():  # the dispatcher stops; its Jobs go on and the next one adopts them
                return None
            holder = self._holder(rid, keeper)
            if holder == CANCELLED:
                self._stop_jobs(rid)
                log.warning("%s: cancelled; its Jobs are cancelled and nothing is published", rid)
                return self.store.get_request(rid)
            if holder == GONE:
                return self._let_go(rid)
            try:
                if not adopted:  # the plan is in the record before any Job starts: its shards read it
                    self._adopt(rid, shards, replanned=replanned)
                    self._save(rid, plan_json)
                    adopted = True
                failure = self._step(rid, shards, plan_json) or self._over_ceiling(rid)
                if failure is None:
                    self._save(rid, plan_json)
                faults = 0
            except (StoreError, JobsError) as exc:
                if isinstance(exc, JobsError) and not exc.transient:
                    failure = (f"internal error while scoring: the Jobs service refused a call: {exc}", R.INTERNAL)
                else:  # the Hub's moment: the Jobs run on, the lease decides who polls them
                    faults += 1
                    wait = min(MAX_FAULT_WAIT, self.settings.poll * 2 ** faults)
                    log.warning("%s: %s; polling again in %.0f s", rid, first_line(exc), wait)
                    stop.wait(wait)
                    continue
            except Exception as exc:  # e.g. a damaged shard output: settled by _fail (a private one at its slot)
                log.exception("%s: unexpected error while polling its Jobs", rid)
                failure = (f"internal error while scoring ({type(exc).__name__}: {exc})", R.INTERNAL)
            if failure is not None:
                return self._fail(rid, plan_json, failure, resolved, keeper)
            if all(s.done for s in shards):
                return _ALL_DONE
            stop.wait(self.settings.poll)

    def _private_data_repo(self) -> str | None:
        return self.settings.private_data_repo or os.environ.get(PRIVATE_DATA_REPO) or None

    def _holder(self, rid: str, keeper: LeaseKeeper) -> str:
        """HELD while this dispatcher holds the request; CANCELLED once `rexrank cancel`
        withdrew it; GONE when its lease passed to another or it settled otherwise."""
        try:
            current = self.store.get_request(rid)
        except StoreError:  # the store is unreachable for a moment: the lease keeper decides
            return GONE if keeper.lost.is_set() else HELD
        if current["status"] == R.FAILED and current.get("failure_kind") == R.CANCELLED:
            return CANCELLED
        if keeper.lost.is_set() or current["status"] != R.RUNNING or current.get("worker") != self.worker.worker_id:
            return GONE
        return HELD

    def _let_go(self, rid: str) -> dict | None:
        """No longer this dispatcher's: its Jobs and shard outputs are left to the holder,
        unless it was held for review (no holder: they stop, as at a cancel)."""
        try:
            current = self.store.get_request(rid)
        except StoreError:
            current = None
        if current is not None and current["status"] == R.HELD:
            self._stop_jobs(rid)
            log.warning("%s: held for the maintainers' review (rexrank review): its Jobs are cancelled and its shard "
                        "outputs removed; released, it is scored again", rid)
            return current
        log.warning("%s: no longer held by this dispatcher (its lease passed to another, or it settled): its Jobs and "
                    "shard outputs are left to the holder", rid)
        return current

    def _room_for_a_job(self, running: int) -> bool:
        """The board's cap on paid Jobs at once (max_jobs)."""
        return running < self.settings.max_jobs

    def _over_ceiling(self, rid: str) -> tuple[str, str] | None:
        ceiling = self.settings.gpu_hours_ceiling
        used = sum(j.get("seconds", 0.0) for j in self._records[rid]) / 3600
        if ceiling is not None and used > ceiling:
            return (f"internal error while scoring: the Jobs used {used:.2f} GPU-hours, over this board's "
                    f"per-request ceiling of {ceiling:g}", R.INTERNAL)
        return None

    def _fail(self, rid: str, plan_json: dict, failure: tuple[str, str], resolved, keeper: LeaseKeeper) -> dict:
        """Stop the other Jobs of the request this dispatcher holds and record their states,
        FAIL it, and remove its shard outputs; if it is no longer held, touch nothing."""
        message, kind = failure
        log.error("%s FAILED: %s", rid, display(message))
        if resolved.private and kind == R.INTERNAL:  # a shard's cause (a Job's log) can quote private data
            message = door.PRIVATE_INTERNAL_ERROR
        if not keeper.lost.is_set():
            # before the record is saved, so that it keeps them CANCELED (once FAILED it is not
            # this dispatcher's to write); a private request's Jobs (seen by the organisers only)
            # stop now rather than run on while its outcome waits for the publication slot
            self._cancel_all(rid)
        try:
            self._save(rid, plan_json)
        except StoreError as exc:
            log.warning("%s: could not record its Jobs: %s", rid, exc)
        if resolved.private and not keeper.lost.is_set():  # when a private request failed is private too
            self.worker.hold_for_slot(resolved)
        if keeper.lost.is_set() or not self.store.fail(rid, self.worker.worker_id, error=message, kind=kind):
            return self._let_go(rid)
        self._drop_scratch(rid)
        return self.store.get_request(rid)

    def _stop_jobs(self, rid: str) -> None:
        """A request cancelled, held for review, or failed by the worker's loop (not `_fail`): its
        running Jobs are cancelled and its shard outputs removed (a private set's per-study
        values stay nowhere)."""
        self._cancel_all(rid)
        self._drop_scratch(rid)

    def _adopt(self, rid: str, shards: list[_Shard], *, replanned: bool = False) -> None:
        """Jobs started for this request before (a restarted dispatcher, a previous holder):
        the running ones are adopted, a finished one with its output counts as done. After
        `replanned` (the recorded plan was another build's, options or ranges) they are of the
        replaced plan: only their attempt numbers count, and the running ones are cancelled."""
        from rexrank.backend.shard_job import read_shard

        found = self.jobs.list({LABEL_REQUEST: rid})
        recorded = {entry["job_id"] for entry in self._records.get(rid, [])}  # this round's (requeue clears it)
        for job in sorted(found, key=lambda j: int(j.labels.get(LABEL_ATTEMPT, 0))):
            if replanned and job.running:  # scoring for the replaced plan: its output would not merge
                self.jobs.cancel(job.job_id)
                log.info("%s: cancelled Job %s of the replaced plan", rid, job.job_id)
                self._note(rid, replace(job, stage="CANCELED"), int(job.labels.get(LABEL_SHARD, -1)),
                           int(job.labels.get(LABEL_ATTEMPT, 0)))
            try:
                shard = shards[int(job.labels[LABEL_SHARD])]
                attempt = int(job.labels[LABEL_ATTEMPT])
            except (KeyError, ValueError, IndexError):
                continue
            shard.attempt = max(shard.attempt, attempt)
            if replanned:
                continue
            out = read_shard(self.store, rid, shard.index, attempt) if job.stage == "COMPLETED" else None
            if job.running:
                shard.job_id = job.job_id
                log.info("%s: adopted the running Job %s (shard %d, attempt %d)", rid, job.job_id, shard.index, attempt)
            elif out is not None and out[1] is not None:
                shard.done, shard.job_id = True, None
            elif job.job_id in recorded:
                shard.failures += 1
            else:
                continue  # a failed Job of an earlier round (before a requeue): only its number counts
            self._note(rid, job, shard.index, attempt)
        for shard in shards:  # a running Job of an earlier attempt than a finished one: the finished one wins
            if shard.done:
                shard.job_id = None

    def _step(self, rid: str, shards: list[_Shard], plan_json: dict) -> tuple[str, str] | None:
        """Poll every shard's Job once, start what may start; (message, kind) to fail the request."""
        from rexrank.backend.shard_job import read_shard

        for shard in shards:
            if shard.done or shard.job_id is None:
                continue
            job = self.jobs.inspect(shard.job_id)
            if job is not None:
                self._note(rid, job, shard.index, shard.attempt)
            if job is not None and job.running:
                continue
            out = read_shard(self.store, rid, shard.index, shard.attempt)
            if job is not None and job.stage == "COMPLETED" and out is not None and out[1] is not None:
                shard.done, shard.job_id = True, None
                continue
            if out is not None and "failed" in out[0]:
                failed = out[0]["failed"]
                if failed.get("final"):
                    return failed["message"], failed["kind"]
                shard.cause = failed["message"]
            elif job is None:
                shard.cause = f"its Job {shard.job_id} disappeared"
                for entry in self._records.get(rid, []):
                    if entry["job_id"] == shard.job_id:
                        entry["state"] = "VANISHED"
            else:
                shard.cause = f"its Job ended {job.stage}" + (f" ({job.message})" if job.message else "")
            log.warning("%s: shard %d attempt %d failed: %s", rid, shard.index, shard.attempt, shard.cause)
            shard.job_id, shard.failures = None, shard.failures + 1
        running = sum(1 for s in shards if s.job_id is not None)
        for shard in shards:
            if shard.done or shard.job_id is not None:
                continue
            if shard.failures >= self.settings.shard_attempts:
                return (f"internal error while scoring: shard {shard.index + 1} of {len(shards)} failed "
                        f"{shard.failures} time(s); last cause: {shard.cause}"), R.INTERNAL
            if not self._room_for_a_job(running):
                continue
            if not self.store.renew_lease(rid, self.worker.worker_id, lease_seconds=self.worker.lease_seconds):
                return None  # no longer ours: the next loop sees it and lets go
            shard.attempt += 1
            shard.job_id = self._start(rid, shard, plan_json)
            running += 1
        return None

    def job_spec(self, rid: str, shard: int, attempt: int) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(command, env, secrets) of a shard's Job: everything it needs, nothing inherited."""
        s, w = self.settings, self.worker
        args = ["backend-shard", "--store", self.store.name, "--request", rid, "--shard", str(shard),
                "--attempt", str(attempt)]
        env = {"HF_HUB_DISABLE_TELEMETRY": "1", VERSION_VARIABLE: __version__}
        env.update({k: os.environ[k] for k in LLM_JOB_ENVIRONMENT if os.environ.get(k)})
        secrets = {k: os.environ[k] for k in LLM_JOB_SECRETS if os.environ.get(k)}
        token = _store_token(self.store)
        if token:
            secrets["HF_TOKEN"] = token
        endpoint = getattr(getattr(self.store.requests, "api", None), "endpoint", None)
        if endpoint and self.store.name.startswith("hf://"):
            env["HF_ENDPOINT"] = endpoint
        if s.mode == "local":  # this machine: its data folder, model caches and GPUs
            env.update({k: os.environ[k] for k in LOCAL_MACHINE_ENVIRONMENT if os.environ.get(k)})
            if w.data_dir is not None:
                env["REXRANK_DATA_DIR"] = str(w.data_dir.resolve())
        else:  # a Hub machine: it installs this exact build and reads private data from the Hub
            env["REXRANK_INSTALL"] = s.install
            if self._private_data_repo():
                env[PRIVATE_DATA_REPO] = self._private_data_repo()
        env.update(s.job_env)
        if s.job_command or s.mode == "local":
            command = [*(s.job_command or default_job_command()), *args]
        else:  # the Job installs the dispatcher's own rexrank version, then runs the shard
            command = ["bash", "-c", 'pip install --quiet "$REXRANK_INSTALL" && exec rexrank "$@"', "rexrank-job", *args]
        return command, env, secrets

    def _start(self, rid: str, shard: _Shard, plan_json: dict) -> str:
        command, env, secrets = self.job_spec(rid, shard.index, shard.attempt)
        labels = {LABEL_REQUEST: rid, LABEL_SHARD: str(shard.index), LABEL_ATTEMPT: str(shard.attempt)}
        job_id = self.jobs.run(command=command, env=env, secrets=secrets, flavor=plan_json["flavor"],
                               timeout=self.settings.job_timeout, labels=labels)
        log.info("%s: started Job %s (shard %d, attempt %d, %s)", rid, job_id, shard.index, shard.attempt,
                 plan_json["flavor"])
        self._note(rid, JobState(job_id, "SCHEDULING", labels=labels, flavor=plan_json["flavor"]), shard.index,
                   shard.attempt)
        return job_id

    def _note(self, rid: str, job: JobState, shard: int, attempt: int) -> None:
        """Keep the Job's state, seconds and estimated cost for the request record."""
        price = self.prices.per_hour.get(job.flavor, 0.0)
        seconds = round(job.seconds(), 1)
        entry = {"job_id": job.job_id, "shard": shard, "attempt": attempt, "flavor": job.flavor, "state": job.stage,
                 "seconds": seconds, "estimated_cost_usd": round(seconds / 3600 * price, 4)}
        records = self._records.setdefault(rid, [])
        for i, old in enumerate(records):
            if old["job_id"] == job.job_id:
                records[i] = entry
                return
        records.append(entry)

    def _save(self, rid: str, plan_json: dict, gpu_seconds: dict | None = None) -> None:
        dispatch = {"plan": plan_json, "jobs": self._records.get(rid, [])}
        if gpu_seconds is not None:
            dispatch["gpu_seconds"] = gpu_seconds
        self.store.record_dispatch(rid, self.worker.worker_id, dispatch)

    def _cancel_all(self, rid: str) -> None:
        try:
            found = self.jobs.list({LABEL_REQUEST: rid})
        except JobsError as exc:
            log.error("%s: could not list its Jobs to cancel them: %s", rid, exc)
            return
        for job in found:
            if job.running:
                try:
                    self.jobs.cancel(job.job_id)
                    log.info("%s: cancelled Job %s", rid, job.job_id)
                    job = replace(job, stage="CANCELED")
                except JobsError as exc:  # recorded as the service last saw it: it may still run, and bill
                    log.error("%s: %s", rid, exc)
            shard, attempt = int(job.labels.get(LABEL_SHARD, -1)), int(job.labels.get(LABEL_ATTEMPT, 0))
            self._note(rid, job, shard, attempt)

    # ---- merge and publish -------------------------------------------------------------
    def _read_shards(self, rid: str, shards: list[_Shard], keeper: LeaseKeeper, stop: threading.Event):
        """Every shard's output, read again over the Hub's passing faults while this
        dispatcher holds the request; None once it does not."""
        from rexrank.backend.shard_job import read_shard

        faults = 0
        while not stop.is_set() and not keeper.lost.is_set():
            try:
                return [read_shard(self.store, rid, s.index, s.attempt) for s in shards]
            except StoreError as exc:
                faults += 1
                wait = min(MAX_FAULT_WAIT, self.settings.poll * 2 ** faults)
                log.warning("%s: %s; reading its shards again in %.0f s", rid, first_line(exc), wait)
                stop.wait(wait)
        return None

    def _merge_and_publish(self, request: dict, resolved, shards: list[_Shard], plan_json: dict,
                           keeper: LeaseKeeper, stop: threading.Event) -> dict | None:
        from rexrank.backend.merge import merge_shards

        rid, w = request["id"], self.worker
        gpu_seconds: dict = {}
        try:
            try:  # "nothing scored" and the coverage rule are the whole request's, as a single worker's
                parts = self._read_shards(rid, shards, keeper, stop)
                if parts is None:
                    return self._let_go(rid)
                # shards with no study (a private set's tiny track, K sized from the whole set) add nothing
                scored = [(part, r) for part, r in zip(parts, plan_json["ranges"]) if r[0] < r[1]]
                t0 = time.perf_counter()
                results, table = merge_shards([p for p, _ in scored], plan_ranges=[r for _, r in scored],
                                              header=w.whole_header(resolved),
                                              nothing_scored_is_error=not resolved.private)
            except Exception:
                w.hold_for_slot(resolved)  # a private outcome waits for its slot (published_parts holds its own)
                raise
            gpu_seconds = {name: summary["seconds"] for name, summary in results["metrics"].items()}
            record, per_study = w.published_parts(resolved, results, table)
        except Exception as exc:
            if passing_fault(exc):  # the Hub's moment: given back (process_next); the shards' outputs stay for the next claim
                raise
            message, kind = w.failure_message(request, exc, resolved=resolved)
            self._save(rid, plan_json, gpu_seconds)
            if not keeper.lost.is_set() and self.store.fail(rid, w.worker_id, error=message, kind=kind):
                self._drop_scratch(rid)
            return self.store.get_request(rid)
        log.info("%s: merged %d shard(s) in %.3f s", rid, len(shards), time.perf_counter() - t0)
        self._save(rid, plan_json, gpu_seconds)
        settled = w.publish(request, record, per_study, keeper)
        if settled["status"] == R.FINISHED and settled.get("worker") == w.worker_id:
            self._drop_scratch(rid)  # published by this dispatcher: its shard outputs are no longer needed
        elif settled["status"] == R.HELD:  # held for review before its publication
            return self._let_go(rid)
        return settled

    def _drop_scratch(self, rid: str) -> None:
        try:
            self.store.drop_shard_outputs(rid)
        except StoreError as exc:  # left for the maintainers: nothing public depends on it
            log.warning("%s: could not remove its shard outputs: %s", rid, exc)


def describe_jobs(dispatch: dict) -> str:
    """`rexrank status ID --store ...`: a dispatched request's plan, each Job and the GPU-seconds per metric."""
    plan = dispatch.get("plan") or {}
    lines = [f"dispatched: {len(plan.get('ranges') or [])} shard(s) on {plan.get('flavor')}, estimated "
             f"{plan.get('estimated_gpu_hours', 0):.2f} GPU-hours (${plan.get('estimated_cost_usd', 0):.2f}"
             + (f"; prices: {plan['price_source']}" if plan.get("price_source") else "") + ")"]
    jobs = dispatch.get("jobs") or []
    if jobs:
        lines.append("  job id                    shard  attempt  flavour       state       seconds  est. cost")
        for j in sorted(jobs, key=lambda j: (j["shard"], j["attempt"])):
            lines.append(f"  {j['job_id']:<24}  {j['shard']:>5}  {j['attempt']:>7}  {j['flavor']:<12}  {j['state']:<10}"
                         f"  {j['seconds']:>7.0f}  ${j['estimated_cost_usd']:.2f}")
        lines.append(f"  total: {sum(j['seconds'] for j in jobs):.0f} Job-seconds, "
                     f"${sum(j['estimated_cost_usd'] for j in jobs):.2f} estimated")
    for name, seconds in (dispatch.get("gpu_seconds") or {}).items():
        lines.append(f"  {name}: {seconds:.1f} GPU-seconds")
    return "\n".join(lines)


def describe_plans(dispatcher: Dispatcher) -> str:
    """`--dry-run`: the plan of every PENDING request, without claiming or starting anything."""
    lines = []
    for request in dispatcher.store.list_requests(R.PENDING):
        resolved, refusal = dispatcher.worker.resolve(request)
        if refusal is not None:
            lines.append(f"{request['id']}: would be refused: {refusal}")
            continue
        try:
            plan = dispatcher.plan(resolved)
        except PlanError as exc:
            lines.append(f"{request['id']} ({request['test_set']}/{request['track']}): the dispatcher would stop "
                         f"(its settings cannot plan it): {exc}")
            continue
        except TestSetError as exc:  # the dispatcher would give it back and stop
            lines.append(f"{request['id']} ({request['test_set']}/{request['track']}): cannot load test set "
                         f"{request['test_set']!r} ({exc}); the dispatcher would stop — fix its --data-dir")
            continue
        ceiling = dispatcher.settings.gpu_hours_ceiling
        over = f" — over the ceiling of {ceiling:g} GPU-hours: would be refused" if ceiling and plan.gpu_hours > ceiling else ""
        lines.append(f"{request['id']} ({request['test_set']}/{request['track']}):{over}\n{plan.describe()}")
    if not lines:
        lines.append("no PENDING request")
    s = dispatcher.settings
    head = (f"dispatch {s.mode}: up to {s.max_jobs} Job(s) at once, Job timeout {s.job_timeout} s, "
            f"{s.shard_attempts} attempt(s) per shard" + (f", ceiling {s.gpu_hours_ceiling:g} GPU-hours per request"
                                                           if s.gpu_hours_ceiling else "")
            + (f", target wall {s.target_wall} s" if s.target_wall else "") + f"; prices: {dispatcher.prices.source}")
    return "\n".join([head, *lines])


def default_job_command() -> tuple[str, ...]:
    """Local Jobs run this machine's rexrank (the same installation as the dispatcher)."""
    return (sys.executable, "-c", "import sys; from rexrank.cli.main import main; sys.exit(main())")
