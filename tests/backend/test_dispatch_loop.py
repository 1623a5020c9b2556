"""The dispatcher's loop (rexrank.backend.dispatch) over Jobs run in this process's threads,
the Jobs service's faults played by the test: a Job that ends in error or that the service
forgets is started again, a shard failing every attempt fails the request with its cause, a
cancel stops every Job, a restarted dispatcher adopts the running Jobs, one whose plan changed
cancels the replaced plan's Jobs, the service's passing and lasting refusals, and two
dispatchers on one store. Each settles within seconds, or the test fails (a loop that never
ends is a failure here, not a hang). The same scenarios on the fake Hub's Jobs API, as
processes: tests/backend/test_dispatch.py and test_dispatch_faults.py. Then what the
organisers read of a dispatched request, the Jobs a dispatcher opens, `rexrank cancel`'s, the
steps of the loop one by one (a failure, letting go, who holds a request, the merge, adoption)
and the backoff over the service's passing faults."""
from __future__ import annotations

import io
import re
import threading

import pandas as pd
import pytest

from rexrank.backend.dispatch import Dispatcher, DispatchSettings
from rexrank.backend.jobs import JobsError
from rexrank.backend.worker import Worker
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store import records as R
from support.dispatch_fixtures import InProcessJobs, in_thread, logged, published, wait_for
from support.dispatch_fixtures import hub  # noqa: F401 (fixtures)
from support.requests import submit

# three shards of the example's 19 studies ([0, 7), [7, 13), [13, 19)), polled every 50 ms
SETTINGS = dict(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.05, job_startup=0)
SETTLES_WITHIN = 60.0


def dispatcher(store, jobs, worker_id: str = "d", lease: float = 30.0, **settings) -> Dispatcher:
    return Dispatcher(Worker(store, metrics="bleu2", worker_id=worker_id, lease_seconds=lease), jobs,
                      DispatchSettings(**{**SETTINGS, **settings}))


def settle(thread: threading.Thread, stop: threading.Event) -> None:
    thread.join(SETTLES_WITHIN)
    stop.set()
    assert not thread.is_alive(), f"the dispatcher did not settle the request within {SETTLES_WITHIN:g} s"


class WaitsRecorded(threading.Event):
    """A stop event whose waits are recorded and cut to 10 ms (a backoff's seconds, not slept)."""

    def __init__(self):
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(min(timeout, 0.01))


def dispatched(store, jobs, rid: str, stop: threading.Event | None = None, **settings) -> dict:
    """The request `rid` once a dispatcher (`settings`) has settled it (or `stop` was set): its
    final record."""
    stop = stop or threading.Event()
    settle(in_thread(lambda: dispatcher(store, jobs, **settings).run(once=True, stop=stop)), stop)
    return store.get_request(rid)


def settled_by_another(store_root, jobs, rid: str, **settings) -> dict:
    """The request `rid` once a second dispatcher, started after the first stopped, settled it
    (it takes the request over when the first's lease has run out): its final record."""
    store = open_store(store_root, quota=Quota(0))
    stop = threading.Event()
    thread = in_thread(lambda: dispatcher(store, jobs, worker_id="second", **settings).run(stop=stop))
    try:
        wait_for(lambda: store.get_request(rid)["status"] != "RUNNING", timeout=SETTLES_WITHIN, what="settled")
    finally:
        stop.set()
        thread.join(SETTLES_WITHIN)
    return store.get_request(rid)


def started(store, jobs: InProcessJobs, d: Dispatcher, *, count: int = 3,
            settled: list | None = None) -> tuple[threading.Thread, threading.Event]:
    """`d` dispatching the store's request, returned once `count` of its Jobs run (held until
    `jobs.go`); `settled` receives what the run returns (how many requests it settled)."""
    jobs.go.clear()
    stop = threading.Event()
    settled = [] if settled is None else settled
    thread = in_thread(lambda: settled.append(d.run(once=True, stop=stop)))
    wait_for(lambda: len(jobs.jobs) >= count, timeout=SETTLES_WITHIN, what=f"{count} running Jobs")
    return thread, stop


def attempts(request) -> list[tuple[int, int, str]]:
    return sorted((j["shard"], j["attempt"], j["state"]) for j in request["dispatch"]["jobs"])


def shard_of(jobs: InProcessJobs, shard: int) -> str:
    [job_id] = [j.job_id for j in jobs.jobs.values() if j.labels["rexrank-shard"] == str(shard)]
    return job_id


def no_shard_outputs(store, rid: str) -> bool:
    """Nothing left in the request's scratch folder (any shard, any attempt)."""
    folder = f"{R.SCRATCH_DIR}{rid}/"
    return store.requests.snapshot(folder).paths(folder) == []


@pytest.mark.parametrize("fault, shard, state", [("kill", 1, "ERROR"), ("forget", 2, "VANISHED")])
def test_a_job_that_ended_in_error_or_vanished_is_started_again_and_the_request_published_once(tmp_path, fault,
                                                                                               shard, state):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"))
    thread, stop = started(store, jobs, dispatcher(store, jobs))
    getattr(jobs, fault)(shard_of(jobs, shard))  # killed (its Job ends ERROR), or forgotten by the service
    jobs.go.set()  # the other shards, and the shard's second attempt, score
    settle(thread, stop)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert attempts(final) == sorted([(k, 1, state if k == shard else "COMPLETED") for k in range(3)]
                                     + [(shard, 2, "COMPLETED")])
    assert len(store.list_results()) == 1 and set(final["dispatch"]["gpu_seconds"]) == {"bleu2"}
    assert no_shard_outputs(store, req["id"])  # the scratch area is emptied once published
    # the merged shards are one worker's run, study by study
    _, per_study = published(store)
    single = open_store(tmp_path / "single", quota=Quota(0))
    submit(single)
    assert Worker(single, metrics="bleu2", worker_id="one").run(once=True) == 1
    [record] = single.list_results()
    pd.testing.assert_frame_equal(per_study, pd.read_parquet(io.BytesIO(single.read_per_study(record))))


def test_a_shard_failing_every_attempt_fails_the_request_with_its_cause_and_a_requeue_numbers_on(tmp_path, caplog):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"), failing_shards={1})
    jobs.go.clear()  # the other shards run on until the request fails
    with caplog.at_level("ERROR", logger="rexrank"):
        final = dispatched(store, jobs, req["id"], shard_attempts=2)
    assert final["status"] == FAILED and final["failure_kind"] == "internal"
    assert final["error"] == ("internal error while scoring: shard 2 of 3 failed 2 time(s); last cause: its Job "
                              "ended ERROR (Job timeout)")
    assert f"{req['id']} FAILED: {final['error']}" in caplog.messages  # the organisers' log says which and why
    assert final["dispatch"]["plan"]["ranges"] == [[0, 7], [7, 13], [13, 19]]  # the plan stays in the record
    # both attempts it was allowed and no third; the others' Jobs are cancelled, and all are recorded
    assert attempts(final) == [(0, 1, "CANCELED"), (1, 1, "ERROR"), (1, 2, "ERROR"), (2, 1, "CANCELED")]
    assert not any(j.running for j in jobs.jobs.values())
    assert store.list_results() == [] and no_shard_outputs(store, req["id"])
    # requeued once the cause is fixed: a new round, each shard's attempt numbered after its last
    jobs.failing_shards.clear()
    jobs.go.set()
    store.requeue(req["id"])
    final = dispatched(store, jobs, req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert attempts(final) == [(0, 2, "COMPLETED"), (1, 3, "COMPLETED"), (2, 2, "COMPLETED")]


def test_a_cancel_mid_run_cancels_every_job_and_publishes_nothing(tmp_path, caplog):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"))
    settled: list = []
    thread, stop = started(store, jobs, dispatcher(store, jobs), settled=settled)
    with caplog.at_level("WARNING", logger="rexrank"):
        store.cancel(req["id"], reason="withdrawn")
        settle(thread, stop)
    assert settled == [1]  # the cancelled request counts as settled by this run, without an error
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert f"{req['id']}: cancelled; its Jobs are cancelled and nothing is published" in caplog.messages
    assert {j.stage for j in jobs.jobs.values()} == {"CANCELED"} and len(jobs.jobs) == 3
    assert store.get_request(req["id"])["status"] == FAILED
    assert store.list_results() == [] and no_shard_outputs(store, req["id"])


def test_a_restarted_dispatcher_adopts_the_running_jobs(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"))
    first_stop = threading.Event()
    first = dispatcher(store, jobs, worker_id="first", lease=1.0)
    jobs.go.clear()
    thread = in_thread(lambda: first.run(stop=first_stop))
    wait_for(lambda: len(jobs.jobs) == 3, timeout=SETTLES_WITHIN, what="three running Jobs")
    first_stop.set()  # the dispatcher stops (a restart, a crash); its Jobs run on
    thread.join(SETTLES_WITHIN)
    assert not thread.is_alive() and {j.stage for j in jobs.jobs.values()} == {"RUNNING"}
    second_stop = threading.Event()
    second = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs, worker_id="second", lease=1.0)
    thread = in_thread(lambda: second.run(stop=second_stop))
    try:
        wait_for(lambda: (lambda r: r.get("worker") == "second" and len((r.get("dispatch") or {}).get("jobs") or []) == 3)(
            store.get_request(req["id"])), timeout=SETTLES_WITHIN, what="the second dispatcher holding the three Jobs")
        jobs.go.set()  # the adopted Jobs now score
        wait_for(lambda: store.get_request(req["id"])["status"] == FINISHED, timeout=SETTLES_WITHIN, what="FINISHED")
    finally:
        second_stop.set()
        thread.join(SETTLES_WITHIN)
    final = store.get_request(req["id"])
    assert len(jobs.jobs) == 3 and final["worker"] == "second"  # found by their labels: no duplicate
    assert attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED"), (2, 1, "COMPLETED")]
    assert len(store.list_results()) == 1


def test_a_restart_with_another_plan_cancels_the_replaced_plans_jobs_and_numbers_on(tmp_path, caplog):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"))
    first_stop = threading.Event()
    jobs.go.clear()
    thread = in_thread(lambda: dispatcher(store, jobs, worker_id="first", lease=1.0).run(stop=first_stop))
    wait_for(lambda: len(jobs.jobs) == 3, timeout=SETTLES_WITHIN, what="three running Jobs")
    first_stop.set()
    thread.join(SETTLES_WITHIN)
    assert not thread.is_alive()
    old = set(jobs.jobs)
    caplog.set_level("INFO", logger="rexrank")
    # the organisers changed max_jobs: two shards now, whose ranges the old Jobs' outputs do not fit
    stop = threading.Event()
    second = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs, worker_id="second", max_jobs=2)
    thread = in_thread(lambda: second.run(stop=stop))  # it takes the request over once the first's lease ran out
    adopted = lambda: logged(caplog, "adopted the running Job")  # noqa: E731
    try:
        wait_for(lambda: len(jobs.jobs) == 5 or adopted(), timeout=SETTLES_WITHIN, what="the new plan's two Jobs")
        assert adopted() == []  # the replaced plan's Jobs are never taken as this plan's
        assert f"{req['id']}: 2 shard(s) on cpu-basic, about 0.00 GPU-hours ($0.00)" in caplog.messages
        assert {jobs.jobs[j].stage for j in old} == {"CANCELED"}
        assert sorted(m for m in caplog.messages if "replaced plan" in m) == [
            f"{req['id']}: cancelled Job {j} of the replaced plan" for j in sorted(old)]
        jobs.go.set()
        wait_for(lambda: store.get_request(req["id"])["status"] != "RUNNING", timeout=SETTLES_WITHIN, what="settled")
    finally:
        stop.set()
        thread.join(SETTLES_WITHIN)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert final["dispatch"]["plan"]["ranges"] == [[0, 10], [10, 19]]
    assert attempts(final) == [(0, 1, "CANCELED"), (0, 2, "COMPLETED"), (1, 1, "CANCELED"), (1, 2, "COMPLETED"),
                               (2, 1, "CANCELED")]
    assert len(store.list_results()) == 1


class FlakyJobs(InProcessJobs):
    """Jobs whose service refuses `times` calls of `refused` (inspect: once they run; list: the
    dispatcher's first look), transient or not."""

    def __init__(self, store_name: str, *, times: int, transient: bool, refused: str = "inspect"):
        super().__init__(store_name)
        self.refusals, self.transient, self.refused = times, transient, refused

    def _refuse(self, call: str) -> None:
        if call == self.refused and self.refusals > 0:
            self.refusals -= 1
            raise JobsError("503 Service Unavailable" if self.transient else "403 Forbidden: no Jobs in this namespace",
                            transient=self.transient)

    def inspect(self, job_id):
        self._refuse("inspect")
        return super().inspect(job_id)

    def list(self, labels):
        self._refuse("list")
        return super().list(labels)


def test_passing_refusals_of_the_jobs_service_fail_nothing(tmp_path, caplog):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = FlakyJobs(str(tmp_path / "s"), times=3, transient=True)
    stop = WaitsRecorded()
    with caplog.at_level("WARNING", logger="rexrank"):
        settle(in_thread(lambda: dispatcher(store, jobs, poll=1.0).run(once=True, stop=stop)), stop)
    final = store.get_request(req["id"])
    # a poll, then the three refused ones each waited for twice as long as the last, then polls again
    assert stop.waits[:5] == [1.0, 2.0, 4.0, 8.0, 1.0]
    assert [m for m in caplog.messages if "polling again" in m] == [
        f"{req['id']}: 503 Service Unavailable; polling again in {w} s" for w in (2, 4, 8)]
    assert final["status"] == FINISHED, final.get("error")
    assert jobs.refusals == 0 and len(jobs.jobs) == 3  # polled again, nothing started twice
    assert attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED"), (2, 1, "COMPLETED")]
    # refused at the first look (the Jobs it may adopt): the same backoff from the start
    store = open_store(tmp_path / "first-look", quota=Quota(0))
    rid = submit(store)["id"]
    jobs = FlakyJobs(str(tmp_path / "first-look"), times=2, transient=True, refused="list")
    stop = WaitsRecorded()
    settle(in_thread(lambda: dispatcher(store, jobs, poll=1.0).run(once=True, stop=stop)), stop)
    assert store.get_request(rid)["status"] == FINISHED and stop.waits[:3] == [2.0, 4.0, 1.0]
    assert jobs.refusals == 0 and len(jobs.jobs) == 3


def test_a_lasting_refusal_of_the_jobs_service_fails_the_request_and_stops_its_jobs(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = FlakyJobs(str(tmp_path / "s"), times=1, transient=False)
    jobs.go.clear()
    final = dispatched(store, jobs, req["id"])
    assert final["status"] == FAILED and final["failure_kind"] == "internal"
    assert final["error"] == ("internal error while scoring: the Jobs service refused a call: 403 Forbidden: no Jobs "
                              "in this namespace")
    assert {j.stage for j in jobs.jobs.values()} == {"CANCELED"} and store.list_results() == []


def dispatched_while_raising(tmp_path, monkeypatch, module, name: str, message: str) -> tuple:
    """(store, final record, the keyword arguments of the first call) of the example request
    dispatched while `module.name` raises ValueError(message)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    calls: list[dict] = []
    stop = threading.Event()

    def raising(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) > 1:  # called again: the first error did not settle the request; stop, and its record says so
            stop.set()
        raise ValueError(message)

    monkeypatch.setattr(module, name, raising)
    return store, dispatched(store, InProcessJobs(str(tmp_path / "s")), req["id"], stop=stop), calls[0]


def test_an_unexpected_error_while_polling_fails_the_request_as_internal(tmp_path, monkeypatch, caplog):
    import rexrank.backend.shard_job as shard_job

    with caplog.at_level("ERROR", logger="rexrank"):
        store, final, _ = dispatched_while_raising(tmp_path, monkeypatch, shard_job, "read_shard",
                                                   "a shard output that is not Parquet")
    [said] = [r for r in caplog.records if "while polling" in r.getMessage()]
    assert said.getMessage() == f"{final['id']}: unexpected error while polling its Jobs" and said.exc_info
    assert final["status"] == FAILED and final["failure_kind"] == "internal"
    assert final["error"] == "internal error while scoring (ValueError: a shard output that is not Parquet)"
    assert store.list_results() == []


def test_two_dispatchers_on_one_store_never_start_a_shard_twice(tmp_path):
    from support.requests import variant

    store = open_store(tmp_path / "s", quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(2)}
    jobs = InProcessJobs(str(tmp_path / "s"))
    stop = threading.Event()
    threads = [in_thread(lambda name=name: dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs,
                                                      worker_id=name).run(stop=stop))
               for name in ("left", "right")]
    try:
        wait_for(lambda: {r["status"] for r in store.list_requests()} == {FINISHED}, timeout=SETTLES_WITHIN,
                 what="both FINISHED")
    finally:
        stop.set()
        for thread in threads:
            thread.join(SETTLES_WITHIN)
    begun = sorted((j.labels["rexrank-request"], j.labels["rexrank-shard"]) for j in jobs.jobs.values())
    assert begun == sorted((rid, str(k)) for rid in ids for k in range(3))  # each shard once
    assert len(store.list_results()) == 2


@pytest.mark.parametrize("shard_attempts", [1, 3])
def test_a_shard_is_tried_exactly_shard_attempts_times(tmp_path, shard_attempts):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"), failing_shards={0})
    final = dispatched(store, jobs, req["id"], shard_attempts=shard_attempts)
    assert final["status"] == FAILED and f"shard 1 of 3 failed {shard_attempts} time(s)" in final["error"]
    assert [a for s, a, _ in attempts(final) if s == 0] == list(range(1, shard_attempts + 1))


def test_a_restarted_dispatcher_counts_the_failed_attempts_of_this_round(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"), failing_shards={1})
    jobs.go.clear()
    first_stop = threading.Event()
    first = dispatcher(store, jobs, worker_id="first", lease=1.0, shard_attempts=100)
    thread = in_thread(lambda: first.run(stop=first_stop))
    failed = lambda: [j for j in list(jobs.jobs.values()) if j.labels["rexrank-shard"] == "1"]  # noqa: E731
    wait_for(lambda: len(failed()) >= 2, timeout=SETTLES_WITHIN, what="two failed attempts of shard 2")
    first_stop.set()  # stopped after some failed attempts; the next dispatcher has one more to give
    thread.join(SETTLES_WITHIN)
    assert not thread.is_alive()
    tried = len(failed())
    final = settled_by_another(tmp_path / "s", jobs, req["id"], shard_attempts=tried + 1)
    assert final["status"] == FAILED and f"shard 2 of 3 failed {tried + 1} time(s)" in final["error"]
    assert sorted(int(j.labels["rexrank-attempt"]) for j in failed()) == list(range(1, tried + 2))


def test_the_status_of_a_dispatched_request_lists_its_jobs_in_order_with_their_totals():
    from rexrank.backend.dispatch import describe_jobs

    dispatch = {"plan": {"ranges": [[0, 7], [7, 14], [14, 19]], "flavor": "l4x1", "estimated_gpu_hours": 1.234,
                         "estimated_cost_usd": 0.987, "price_source": "the dated table"},
                "jobs": [{"job_id": "j3", "shard": 1, "attempt": 2, "flavor": "l4x1", "state": "COMPLETED",
                          "seconds": 1500.4, "estimated_cost_usd": 0.3334},
                         {"job_id": "j1", "shard": 1, "attempt": 1, "flavor": "l4x1", "state": "ERROR",
                          "seconds": 60.6, "estimated_cost_usd": 0.0133},
                         {"job_id": "j0", "shard": 0, "attempt": 1, "flavor": "l4x1", "state": "COMPLETED",
                          "seconds": 1800.0, "estimated_cost_usd": 0.4}],
                "gpu_seconds": {"bleu2": 12.345, "green": 3000.0}}
    assert describe_jobs(dispatch).splitlines() == [
        "dispatched: 3 shard(s) on l4x1, estimated 1.23 GPU-hours ($0.99; prices: the dated table)",
        "  job id                    shard  attempt  flavour       state       seconds  est. cost",
        "  j0                            0        1  l4x1          COMPLETED      1800  $0.40",
        "  j1                            1        1  l4x1          ERROR            61  $0.01",
        "  j3                            1        2  l4x1          COMPLETED      1500  $0.33",
        "  total: 3361 Job-seconds, $0.75 estimated",
        "  bleu2: 12.3 GPU-seconds",
        "  green: 3000.0 GPU-seconds"]
    # a plan with no Job yet (and a record of an earlier version without prices)
    assert describe_jobs({"plan": {"ranges": [[0, 19]], "flavor": "cpu-basic"}}) == \
        "dispatched: 1 shard(s) on cpu-basic, estimated 0.00 GPU-hours ($0.00)"


# ---- the Jobs a dispatcher opens, and `rexrank cancel`'s -------------------------------------------

def test_the_jobs_opened_are_local_processes_or_the_hubs_in_the_stores_namespace(tmp_path, monkeypatch):
    import tempfile
    from pathlib import Path

    from rexrank.backend.dispatch import open_jobs
    from rexrank.backend.jobs import HubJobs, LocalJobs
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    local = open_jobs(store, DispatchSettings(mode="local", jobs_dir=str(tmp_path / "jobs")))
    assert isinstance(local, LocalJobs) and local.root == tmp_path / "jobs"
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert open_jobs(store, DispatchSettings(mode="local")).root == Path(tmp_path / "tmp" / "rexrank-jobs")
    with pytest.raises(StoreError, match=r"^--dispatch hf-jobs needs a namespace for the Jobs: a Hub store \(hf://ORG\) "
                                         r"or namespace in config\.json's dispatch settings$"):
        open_jobs(store, DispatchSettings(mode="hf-jobs"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    hub_jobs = open_jobs(store, DispatchSettings(mode="hf-jobs", namespace="board", image="img:1"))
    assert isinstance(hub_jobs, HubJobs) and (hub_jobs.namespace, hub_jobs.image) == ("board", "img:1")
    assert hub_jobs.api.endpoint == "http://127.0.0.1:9" and hub_jobs.api.token is None  # a local store has no token


def test_the_jobs_of_a_hub_store_run_in_its_org_with_its_token(hub, monkeypatch):
    from rexrank.backend.dispatch import open_jobs
    from support.dispatch_fixtures import ORG, TOKEN

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the store's own Hub wins over the environment's
    jobs = open_jobs(store, DispatchSettings(mode="hf-jobs"))
    assert (jobs.namespace, jobs.api.token, jobs.api.endpoint) == (ORG, TOKEN, hub.url)
    other = open_jobs(store, DispatchSettings(mode="hf-jobs", namespace="elsewhere"))
    assert other.namespace == "elsewhere"


def test_rexrank_cancel_cancels_the_running_jobs_of_that_request_only(tmp_path, monkeypatch):
    import json

    import rexrank.backend.dispatch as dispatch
    from rexrank.backend.jobs import JobState

    store = open_store(tmp_path / "s", quota=Quota(0))
    jobs = InProcessJobs(str(tmp_path / "s"))
    for job_id, rid, stage in (("a1", "A", "RUNNING"), ("a2", "A", "SCHEDULING"), ("a3", "A", "COMPLETED"),
                               ("b1", "B", "RUNNING")):
        jobs.jobs[job_id] = JobState(job_id, stage, labels={"rexrank-request": rid})
    opened = []
    monkeypatch.setattr(dispatch, "open_jobs", lambda store_, settings: opened.append((store_, settings.mode)) or jobs)
    # a store whose backend does not dispatch has no Jobs to cancel
    assert dispatch.cancel_request_jobs(store, "A") == 0 and jobs.jobs["a1"].stage == "RUNNING"
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"dispatch": {"mode": "local"}}))
    assert dispatch.cancel_request_jobs(store, "A") == 2 and opened == [(store, "local")]  # the store's own Jobs
    assert {k: j.stage for k, j in jobs.jobs.items()} == {"a1": "CANCELED", "a2": "CANCELED", "a3": "COMPLETED",
                                                         "b1": "RUNNING"}


def test_the_dispatcher_the_flags_or_the_stores_config_ask_for(tmp_path):
    import json

    from rexrank.backend.dispatch import dispatcher_for
    from rexrank.backend.jobs import LocalJobs
    from rexrank.backend.shards import PriceList
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    worker = Worker(store, metrics="bleu2", worker_id="w")
    assert dispatcher_for(worker) is None and dispatcher_for(worker, mode=None) is None  # the worker scores itself
    d = dispatcher_for(worker, mode="local", jobs_dir=str(tmp_path / "jobs"), max_jobs=5)
    assert d.worker is worker and (d.settings.mode, d.settings.max_jobs) == ("local", 5)
    assert isinstance(d.jobs, LocalJobs) and d.jobs.root == tmp_path / "jobs"
    assert d.prices.source == PriceList.table().source  # local Jobs publish no prices: the dated table
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps(
        {"dispatch": {"mode": "local", "jobs_dir": str(tmp_path / "configured"), "max_jobs": 4}}))
    d = dispatcher_for(worker)  # no flag: the store's config asks for a dispatcher
    assert (d.settings.mode, d.settings.max_jobs, d.jobs.root) == ("local", 4, tmp_path / "configured")
    # a dry run only plans: no Jobs, none of their folders made
    dry = dispatcher_for(worker, dry_run=True, jobs_dir=str(tmp_path / "dry"))
    assert dry.jobs is None and dry.settings.max_jobs == 4 and not (tmp_path / "dry").exists()
    assert dry.prices.source == PriceList.table().source
    # hf-jobs where no namespace can be found: a dry run plans with the table, a real one says what is missing
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"dispatch": {"mode": "hf-jobs"}}))
    assert dispatcher_for(worker, dry_run=True).prices.source == PriceList.table().source
    with pytest.raises(StoreError, match="needs a namespace for the Jobs"):
        dispatcher_for(worker)


def test_a_hub_dispatcher_plans_with_the_hubs_prices_dry_or_not(hub):
    from rexrank.backend.dispatch import dispatcher_for
    from rexrank.backend.jobs import HubJobs
    from support.dispatch_fixtures import ORG

    hub.job_prices["l4x1"] = 0.95
    worker = Worker(open_store(f"hf://{ORG}", quota=Quota(0)), metrics="bleu2", worker_id="w")
    for dry_run in (True, False):
        d = dispatcher_for(worker, dry_run=dry_run, mode="hf-jobs", flavor="l4x1")
        assert d.prices.source == "the Hub's list_jobs_hardware()" and d.prices.per_hour["l4x1"] == pytest.approx(0.95)
        assert (d.jobs is None) if dry_run else (isinstance(d.jobs, HubJobs) and d.jobs.namespace == ORG)
    # a local dispatcher does not ask the Hub, even where it answers
    asked = sum(r == "GET /api/jobs/hardware" for r in hub.requests)
    assert dispatcher_for(worker, dry_run=True, mode="local", flavor="l4x1").prices.per_hour["l4x1"] != 0.95
    assert sum(r == "GET /api/jobs/hardware" for r in hub.requests) == asked


def test_a_request_no_longer_held_leaves_its_jobs_to_the_holder_unless_held_for_review(tmp_path, monkeypatch, caplog):
    from rexrank.backend.jobs import JobState
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    rid = submit(store)["id"]
    jobs = InProcessJobs(str(tmp_path / "s"))
    for job_id in ("j1", "j2"):
        jobs.jobs[job_id] = JobState(job_id, "RUNNING", labels={"rexrank-request": rid})
    d = dispatcher(store, jobs)
    dropped: list[str] = []
    monkeypatch.setattr(store, "drop_shard_outputs", dropped.append)
    taken = {**store.get_request(rid), "status": "RUNNING", "worker": "another"}
    monkeypatch.setattr(store, "get_request", lambda request_id: taken if request_id == rid else None)
    with caplog.at_level("WARNING", logger="rexrank"):
        assert d._let_go(rid) is taken
    assert {j.stage for j in jobs.jobs.values()} == {"RUNNING"} and dropped == []  # the holder's now
    assert caplog.messages == [f"{rid}: no longer held by this dispatcher (its lease passed to another, or it "
                               "settled): its Jobs and shard outputs are left to the holder"]
    caplog.clear()
    held = {**taken, "status": "HELD", "worker": None}
    monkeypatch.setattr(store, "get_request", lambda request_id: held if request_id == rid else None)
    with caplog.at_level("WARNING", logger="rexrank"):
        assert d._let_go(rid) is held
    assert {j.stage for j in jobs.jobs.values()} == {"CANCELED"} and dropped == [rid]  # no holder: they stop
    assert caplog.messages == [f"{rid}: held for the maintainers' review (rexrank review): its Jobs are cancelled and "
                               "its shard outputs removed; released, it is scored again"]

    def unreachable(request_id):
        raise StoreError("503 Service Unavailable")

    monkeypatch.setattr(store, "get_request", unreachable)
    jobs.jobs["j3"] = JobState("j3", "RUNNING", labels={"rexrank-request": rid})
    assert d._let_go(rid) is None and jobs.jobs["j3"].stage == "RUNNING" and dropped == [rid]


def test_a_dry_run_describes_each_pending_requests_plan_or_why_there_is_none(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from rexrank.backend.dispatch import describe_plans
    from rexrank.backend.shards import PlanError
    from rexrank.errors import TestSetError
    from support.requests import variant

    store = open_store(tmp_path / "s", quota=Quota(0))
    idle = Dispatcher(Worker(store, metrics="bleu2", worker_id="w"), None, DispatchSettings(mode="local", flavor="l4x1"))
    assert describe_plans(idle).splitlines() == [
        f"dispatch local: up to 4 Job(s) at once, Job timeout 21600 s, 3 attempt(s) per shard; prices: {idle.prices.source}",
        "no PENDING request"]
    ids = [submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(6)]
    store.cancel(ids.pop(), reason="withdrawn")  # settled: not planned
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="w"), None,
                   DispatchSettings(mode="local", flavor="l4x1", max_jobs=2, shard_attempts=2, gpu_hours_ceiling=1.0,
                                    target_wall=600))
    real_resolve = d.worker.resolve
    monkeypatch.setattr(d.worker, "resolve", lambda r: (None, "its ids are not the test set's") if r["id"] == ids[0]
                        else real_resolve(r))
    answers = iter([PlanError("shards of 1 study exceed the Job timeout"), TestSetError("no file at /data/example.json"),
                    SimpleNamespace(gpu_hours=1.01, describe=lambda: "plan three"),
                    SimpleNamespace(gpu_hours=1.0, describe=lambda: "plan four")])

    def plan(resolved):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(d, "plan", plan)
    assert describe_plans(d).split("\n") == [
        "dispatch local: up to 2 Job(s) at once, Job timeout 21600 s, 2 attempt(s) per shard, ceiling 1 GPU-hours per "
        f"request, target wall 600 s; prices: {d.prices.source}",
        f"{ids[0]}: would be refused: its ids are not the test set's",
        f"{ids[1]} (example/findings): the dispatcher would stop (its settings cannot plan it): shards of 1 study exceed "
        "the Job timeout",
        f"{ids[2]} (example/findings): cannot load test set 'example' (no file at /data/example.json); the dispatcher "
        "would stop — fix its --data-dir",
        f"{ids[3]} (example/findings): — over the ceiling of 1 GPU-hours: would be refused", "plan three",
        f"{ids[4]} (example/findings):", "plan four"]


def test_a_failure_stops_the_jobs_and_settles_the_request_only_while_this_dispatcher_holds_it(tmp_path, monkeypatch,
                                                                                              caplog):
    from types import SimpleNamespace

    from rexrank.backend import public_door as door
    from rexrank.backend.jobs import JobState
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    rid = submit(store)["id"]
    jobs = InProcessJobs(str(tmp_path / "s"))
    d = dispatcher(store, jobs)
    calls: list[tuple] = []

    def recorded(request_id, worker_id, dispatch):
        calls.append(("record", request_id, dispatch["plan"]))
        return True

    monkeypatch.setattr(d.worker, "hold_for_slot", lambda resolved: calls.append(("slot", resolved)))
    monkeypatch.setattr(store, "fail", lambda request_id, worker_id, *, error, kind:
                        calls.append(("fail", request_id, worker_id, error, kind)) or True)
    monkeypatch.setattr(store, "drop_shard_outputs", lambda request_id: calls.append(("drop", request_id)))
    monkeypatch.setattr(store, "record_dispatch", recorded)

    def running(job_id):
        jobs.jobs[job_id] = JobState(job_id, "RUNNING", labels={"rexrank-request": rid, "rexrank-shard": "0",
                                                                "rexrank-attempt": "1"})

    held, lost = SimpleNamespace(lost=threading.Event()), SimpleNamespace(lost=threading.Event())
    lost.lost.set()
    private, public = SimpleNamespace(private=True), SimpleNamespace(private=False)
    # held, private, internal: its Jobs cancelled and recorded, the publication slot waited for, FAILED
    # with the private message (a Job's log can quote private data), its outputs removed
    running("j1")
    assert d._fail(rid, {"ranges": [[0, 19]]}, ("a Job's log quoting a study", "internal"), private, held) == \
        store.get_request(rid)
    assert jobs.jobs["j1"].stage == "CANCELED"
    assert calls == [("record", rid, {"ranges": [[0, 19]]}), ("slot", private),
                     ("fail", rid, "d", door.PRIVATE_INTERNAL_ERROR, "internal"), ("drop", rid)]
    # public, another kind: its own message and kind, no slot
    calls.clear()
    d._fail(rid, {}, ("its predictions are not the test set's", "refused"), public, held)
    assert calls == [("record", rid, {}), ("fail", rid, "d", "its predictions are not the test set's", "refused"),
                     ("drop", rid)]
    # the Jobs cannot be recorded (the store's moment): said, and the request fails all the same

    def unrecordable(request_id, worker_id, dispatch):
        raise StoreError("503 Service Unavailable")

    calls.clear()
    monkeypatch.setattr(store, "record_dispatch", unrecordable)
    with caplog.at_level("WARNING", logger="rexrank"):
        d._fail(rid, {}, ("the judge gave no answer", "internal"), public, held)
    assert f"{rid}: could not record its Jobs: 503 Service Unavailable" in caplog.messages
    assert [c[0] for c in calls] == ["fail", "drop"]
    # the lease lost: nothing cancelled, no slot waited for, not failed: the holder decides
    monkeypatch.setattr(store, "record_dispatch", recorded)
    monkeypatch.setattr(d, "_let_go", lambda request_id: calls.append(("let go", request_id)) or "the holder's")
    calls.clear()
    running("j2")
    assert d._fail(rid, {}, ("the judge gave no answer", "internal"), private, lost) == "the holder's"
    assert jobs.jobs["j2"].stage == "RUNNING" and calls == [("record", rid, {}), ("let go", rid)]
    # held until the store says otherwise when failing it: let go, its outputs kept for the holder
    monkeypatch.setattr(store, "fail", lambda request_id, worker_id, *, error, kind: calls.append(("fail",)) and False)
    calls.clear()
    assert d._fail(rid, {}, ("the judge gave no answer", "internal"), public, held) == "the holder's"
    assert calls == [("record", rid, {}), ("fail",), ("let go", rid)]


def test_cancelling_a_requests_jobs_records_each_and_says_what_the_service_refused(tmp_path, monkeypatch, caplog):
    from rexrank.backend.jobs import JobState

    store = open_store(tmp_path / "s", quota=Quota(0))
    jobs = InProcessJobs(str(tmp_path / "s"))
    jobs.jobs["j1"] = JobState("j1", "RUNNING", labels={"rexrank-request": "r", "rexrank-shard": "2",
                                                        "rexrank-attempt": "3"}, flavor="l4x1")
    jobs.jobs["j2"] = JobState("j2", "ERROR", labels={"rexrank-request": "r", "rexrank-shard": "0",
                                                      "rexrank-attempt": "1"}, flavor="l4x1")
    jobs.jobs["j3"] = JobState("j3", "RUNNING", labels={"rexrank-request": "r"}, flavor="l4x1")  # no shard labels
    jobs.jobs["x"] = JobState("x", "RUNNING", labels={"rexrank-request": "other"}, flavor="l4x1")
    d = dispatcher(store, jobs)
    real_cancel = jobs.cancel

    def cancel(job_id):
        if job_id == "j3":
            raise JobsError("403 Forbidden: not your Job")
        real_cancel(job_id)

    monkeypatch.setattr(jobs, "cancel", cancel)
    with caplog.at_level("INFO", logger="rexrank"):
        d._cancel_all("r")
    assert {k: j.stage for k, j in jobs.jobs.items()} == {"j1": "CANCELED", "j2": "ERROR", "j3": "RUNNING",
                                                         "x": "RUNNING"}
    assert [(e["job_id"], e["shard"], e["attempt"], e["state"]) for e in d._records["r"]] == [
        ("j1", 2, 3, "CANCELED"), ("j2", 0, 1, "ERROR"), ("j3", -1, 0, "RUNNING")]  # j3 may still run, and bill
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "r: cancelled Job j1"), ("ERROR", "r: 403 Forbidden: not your Job")]

    def unlisted(labels):
        raise JobsError("502 Bad Gateway")

    monkeypatch.setattr(jobs, "list", unlisted)
    caplog.clear()
    with caplog.at_level("INFO", logger="rexrank"):
        d._cancel_all("r")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "r: could not list its Jobs to cancel them: 502 Bad Gateway")]


# ---- the merge ---------------------------------------------------------------------------------------

def test_the_shards_are_read_again_over_the_stores_passing_faults_while_the_request_is_held(tmp_path, monkeypatch,
                                                                                           caplog):
    from types import SimpleNamespace

    import rexrank.backend.shard_job as shard_job
    from rexrank.backend.dispatch import _Shard
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    d = dispatcher(store, None, poll=1.0)
    shards = [_Shard(0, attempt=2), _Shard(1, attempt=1)]
    faults = iter([True] * 9)  # the first nine reads fail, the rest answer

    def read_shard(store_, rid, shard, attempt):
        if next(faults, False):
            raise StoreError("503 Service Unavailable\nretry later")
        return ("summary", shard, attempt)

    monkeypatch.setattr(shard_job, "read_shard", read_shard)
    keeper, stop = SimpleNamespace(lost=threading.Event()), WaitsRecorded()
    with caplog.at_level("WARNING", logger="rexrank"):
        assert d._read_shards("r", shards, keeper, stop) == [("summary", 0, 2), ("summary", 1, 1)]
    # waits doubled from the poll, at most MAX_FAULT_WAIT (300 s)
    assert stop.waits == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0]
    assert caplog.messages == [f"r: 503 Service Unavailable; reading its shards again in {w:.0f} s" for w in stop.waits]
    keeper.lost.set()  # no longer this dispatcher's: nothing read
    assert d._read_shards("r", shards, keeper, stop) is None
    keeper.lost.clear()
    stop.set()
    assert d._read_shards("r", shards, keeper, stop) is None


def test_a_merge_that_fails_fails_the_request_with_its_cause_and_removes_the_outputs(tmp_path, monkeypatch):
    import rexrank.backend.merge as merge

    store, final, merged = dispatched_while_raising(tmp_path, monkeypatch, merge, "merge_shards",
                                                    "shard 2 covers studies [7, 13) twice")
    # every shard's ranges, and "nothing scored" an error as a single worker's on a public set
    assert merged["plan_ranges"] == [[0, 7], [7, 13], [13, 19]] and merged["nothing_scored_is_error"] is True
    assert final["status"] == FAILED and final["failure_kind"] == "internal"
    assert final["error"] == "internal error while scoring (ValueError: shard 2 covers studies [7, 13) twice)"
    assert attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED"), (2, 1, "COMPLETED")]  # the Jobs recorded
    assert final["dispatch"]["plan"]["ranges"] == [[0, 7], [7, 13], [13, 19]] and final["dispatch"]["gpu_seconds"] == {}
    assert store.list_results() == [] and no_shard_outputs(store, final["id"])


# ---- what a shard's output says ------------------------------------------------------------------

def failing_shard(monkeypatch, exc: Exception, start: int) -> None:
    """The shard whose studies start at `start` raises `exc` while it scores (each attempt)."""
    from rexrank.backend.worker import Worker as ShardWorker

    real = ShardWorker.score_studies

    def score_studies(self, resolved, span=None):
        if span is not None and span[0] == start:
            raise exc
        return real(self, resolved, span)

    monkeypatch.setattr(ShardWorker, "score_studies", score_studies)


def test_a_shard_that_fails_for_a_reason_no_retry_changes_fails_the_request_at_once(tmp_path, monkeypatch):
    from rexrank.errors import MetricError

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    failing_shard(monkeypatch, MetricError("bleu2 cannot load its tokenizer"), start=7)
    jobs = InProcessJobs(str(tmp_path / "s"))
    final = dispatched(store, jobs, req["id"])
    assert final["status"] == FAILED and final["failure_kind"] == "coverage"
    assert final["error"] == ("a metric of this backend's set could not run, so it scored none of the studies: bleu2 "
                              "cannot load its tokenizer. Nothing was published; the maintainers can requeue this "
                              "request once the cause is fixed.")
    assert [a for s, a, _ in attempts(final) if s == 1] == [1]  # not tried again


def test_a_shards_own_failure_is_the_cause_it_is_retried_for(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    failing_shard(monkeypatch, ValueError("a study's report is not text"), start=7)
    jobs = InProcessJobs(str(tmp_path / "s"))
    final = dispatched(store, jobs, req["id"], shard_attempts=2)
    assert final["status"] == FAILED and final["error"] == (
        "internal error while scoring: shard 2 of 3 failed 2 time(s); last cause: internal error while scoring "
        "(ValueError: a study's report is not text)")


def test_jobs_that_finished_while_no_dispatcher_held_the_request_are_merged_not_run_again(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    jobs = InProcessJobs(str(tmp_path / "s"))
    jobs.go.clear()
    first_stop = threading.Event()
    thread = in_thread(lambda: dispatcher(store, jobs, worker_id="first", lease=1.0).run(stop=first_stop))
    wait_for(lambda: len(jobs.jobs) == 3, timeout=SETTLES_WITHIN, what="three running Jobs")
    first_stop.set()
    thread.join(SETTLES_WITHIN)
    jobs.go.set()  # they finish while nobody holds the request
    wait_for(lambda: {j.stage for j in jobs.jobs.values()} == {"COMPLETED"}, timeout=SETTLES_WITHIN, what="done")
    final = settled_by_another(tmp_path / "s", jobs, req["id"])
    assert final["status"] == FINISHED and final["worker"] == "second", final.get("error")
    assert len(jobs.jobs) == 3 and attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED"), (2, 1, "COMPLETED")]
    assert len(store.list_results()) == 1 and no_shard_outputs(store, req["id"])


def test_who_holds_a_request_as_the_dispatcher_sees_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from rexrank.backend.dispatch import CANCELLED, GONE, HELD
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    d = dispatcher(store, None, worker_id="me")
    keeper = SimpleNamespace(lost=threading.Event())

    def holder(record):
        monkeypatch.setattr(store, "get_request", lambda rid: record)
        return d._holder("r", keeper)

    assert holder({"status": "RUNNING", "worker": "me"}) == HELD
    assert holder({"status": "RUNNING", "worker": "another"}) == GONE
    assert holder({"status": "FINISHED", "worker": "me"}) == GONE
    assert holder({"status": "FAILED", "worker": None, "failure_kind": "cancelled"}) == CANCELLED
    assert holder({"status": "FAILED", "worker": "me", "failure_kind": "internal"}) == GONE
    keeper.lost.set()
    assert holder({"status": "RUNNING", "worker": "me"}) == GONE  # its lease ran out: another may hold it

    def unreachable(rid):
        raise StoreError("503 Service Unavailable")

    monkeypatch.setattr(store, "get_request", unreachable)  # the store's moment: the lease keeper decides
    assert d._holder("r", keeper) == GONE
    keeper.lost.clear()
    assert d._holder("r", keeper) == HELD


def test_the_merge_publishes_once_and_leaves_a_request_it_no_longer_holds(tmp_path, monkeypatch, caplog):
    from types import SimpleNamespace

    import rexrank.backend.merge as merge
    from rexrank.backend.dispatch import _Shard

    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), None)
    keeper, public = SimpleNamespace(lost=threading.Event()), SimpleNamespace(private=False)
    steps: list = []
    monkeypatch.setattr(d, "_let_go", lambda rid: steps.append(("let go", rid)) or "the holder's")
    monkeypatch.setattr(d, "_drop_scratch", lambda rid: steps.append(("drop", rid)))
    monkeypatch.setattr(d, "_save", lambda rid, plan_json, gpu_seconds=None: steps.append(("save", gpu_seconds)))
    # lost while its shards were read: left to the holder, nothing merged
    monkeypatch.setattr(d, "_read_shards", lambda rid, shards, keeper, stop: None)
    assert d._merge_and_publish({"id": "r"}, public, [], {"ranges": []}, keeper, threading.Event()) == "the holder's"
    assert steps == [("let go", "r")]
    # read: a shard of no study (a tiny track, K from the whole set) adds nothing to the merge
    monkeypatch.setattr(d, "_read_shards", lambda rid, shards, keeper, stop: ["part 0", "part 1"])
    merged: list = []

    def merge_shards(parts, *, plan_ranges, header, nothing_scored_is_error):
        merged.append((parts, plan_ranges))
        return {"metrics": {"bleu2": {"seconds": 1.5}}}, "per-study table"

    monkeypatch.setattr(merge, "merge_shards", merge_shards)
    monkeypatch.setattr(d.worker, "whole_header", lambda resolved: {})
    monkeypatch.setattr(d.worker, "published_parts", lambda resolved, results, table: ("record", "per study"))
    shards, plan = [_Shard(0), _Shard(1)], {"ranges": [[0, 19], [19, 19]]}
    for settled, then in (({"status": "FINISHED", "worker": "d"}, [("drop", "r")]),  # published by this one
                          ({"status": "FINISHED", "worker": "another"}, []),  # by the holder: its outputs
                          ({"status": "HELD", "worker": None}, [("let go", "r")])):  # held for review at publication
        steps.clear()
        caplog.clear()
        monkeypatch.setattr(d.worker, "publish", lambda request, record, per_study, keeper, settled=settled: settled)
        expected = "the holder's" if settled["status"] == "HELD" else settled
        with caplog.at_level("INFO", logger="rexrank"):
            assert d._merge_and_publish({"id": "r"}, public, shards, plan, keeper, threading.Event()) == expected
        assert steps == [("save", {"bleu2": 1.5}), *then]
        [said] = [m for m in caplog.messages if "merged" in m]
        seconds = re.fullmatch(r"r: merged 2 shard\(s\) in (\d+\.\d{3}) s", said).group(1)
        assert float(seconds) < 60  # the merge's own time
    assert merged == [(["part 0"], [[0, 19]])] * 3
    # a merge that fails for the submission's reason: that kind, the outputs removed, the request returned

    def no_coverage(parts, **kwargs):
        from rexrank.backend.public_door import CoverageError

        raise CoverageError("bleu2 scored 0 of 19 studies", without_causes="bleu2 scored 0 of 19 studies")

    monkeypatch.setattr(merge, "merge_shards", no_coverage)
    failed: list = []
    monkeypatch.setattr(d.store, "fail", lambda rid, worker_id, *, error, kind: failed.append((rid, error, kind)) or True)
    monkeypatch.setattr(d.store, "get_request", lambda rid: ("the request", rid))
    steps.clear()
    assert d._merge_and_publish({"id": "r", "test_set": "example"}, public, shards, plan, keeper,
                                threading.Event()) == ("the request", "r")
    assert failed == [("r", "bleu2 scored 0 of 19 studies", "coverage")] and steps == [("save", {}), ("drop", "r")]


def test_adopting_takes_each_shards_latest_attempt_whatever_order_the_service_lists_them_in(tmp_path, caplog):
    from rexrank.backend.dispatch import _Shard
    from rexrank.backend.jobs import JobState

    class Listed(InProcessJobs):
        def list(self, labels):  # the Hub's listing order is its own: newest first, here
            return list(reversed(super().list(labels)))

    jobs = Listed(str(tmp_path / "s"))
    for job_id, shard, attempt in (("a1", "0", "1"), ("a2", "0", "2"), ("b1", "1", "1")):
        jobs.jobs[job_id] = JobState(job_id, "RUNNING", labels={"rexrank-request": "r", "rexrank-shard": shard,
                                                                "rexrank-attempt": attempt})
    jobs.jobs["hand"] = JobState("hand", "RUNNING", labels={"rexrank-request": "r"})  # started by hand: no shard
    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs)
    d._records["r"] = []
    shards = [_Shard(0), _Shard(1)]
    with caplog.at_level("INFO", logger="rexrank"):
        d._adopt("r", shards)
    assert [(s.attempt, s.job_id) for s in shards] == [(2, "a2"), (1, "b1")]
    assert caplog.messages == [f"r: adopted the running Job {job_id} (shard {shard}, attempt {attempt})"
                               for job_id, shard, attempt in (("b1", 1, 1), ("a1", 0, 1), ("a2", 0, 2))]
    assert sorted((e["job_id"], e["shard"], e["attempt"]) for e in d._records["r"]) == [
        ("a1", 0, 1), ("a2", 0, 2), ("b1", 1, 1)]


def test_the_private_data_repo_is_the_settings_else_the_environments(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    monkeypatch.delenv("REXRANK_PRIVATE_DATA_REPO", raising=False)
    assert dispatcher(store, None)._private_data_repo() is None
    monkeypatch.setenv("REXRANK_PRIVATE_DATA_REPO", "board/from-env")
    assert dispatcher(store, None)._private_data_repo() == "board/from-env"
    assert dispatcher(store, None, private_data_repo="board/configured")._private_data_repo() == "board/configured"
    monkeypatch.setenv("REXRANK_PRIVATE_DATA_REPO", "")
    assert dispatcher(store, None, private_data_repo="")._private_data_repo() is None


def test_one_step_polls_every_shard_then_starts_in_order_what_the_cap_and_the_lease_allow(tmp_path, monkeypatch,
                                                                                          caplog):
    """One `_step` over shards in every state the service and the scratch area can show."""
    from rexrank.backend import shard_job
    from rexrank.backend.dispatch import _Shard
    from rexrank.backend.jobs import JobState

    jobs = InProcessJobs(str(tmp_path / "s"))
    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs, max_jobs=3, shard_attempts=3)
    header, rows = {"shard": 0}, pd.DataFrame({"bleu2": [0.5]})
    outputs = {(0, 1): (header, rows), (5, 1): (header, rows),  # 5: written before its machine stopped
               (6, 1): ({"failed": {"message": "the judge timed out", "kind": "internal"}}, None)}
    monkeypatch.setattr(shard_job, "read_shard", lambda store, rid, shard, attempt: outputs.get((shard, attempt)))
    leases, lease_held, begun = [], [True], []
    monkeypatch.setattr(d.store, "renew_lease", lambda rid, worker_id, lease_seconds:
                        leases.append((rid, worker_id, lease_seconds)) or lease_held[0])
    monkeypatch.setattr(d, "_start", lambda rid, shard, plan_json:
                        begun.append((rid, shard.index, shard.attempt, plan_json)) or f"new-{shard.index}")
    for job_id, stage, message in (("a", "COMPLETED", None), ("b", "ERROR", "Job timeout"), ("d", "RUNNING", None),
                                   ("e", "COMPLETED", None), ("f", "ERROR", None), ("g", "ERROR", None)):
        jobs.jobs[job_id] = JobState(job_id, stage, message)
    d._note("r", JobState("c", "RUNNING"), 2, 1)  # recorded running, then forgotten by the service
    shards = [_Shard(k, attempt=1, failures=0, job_id=job_id) for k, job_id in enumerate("abcdefg")]
    shards.append(_Shard(7, attempt=3, failures=3, cause="its Job ended ERROR"))  # out of attempts, not started
    with caplog.at_level("WARNING", logger="rexrank"):
        assert d._step("r", shards, {"plan": 1}) == (
            "internal error while scoring: shard 8 of 8 failed 3 time(s); last cause: its Job ended ERROR", R.INTERNAL)
    assert caplog.messages == [f"r: shard {k} attempt 1 failed: {cause}" for k, cause in (
        (1, "its Job ended ERROR (Job timeout)"), (2, "its Job c disappeared"), (4, "its Job ended COMPLETED"),
        (5, "its Job ended ERROR"), (6, "the judge timed out"))]
    assert [(s.done, s.job_id, s.failures) for s in shards] == [
        (True, None, 0), (False, "new-1", 1), (False, "new-2", 1), (False, "d", 0), (False, None, 1),
        (False, None, 1), (False, None, 1), (False, None, 3)]
    # polled first, then started in order while the cap allows (shard 3 runs: two more), each
    # start on a renewed lease; shards 4-6 wait for room, and shard 7's failure is seen all the same
    assert begun == [("r", 1, 2, {"plan": 1}), ("r", 2, 2, {"plan": 1})]
    assert leases == [("r", "d", 30.0)] * 2
    assert [(e["job_id"], e["state"]) for e in d._records["r"]] == [
        ("c", "VANISHED"), ("a", "COMPLETED"), ("b", "ERROR"), ("d", "RUNNING"), ("e", "COMPLETED"), ("f", "ERROR"),
        ("g", "ERROR")]
    # the lease lost before a start: nothing starts, and the step ends without a failure
    lease_held[0], begun[:], leases[:] = False, [], []
    waiting = [_Shard(0, attempt=1, failures=1)]
    assert d._step("r", waiting, {}) is None
    assert begun == [] and leases == [("r", "d", 30.0)] and (waiting[0].attempt, waiting[0].job_id) == (1, None)


def test_a_started_job_runs_its_shards_spec_and_is_recorded_as_scheduling(tmp_path, caplog):
    from rexrank.backend.dispatch import _Shard

    class Recorded(InProcessJobs):
        def run(self, **spec):
            self.asked = spec
            return "j7"

    jobs = Recorded(str(tmp_path / "s"))
    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs, job_timeout=1234)
    with caplog.at_level("INFO", logger="rexrank"):
        assert d._start("r", _Shard(2, attempt=3), {"flavor": "l4x1"}) == "j7"
    command, env, secrets = d.job_spec("r", 2, 3)
    assert jobs.asked == {"command": command, "env": env, "secrets": secrets, "flavor": "l4x1", "timeout": 1234,
                          "labels": {"rexrank-request": "r", "rexrank-shard": "2", "rexrank-attempt": "3"}}
    assert caplog.messages == ["r: started Job j7 (shard 2, attempt 3, l4x1)"]
    [entry] = d._records["r"]
    assert (entry["job_id"], entry["shard"], entry["attempt"], entry["flavor"], entry["state"]) == (
        "j7", 2, 3, "l4x1", "SCHEDULING")


def test_a_local_job_runs_this_installations_rexrank_command_line():
    import subprocess

    from rexrank import __version__
    from rexrank.backend.dispatch import default_job_command

    out = subprocess.run([*default_job_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, f"rexrank {__version__}")


def test_after_a_replan_the_running_jobs_are_cancelled_and_only_their_attempt_numbers_count(tmp_path, caplog):
    from rexrank.backend.dispatch import _Shard
    from rexrank.backend.jobs import JobState

    jobs = InProcessJobs(str(tmp_path / "s"))
    for job_id, stage, labels in (("done", "COMPLETED", {"rexrank-shard": "0", "rexrank-attempt": "1"}),
                                  ("busy", "RUNNING", {"rexrank-shard": "1", "rexrank-attempt": "2"}),
                                  ("hand", "RUNNING", {})):  # started by hand: no shard, no attempt
        jobs.jobs[job_id] = JobState(job_id, stage, labels={"rexrank-request": "r", **labels}, flavor="l4x1")
    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs)
    d._records["r"] = []
    shards = [_Shard(0), _Shard(1)]
    with caplog.at_level("INFO", logger="rexrank"):
        d._adopt("r", shards, replanned=True)
    assert {k: j.stage for k, j in jobs.jobs.items()} == {"done": "COMPLETED", "busy": "CANCELED", "hand": "CANCELED"}
    assert sorted(caplog.messages) == [f"r: cancelled Job {job_id} of the replaced plan" for job_id in ("busy", "hand")]
    assert sorted((e["job_id"], e["shard"], e["attempt"], e["state"]) for e in d._records["r"]) == [
        ("busy", 1, 2, "CANCELED"), ("hand", -1, 0, "CANCELED")]
    # nothing adopted, nothing done: the new plan numbers its attempts after theirs
    assert [(s.attempt, s.job_id, s.done, s.failures) for s in shards] == [(1, None, False, 0), (2, None, False, 0)]


def test_a_shard_adopted_with_its_output_is_done_and_takes_no_room_under_the_jobs_cap(tmp_path, monkeypatch):
    from rexrank.backend import shard_job
    from rexrank.backend.dispatch import _Shard
    from rexrank.backend.jobs import JobState

    jobs = InProcessJobs(str(tmp_path / "s"))
    jobs.jobs["a1"] = JobState("a1", "COMPLETED", labels={"rexrank-request": "r", "rexrank-shard": "0",
                                                          "rexrank-attempt": "1"})
    output = ({"shard": 0}, pd.DataFrame({"bleu2": [0.5]}))
    monkeypatch.setattr(shard_job, "read_shard", lambda store, rid, shard, attempt:
                        output if (shard, attempt) == (0, 1) else None)
    d = dispatcher(open_store(tmp_path / "s", quota=Quota(0)), jobs, max_jobs=1)
    d._records["r"] = []
    shards = [_Shard(0), _Shard(1)]
    d._adopt("r", shards)
    assert [(s.done, s.job_id, s.attempt) for s in shards] == [(True, None, 1), (False, None, 0)]
    begun = []
    monkeypatch.setattr(d.store, "renew_lease", lambda rid, worker_id, lease_seconds: True)
    monkeypatch.setattr(d, "_start", lambda rid, shard, plan_json: begun.append(shard.index) or "j")
    assert d._step("r", shards, {}) is None and begun == [1]  # the one Job the cap allows


def test_shard_outputs_that_cannot_be_removed_are_left_and_said(tmp_path, monkeypatch, caplog):
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))

    def unremovable(request_id):
        raise StoreError("503 Service Unavailable")

    monkeypatch.setattr(store, "drop_shard_outputs", unremovable)
    with caplog.at_level("WARNING", logger="rexrank"):
        dispatcher(store, None)._drop_scratch("r")
    assert caplog.messages == ["r: could not remove its shard outputs: 503 Service Unavailable"]


def test_a_request_the_workers_loop_fails_has_its_jobs_cancelled_and_its_outputs_removed(tmp_path, monkeypatch):
    """The worker's loop settles a request FAILED after an unexpected error (or out of attempts)
    outside the dispatcher's own handling: the dispatcher is told, and stops what it started."""
    from rexrank.backend.jobs import JobState

    store = open_store(tmp_path / "s", quota=Quota(0))
    jobs = InProcessJobs(str(tmp_path / "s"))
    jobs.jobs["j1"] = JobState("j1", "RUNNING", labels={"rexrank-request": "r", "rexrank-shard": "0",
                                                        "rexrank-attempt": "1"})
    d = dispatcher(store, jobs)
    dropped: list[str] = []
    monkeypatch.setattr(store, "drop_shard_outputs", dropped.append)

    def settled_failed_by_the_loop(handle=None, on_failed=None):
        on_failed("r")
        return {"id": "r", "status": FAILED}

    monkeypatch.setattr(d.worker, "process_next", settled_failed_by_the_loop)
    assert d.process_next() == {"id": "r", "status": FAILED}
    assert jobs.jobs["j1"].stage == "CANCELED" and dropped == ["r"]
