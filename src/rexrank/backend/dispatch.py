"""The backend as a dispatcher: claim -> plan shards -> score shard (one Job each) ->
merge -> publish.

The dispatcher claims a request with the store's atomic claim (two dispatchers never hold
one request, so never score a shard twice), cuts it into shards (rexrank.backend.shards),
starts one Job per shard (rexrank.backend.jobs: Hugging Face Jobs or local processes; the
Jobs service schedules them, the dispatcher only starts, polls, retries and cancels),
merges the shards' per-study files once all are in (rexrank.backend.merge) and publishes
once with the worker's conditional commit.

Each Job carries the labels request, shard and attempt: a dispatcher that restarts (or
takes over an expired lease) lists them and adopts the Jobs still running, starting no
duplicate. A shard Job that fails, times out or disappears is started again, up to
`shard_attempts`; then the request FAILs with the shard's cause and nothing is published.
A cancelled request has all its Jobs cancelled. The plan, the Jobs (flavour, state,
seconds, estimated cost) and the GPU-seconds per metric are kept in the request record,
which only the organisers read (the requests repo).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace

from rexrank import __version__
from rexrank.backend import public_door as door
from rexrank.backend.jobs import Jobs, JobsError, JobState
from rexrank.backend.shard_job import PRIVATE_DATA_REPO
from rexrank.backend.shards import FLAVOR_PRICES, PlanError, ShardPlan, plan_shards
from rexrank.backend.worker import BackendStop, LeaseKeeper, Worker
from rexrank.store import records as R
from rexrank.store.names import display
from rexrank.store.repo import StoreError, transact

log = logging.getLogger("rexrank.backend")

LABEL_REQUEST, LABEL_SHARD, LABEL_ATTEMPT = "rexrank-request", "rexrank-shard", "rexrank-attempt"
DEFAULT_IMAGE = "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"  # pinned: every shard runs on the same stack
CONFIG_KEY = "dispatch"


@dataclass(frozen=True)
class DispatchSettings:
    mode: str = "local"  # "hf-jobs" or "local"
    flavor: str = "a10g-large"
    llm_flavor: str | None = None  # flavour for a metric set with LLM judges (default: `flavor`)
    max_jobs: int = 4
    gpu_hours_ceiling: float | None = None  # per request
    job_timeout: int = 6 * 3600  # seconds
    shard_attempts: int = 3
    poll: float = 10.0
    target_shard_hours: float = 0.5
    image: str = DEFAULT_IMAGE
    install: str = f"rexrank[all]=={__version__}"  # or the wheel `rexrank hub deploy` published
    namespace: str | None = None  # where Jobs run (default: the store's org)
    job_command: tuple[str, ...] = ()  # the rexrank command inside a Job (default: installs `install` first)
    job_env: dict = field(default_factory=dict)
    jobs_dir: str | None = None  # local Jobs' state
    flavor_prices: dict = field(default_factory=dict)
    flavor_speed: dict = field(default_factory=dict)

    def flavor_for(self, metrics) -> str:
        from rexrank.metrics.llm_common import LLM_METRICS

        return (self.llm_flavor or self.flavor) if set(metrics) & set(LLM_METRICS) else self.flavor


_SETTING_TYPES = {"mode": str, "flavor": str, "llm_flavor": str, "max_jobs": int, "gpu_hours_ceiling": float,
                  "job_timeout": int, "shard_attempts": int, "poll": float, "target_shard_hours": float, "image": str,
                  "install": str, "namespace": str, "job_command": list, "job_env": dict, "jobs_dir": str,
                  "flavor_prices": dict, "flavor_speed": dict}


def dispatch_settings(store, **overrides) -> DispatchSettings:
    """The store's `dispatch` settings (config.json, what the backend Space reads), with
    `overrides` (command-line flags; None = not given) on top."""
    from rexrank.store.config import read_config

    config = read_config(store).get(CONFIG_KEY) or {}
    where = f"{store.name}/{R.CONFIG_FILE}: {CONFIG_KEY}"
    if not isinstance(config, dict):
        raise StoreError(f"{where} must be a JSON object")
    values = {}
    for key, value in {**config, **{k: v for k, v in overrides.items() if v is not None}}.items():
        kind = _SETTING_TYPES.get(key)
        if kind is None:
            raise StoreError(f"{where}: unknown setting {key!r}; known: {', '.join(sorted(_SETTING_TYPES))}")
        if key == "job_timeout" and isinstance(value, str):
            value = _seconds(value, where)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise StoreError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
        values[key] = tuple(value) if key == "job_command" else value
    settings = DispatchSettings(**values)
    if settings.mode not in ("hf-jobs", "local"):
        raise StoreError(f"dispatch mode {settings.mode!r}: expected hf-jobs or local (--dispatch)")
    for key in ("max_jobs", "shard_attempts", "job_timeout"):
        if getattr(settings, key) < 1:
            raise StoreError(f"{key} must be at least 1 (--{key.replace('_', '-')} or {where})")
    if settings.gpu_hours_ceiling is not None and settings.gpu_hours_ceiling <= 0:
        raise StoreError(f"gpu_hours_ceiling must be positive (--gpu-hours-ceiling or {where})")
    return settings


def _seconds(text: str, where: str) -> int:
    factors = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        return int(float(text[:-1]) * factors[text[-1]]) if text[-1:] in factors else int(text)
    except (ValueError, KeyError):
        raise StoreError(f"{where}: job_timeout {text!r}: expected seconds or e.g. 30m, 6h") from None


def dispatcher_for(worker: Worker, *, dry_run: bool = False, **overrides) -> "Dispatcher | None":
    """The dispatcher the flags (`overrides`, None = not given) or the store's config ask
    for, else None (the worker scores requests itself, as without --dispatch). `dry_run`:
    one that only plans (it reaches no Jobs service)."""
    from rexrank.store.config import read_config

    if overrides.get("mode") is None and not (read_config(worker.store).get(CONFIG_KEY) or {}).get("mode"):
        return None
    settings = dispatch_settings(worker.store, **overrides)
    return Dispatcher(worker, None if dry_run else open_jobs(worker.store, settings), settings)


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


class Dispatcher:
    """Claims requests and runs them as shard Jobs; `worker` provides the store, the metric
    set, the policy check and what is published (result record, coverage, messages)."""

    def __init__(self, worker: Worker, jobs: Jobs | None, settings: DispatchSettings):
        self.worker, self.jobs, self.settings = worker, jobs, settings
        self.store = worker.store
        self._records: dict[str, list[dict]] = {}

    # ---- the loop ----------------------------------------------------------------------
    def run(self, *, once: bool = False, stop: threading.Event | None = None) -> int:
        """The worker's loop, each request dispatched; returns how many were settled."""
        stop = stop or threading.Event()
        return self.worker.run(once=once, poll=self.settings.poll, stop=stop, step=lambda: self.process_next(stop))

    def process_next(self, stop: threading.Event | None = None) -> dict | None:
        stop = stop or threading.Event()
        w = self.worker
        request = self.store.claim(w.worker_id, lease_seconds=w.lease_seconds, max_attempts=w.max_attempts)
        if request is None:
            return None
        rid = request["id"]
        log.info("claimed %s to dispatch (attempt %d)", rid, request.get("attempts", 1))
        with LeaseKeeper(self.store, rid, w.worker_id, w.lease_seconds) as keeper:
            try:
                return self._process(request, keeper, stop)
            except BackendStop:
                raise
            except Exception as exc:
                log.exception("%s: unexpected error in the dispatcher", rid)
                self._cancel_all(rid)
                if not keeper.lost.is_set():
                    message, kind = w.failure_message(request, exc)
                    self.store.fail(rid, w.worker_id, error=message, kind=kind)
                return self.store.get_request(rid)

    # ---- one request -------------------------------------------------------------------
    def plan(self, resolved) -> ShardPlan:
        w, s = self.worker, self.settings
        return plan_shards(len(resolved.studies.ids), w.metrics, w.metric_options, flavor=s.flavor_for(w.metrics),
                           max_jobs=s.max_jobs, target_shard_hours=s.target_shard_hours, speed=s.flavor_speed,
                           prices=s.flavor_prices)

    def _process(self, request: dict, keeper: LeaseKeeper, stop: threading.Event) -> dict | None:
        w, rid = self.worker, request["id"]
        if request.get("attempts", 1) > 1 and self.store.get_result(rid, test_set=request["test_set"],
                                                                   track=request["track"]) is not None:
            self.store.finish(rid, w.worker_id, result_id=rid)
            return self.store.get_request(rid)
        resolved, refusal = w.resolve(request)
        if refusal is None:
            refusal = w.policy_problem(request, resolved=resolved)
        if refusal is None:
            try:
                plan = self.plan(resolved)
            except PlanError as exc:
                refusal = str(exc)
        if refusal is None and self.settings.gpu_hours_ceiling is not None \
                and plan.gpu_hours > self.settings.gpu_hours_ceiling:
            refusal = (f"the estimated {plan.gpu_hours:.2f} GPU-hours exceed this board's per-request ceiling of "
                       f"{self.settings.gpu_hours_ceiling:g} (gpu_hours_ceiling); contact the maintainers")
        settled = w.refuse_or_charge(request, refusal)
        if settled is not None:
            return settled
        previous = (request.get("dispatch") or {}).get("plan")
        plan_json = {**plan.to_json(), "metric_options": w.metric_options}
        if previous and previous.get("ranges") == plan_json["ranges"] and previous.get("metrics") == plan_json["metrics"]:
            plan_json = previous  # a restart: the shards already scored stay valid
        shards = [_Shard(i) for i in range(len(plan_json["ranges"]))]
        self._records[rid] = list((request.get("dispatch") or {}).get("jobs") or [])
        self._adopt(rid, shards)
        self._save(rid, plan_json)
        log.info("%s: %d shard(s) on %s, about %.2f GPU-hours ($%.2f)", rid, len(shards), plan.flavor,
                 plan.gpu_hours, plan.cost_usd)
        while True:
            if stop.is_set():  # the dispatcher stops; its Jobs go on and the next one adopts them
                return None
            if keeper.lost.is_set() or self._withdrawn(rid):
                self._cancel_all(rid)
                self._drop_scratch(rid)
                log.warning("%s: cancelled or taken over; its Jobs are cancelled and nothing is published", rid)
                return self.store.get_request(rid)
            failure = self._step(rid, shards, plan_json)
            if failure is None and self.settings.gpu_hours_ceiling is not None:
                used = sum(j.get("seconds", 0.0) for j in self._records[rid]) / 3600
                if used > self.settings.gpu_hours_ceiling:
                    failure = (f"internal error while scoring: the Jobs used {used:.2f} GPU-hours, over this board's "
                               f"per-request ceiling of {self.settings.gpu_hours_ceiling:g}", R.INTERNAL)
            if failure is not None:
                self._cancel_all(rid)
                self._drop_scratch(rid)  # a shard's per-study values of a private set stay nowhere
                self._save(rid, plan_json)
                message, kind = failure
                log.error("%s FAILED: %s", rid, display(message))
                if resolved.private and kind == R.INTERNAL:  # a shard's cause (a Job's log) can quote private data
                    message = door.PRIVATE_INTERNAL_ERROR
                if not keeper.lost.is_set():
                    self.store.fail(rid, w.worker_id, error=message, kind=kind)
                return self.store.get_request(rid)
            self._save(rid, plan_json)
            if all(s.done for s in shards):
                break
            stop.wait(self.settings.poll)
        return self._merge_and_publish(request, resolved, shards, plan_json, keeper)

    def _adopt(self, rid: str, shards: list[_Shard]) -> None:
        """Jobs started for this request before (a restarted dispatcher, a previous holder):
        the running ones are adopted, a finished one with its output counts as done."""
        from rexrank.backend.shard_job import read_shard

        found = self.jobs.list({LABEL_REQUEST: rid})
        recorded = {entry["job_id"] for entry in self._records.get(rid, [])}  # this round's (requeue clears it)
        for job in sorted(found, key=lambda j: int(j.labels.get(LABEL_ATTEMPT, 0))):
            try:
                shard = shards[int(job.labels[LABEL_SHARD])]
                attempt = int(job.labels[LABEL_ATTEMPT])
            except (KeyError, ValueError, IndexError):
                continue
            shard.attempt = max(shard.attempt, attempt)
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
            if running >= self.settings.max_jobs:
                continue
            if not self.store.renew_lease(rid, self.worker.worker_id, lease_seconds=self.worker.lease_seconds):
                return None  # no longer ours: the next loop sees it and cancels
            shard.attempt += 1
            shard.job_id = self._start(rid, shard, plan_json)
            running += 1
        return None

    def _start(self, rid: str, shard: _Shard, plan_json: dict) -> str:
        s = self.settings
        args = ["backend-shard", "--store", self.store.name, "--request", rid, "--shard", str(shard.index),
                "--attempt", str(shard.attempt)]
        env = {"HF_HUB_DISABLE_TELEMETRY": "1", "REXRANK_INSTALL": s.install, **s.job_env}
        if os.environ.get(PRIVATE_DATA_REPO):  # the Job reads the private references from there itself
            env.setdefault(PRIVATE_DATA_REPO, os.environ[PRIVATE_DATA_REPO])
        endpoint = getattr(getattr(self.store.requests, "api", None), "endpoint", None)
        if endpoint and self.store.name.startswith("hf://"):
            env["HF_ENDPOINT"] = endpoint
        if s.job_command or s.mode == "local":
            command = [*(s.job_command or default_job_command()), *args]
        else:  # the Job installs the dispatcher's own rexrank version, then runs the shard
            command = ["bash", "-c", 'pip install --quiet "$REXRANK_INSTALL" && exec rexrank "$@"', "rexrank-job", *args]
        token = _store_token(self.store)
        secrets = {"HF_TOKEN": token} if token else {}
        labels = {LABEL_REQUEST: rid, LABEL_SHARD: str(shard.index), LABEL_ATTEMPT: str(shard.attempt)}
        job_id = self.jobs.run(command=command, env=env, secrets=secrets, flavor=plan_json["flavor"],
                               timeout=s.job_timeout, labels=labels)
        log.info("%s: started Job %s (shard %d, attempt %d, %s)", rid, job_id, shard.index, shard.attempt,
                 plan_json["flavor"])
        self._note(rid, JobState(job_id, "SCHEDULING", labels=labels, flavor=plan_json["flavor"]), shard.index,
                   shard.attempt)
        return job_id

    def _note(self, rid: str, job: JobState, shard: int, attempt: int) -> None:
        """Keep the Job's state, seconds and estimated cost for the request record."""
        price = {**FLAVOR_PRICES, **self.settings.flavor_prices}.get(job.flavor, 0.0)
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

    def _withdrawn(self, rid: str) -> bool:
        try:
            current = self.store.get_request(rid)
        except StoreError:
            return False  # the store is unreachable for a moment: the lease keeper decides
        return current["status"] != R.RUNNING or current.get("worker") != self.worker.worker_id

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
                except JobsError as exc:
                    log.error("%s: %s", rid, exc)
            shard, attempt = int(job.labels.get(LABEL_SHARD, -1)), int(job.labels.get(LABEL_ATTEMPT, 0))
            self._note(rid, replace(job, stage="CANCELED" if job.running else job.stage), shard, attempt)

    # ---- merge and publish -------------------------------------------------------------
    def _merge_and_publish(self, request: dict, resolved, shards: list[_Shard], plan_json: dict,
                           keeper: LeaseKeeper) -> dict:
        from rexrank.backend.merge import merge_shards
        from rexrank.backend.shard_job import read_shard

        rid, w = request["id"], self.worker
        parts = [read_shard(self.store, rid, s.index, s.attempt) for s in shards]
        t0 = time.perf_counter()
        gpu_seconds: dict = {}
        try:  # "nothing scored" and the coverage rule are the whole request's, as a single worker's
            results, table = merge_shards(parts, plan_ranges=plan_json["ranges"], header=self._header(resolved),
                                          nothing_scored_is_error=not resolved.private)
            gpu_seconds = {name: summary["seconds"] for name, summary in results["metrics"].items()}
            record, per_study = w.published_parts(resolved, results, table)
        except Exception as exc:
            message, kind = w.failure_message(request, exc, resolved=resolved)
            self._save(rid, plan_json, gpu_seconds)
            if not keeper.lost.is_set():
                self.store.fail(rid, w.worker_id, error=message, kind=kind)
            return self.store.get_request(rid)
        log.info("%s: merged %d shard(s) in %.3f s", rid, len(shards), time.perf_counter() - t0)
        self._save(rid, plan_json, gpu_seconds)
        settled = w.publish(request, record, per_study, keeper)
        self._drop_scratch(rid)
        return settled

    def _header(self, resolved) -> dict:
        """The whole run's results header, as a single worker's score_submission writes it."""
        from rexrank.scoring import _results_header
        from rexrank.store.scratch import ScratchDir
        from rexrank.submissions import load_predictions

        request, spec, studies = resolved.request, resolved.spec, resolved.studies
        with ScratchDir("merge") as tmp:
            path = tmp / "predictions.parquet"
            path.write_bytes(self.store.read_predictions(request))
            predictions = load_predictions(path, list(studies.ids), test_set=f"{spec.title}, {resolved.track} track",
                                           outside_track_ids=studies.outside_ids)
        info = {"name": spec.name, "title": spec.title, "split": spec.split, "track": resolved.track,
                "n_studies": len(studies.ids), "n_studies_outside_track": len(studies.outside_ids), "access": spec.access}
        header = _results_header(predictions, list(studies.references), list(self.worker.metrics), 0, 0, info)
        header["predictions_ids"] = list(predictions.ids)
        return header

    def _drop_scratch(self, rid: str) -> None:
        prefix = f"{R.SCRATCH_DIR}{rid}/"

        def decide(snap):
            gone = {path: None for path in snap.paths(prefix)}
            return (gone, f"remove the shard outputs of {rid}", None) if gone else None

        try:
            transact(self.store.requests, decide, folders=(prefix,))
        except StoreError as exc:  # left for the maintainers: nothing public depends on it
            log.warning("%s: could not remove its shard outputs: %s", rid, exc)


def describe_jobs(dispatch: dict) -> str:
    """`rexrank status ID --store ...`: a dispatched request's plan, each Job and the GPU-seconds per metric."""
    plan = dispatch.get("plan") or {}
    lines = [f"dispatched: {len(plan.get('ranges') or [])} shard(s) on {plan.get('flavor')}, estimated "
             f"{plan.get('estimated_gpu_hours', 0):.2f} GPU-hours (${plan.get('estimated_cost_usd', 0):.2f})"]
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
        plan = dispatcher.plan(resolved)
        ceiling = dispatcher.settings.gpu_hours_ceiling
        over = f" — over the ceiling of {ceiling:g} GPU-hours: would be refused" if ceiling and plan.gpu_hours > ceiling else ""
        lines.append(f"{request['id']} ({request['test_set']}/{request['track']}):{over}\n{plan.describe()}")
    if not lines:
        lines.append("no PENDING request")
    s = dispatcher.settings
    head = (f"dispatch {s.mode}: up to {s.max_jobs} Job(s) at once, Job timeout {s.job_timeout} s, "
            f"{s.shard_attempts} attempt(s) per shard" + (f", ceiling {s.gpu_hours_ceiling:g} GPU-hours per request"
                                                           if s.gpu_hours_ceiling else ""))
    return "\n".join([head, *lines])


def default_job_command() -> tuple[str, ...]:
    """Local Jobs run this machine's rexrank (the same installation as the dispatcher)."""
    return (sys.executable, "-c", "import sys; from rexrank.cli.main import main; sys.exit(main())")
