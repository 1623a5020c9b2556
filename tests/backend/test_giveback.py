"""A give-back after our own fault (the Hub's passing fault, a machine-side kill of the
predictions reader) is neither a failure of the request, nor a second publication with a
second noise draw, nor a loop that claims the same request again at once."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rexrank.backend.worker import Worker
from rexrank.store import FINISHED, PENDING, Quota, open_store
from rexrank.errors import TestSetError
from rexrank.store.repo import StoreUnreachable
from rexrank.testsets.loading import resolve_test_set
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)
from support.dispatch_fixtures import ThreadJobs, in_thread, logged, run_once_unless, wait_for
from support.requests import submit


def fail_once(obj, name: str, exc: Exception) -> list:
    """`obj.name` raises `exc` at its first call, then works; the list counts the calls."""
    real, calls = getattr(obj, name), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise exc
        return real(*args, **kwargs)

    setattr(obj, name, flaky)
    return calls


def noise_draws(monkeypatch) -> list:
    """Each time a private result's numbers are noised (rexrank.backend.privacy.private_results)."""
    from rexrank.backend import privacy

    draws, real = [], privacy.private_results
    monkeypatch.setattr(privacy, "private_results", lambda results, **kw: draws.append(1) or real(results, **kw))
    return draws


def test_a_private_result_whose_finish_met_a_passing_fault_is_published_once(tmp_path, private_set, monkeypatch):
    """FINISHED's commit meets a 503 after the result is out: the request is not given back
    to be scored and published again with a fresh noise draw (one ε charge, two draws)."""
    data_dir, preds = private_set
    draws = noise_draws(monkeypatch)
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    fail_once(store, "finish", StoreUnreachable("the Hub answered 503"))
    worker = Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w", min_coverage=0.5, lease_seconds=0.5)
    worker.run(once=True)
    held = store.get_request(req["id"])
    assert held["status"] == "RUNNING" and not any(h.get("given_back") for h in held["history"])  # not given back
    deadline = time.time() + 60
    while store.get_request(req["id"])["status"] != FINISHED:  # its lease ends; the next claim settles it
        assert time.time() < deadline, store.get_request(req["id"])
        worker.run(once=True)
        time.sleep(0.1)
    assert draws == [1] and len(store.list_results()) == 1


def given_back(request: dict) -> bool:
    return any(h.get("given_back") for h in request["history"])


def test_a_passing_fault_reading_the_predictions_gives_the_request_back(tmp_path):
    """The stored predictions' read meets a 503 while the worker scores: PENDING again, then
    scored (it used to FAIL as an internal error, counting against the quota)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    fail_once(store, "read_predictions", StoreUnreachable("the Hub answered 503"))
    worker = Worker(store, metrics="bleu2", worker_id="w")
    worker.run(once=True)
    worker.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert given_back(final) and [h["status"] for h in final["history"]].count("FAILED") == 0


def dispatcher(tmp_path, store, *, data_dir=None, metrics: str = "bleu2", **settings):
    """A dispatcher on the local store tmp_path/s whose Jobs run in this process's threads."""
    from rexrank.backend.dispatch import Dispatcher, DispatchSettings

    s = DispatchSettings(**{**dict(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.05),
                            **settings})
    worker = Worker(store, data_dir=data_dir, metrics=metrics, worker_id="d", min_coverage=0.5)
    return Dispatcher(worker, ThreadJobs(str(tmp_path / "s"), data_dir), s)


def test_a_passing_fault_at_the_dispatchers_merge_gives_the_request_back(tmp_path):
    """The merge's read of the predictions (the whole request's header) meets a 503: the
    request is given back and merged from the same shards (it used to FAIL)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    d = dispatcher(tmp_path, store)
    reads = fail_once(store, "read_predictions", StoreUnreachable("the Hub answered 503"))
    d.run(once=True)
    d.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert given_back(final) and len(reads) == 2
    assert len(d.jobs.jobs) == 3  # the shards scored once, adopted after the give-back


def test_a_dispatcher_that_cannot_load_the_test_set_gives_the_request_back_and_stops(tmp_path, private_set):
    """As the worker does: the plan reads the test set, this machine has no copy of it (an
    empty --data-dir). It used to FAIL the request (counting against the quota on a
    private set), and `--dry-run` crashed."""
    from rexrank.backend.dispatch import describe_plans
    from rexrank.backend.worker import BackendStop

    _, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    empty = tmp_path / "no-data"
    empty.mkdir()
    d = dispatcher(tmp_path, store, data_dir=empty)
    assert "cannot load test set" in describe_plans(d)
    with pytest.raises(BackendStop, match=r"cannot load test set 'rexgradient' .* PENDING again .*--data-dir") as stop:
        d.run(once=True)
    with pytest.raises(TestSetError) as cause:  # what this machine lacks, said in the stop
        resolve_test_set("rexgradient", "findings", data_dir=empty)
    assert f"({cause.value})" in str(stop.value)
    final = store.get_request(req["id"])
    assert final["status"] == PENDING and given_back(final) and d.jobs.jobs == {}


def test_a_hub_dispatcher_without_a_private_data_repo_gives_a_private_request_back_and_stops(tmp_path, private_set,
                                                                                           monkeypatch):
    """Hub Jobs read a private set from the organisers' private data repo: without one set, the
    request is given back before anything is planned or started, and the dispatcher stops
    saying which setting to make."""
    from rexrank.backend.worker import BackendStop

    monkeypatch.delenv("REXRANK_PRIVATE_DATA_REPO", raising=False)
    data, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    d = dispatcher(tmp_path, store, data_dir=data, mode="hf-jobs")
    with pytest.raises(BackendStop) as stop:
        d.run(once=True)
    assert str(stop.value) == (
        f"request {req['id']} is on the private test set 'rexgradient': Hub Jobs read it from a private data repo; "
        "set private_data_repo in config.json's dispatch settings (or $REXRANK_PRIVATE_DATA_REPO) and start the "
        "dispatcher again; the request is PENDING again")
    final = store.get_request(req["id"])
    assert final["status"] == PENDING and final["history"][-1]["note"] == "the dispatcher has no private data repo for its Jobs"
    assert given_back(final) and final.get("attempts", 0) == 0 and d.jobs.jobs == {}


class RecordingClock:
    """The machine's time, with each wait for a publication slot recorded (and not waited)."""

    def __init__(self, events: list):
        self.events = events

    def now(self) -> float:
        return time.time()

    def wait_until(self, when: float) -> None:
        self.events.append("slot")


def record_calls(obj, name: str, events: list) -> None:
    real = getattr(obj, name)
    setattr(obj, name, lambda *a, **kw: events.append(name) or real(*a, **kw))


def test_a_damaged_shard_output_fails_a_private_request_at_its_slot(tmp_path, private_set, monkeypatch, caplog):
    """A shard's JSON that does not parse (a ValueError, not a store error) while the
    dispatcher polls: the private request FAILs with the fixed sentence at its publication
    slot, its Jobs stopped (it used to reach the loop's catch-all: FAILED at once)."""
    from rexrank.backend import shard_job
    from rexrank.backend.public_door import PRIVATE_INTERNAL_ERROR
    from rexrank.store import FAILED
    from rexrank.store import records as R

    def damaged(store, request_id, shard, attempt, **kw):
        json_path, _ = R.shard_paths(request_id, shard, attempt)
        shard_job._write(store, {json_path: b'{"request_id": '})
        return 0

    monkeypatch.setattr(shard_job, "run_shard", damaged)
    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    d = dispatcher(tmp_path, store, data_dir=data_dir)
    events: list = []
    d.worker.clock = RecordingClock(events)
    record_calls(store, "fail", events)
    caplog.set_level("ERROR", logger="rexrank")
    errors = lambda: logged(caplog, "unexpected error while polling")  # noqa: E731
    run_once_unless(d, lambda: len(errors()) > 1)  # polled again after the error: it would never settle
    assert len(errors()) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["error"] == PRIVATE_INTERNAL_ERROR
    assert events == ["slot", "fail"]


@pytest.mark.parametrize("stale", [{"rexrank_version": "0.0.1"}, {"metric_options": {"bleu2": {"smoothing": "x"}}}],
                         ids=["an earlier rexrank", "other metric options"])
def test_a_restarted_dispatcher_replans_when_its_build_or_options_changed(tmp_path, stale, caplog):
    """The record keeps the plan of a dispatcher that ran an earlier build (or other metric
    options) over the same ranges and metrics: after the upgrade the plan is made again
    (it was reused, its version and options won in every Job, and the request FAILED)."""
    from rexrank import __version__
    from rexrank.backend.resolved import resolve_request

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    d = dispatcher(tmp_path, store)
    old = {**d.plan(resolve_request(req)).to_json(), "metric_options": {}, "rexrank_version": __version__, **stale}
    claimed = store.claim("old-dispatcher", lease_seconds=60)
    store.record_dispatch(req["id"], "old-dispatcher", {"plan": old, "jobs": []})
    # the old dispatcher's Jobs: shard 0 finished (its output is of the old plan), shard 1 still running
    finished = old_job(d.jobs, req["id"], 0, "COMPLETED")
    write_old_output(store, req["id"], 0)
    running = old_job(d.jobs, req["id"], 1, "RUNNING")
    store.release(req["id"], "old-dispatcher", reason="stopped for the upgrade")
    assert claimed["id"] == req["id"]
    caplog.set_level("INFO", logger="rexrank")
    adopted = lambda: logged(caplog, "adopted the running Job")  # noqa: E731
    run_once_unless(d, adopted)  # one that adopted the old Jobs would wait for the running one for ever
    assert adopted() == []
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    plan = final["dispatch"]["plan"]
    assert plan["rexrank_version"] == __version__ and plan["metric_options"] == {}
    assert running.stage == "CANCELED" and finished.stage == "COMPLETED"
    assert attempts(final) == [(0, 2, "COMPLETED"), (1, 1, "CANCELED"), (1, 2, "COMPLETED"), (2, 1, "COMPLETED")]


def old_job(jobs, request_id: str, shard: int, stage: str):
    """A Job an earlier dispatcher started (attempt 1), in the in-process Jobs service."""
    job = jobs.State(f"old{shard}", stage, None, {"rexrank-request": request_id, "rexrank-shard": str(shard),
                                                  "rexrank-attempt": "1"}, "cpu-basic", time.time())
    jobs.jobs[job.job_id] = job
    return job


def write_old_output(store, request_id: str, shard: int) -> None:
    """An output of an earlier build for attempt 1 of `shard` (the merge refuses it)."""
    from rexrank.backend import shard_job
    from rexrank.store import records as R

    json_path, parquet_path = R.shard_paths(request_id, shard, 1)
    shard_job._write(store, {json_path: R.dumps({"format": 2, "code": "0.0.1+old", "request_id": request_id}),
                             parquet_path: shard_job._empty_table()})


def attempts(request) -> list[tuple[int, int, str]]:
    return sorted((j["shard"], j["attempt"], j["state"]) for j in request["dispatch"]["jobs"])


class FrozenJobs(ThreadJobs):
    """A Jobs service whose Jobs run until cancelled (they score nothing)."""

    def __init__(self):
        super().__init__("", None)

    def run(self, *, command, env, secrets, flavor, timeout, labels):
        job = self.State(f"f{len(self.jobs)}", "RUNNING", None, dict(labels), flavor, time.time())
        self.jobs[job.job_id] = job
        return job.job_id


def shard_outputs(tmp_path, rid: str) -> list:
    return list((tmp_path / "s" / "requests" / "scratch").glob(f"{rid}/*"))


def test_a_dispatched_request_held_for_review_has_its_jobs_and_shard_outputs_stopped(tmp_path, caplog):
    """An original filed later (its content reached the Hub first) holds the request a
    dispatcher runs: its Jobs are cancelled and its shard outputs removed (the dispatcher
    used to read HELD as "taken over" and leave both with no owner), and the log says held."""
    import logging

    from rexrank.backend.dispatch import Dispatcher, DispatchSettings
    from rexrank.backend.shard_job import _write
    from rexrank.store import records as R
    from support.requests import example_rows, write_jsonl

    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = example_rows()
    copy = submit(store, write_jsonl(tmp_path / "b.jsonl", rows), submitter="bob", model_name="B")
    jobs = FrozenJobs()
    s = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.05)
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), jobs, s)
    stop = threading.Event()
    thread = in_thread(lambda: d.run(stop=stop))
    try:
        wait_for(lambda: len(jobs.jobs) == 3, timeout=60, what="three running Jobs")
        json_path, _ = R.shard_paths(copy["id"], 0, 1)
        _write(store, {json_path: b'{"request_id": "..."}'})  # a shard's output, as a Job writes it
        caplog.set_level(logging.INFO, logger="rexrank")
        earlier = R.parse_iso(copy["submitted_time"]) - 60
        submit(store, write_jsonl(tmp_path / "a.jsonl", rows), submitter="alice", model_name="A", now=earlier)
        assert store.get_request(copy["id"])["status"] == "HELD"
        wait_for(lambda: all(j.stage == "CANCELED" for j in jobs.jobs.values() if j.labels["rexrank-request"] == copy["id"])
                 and not shard_outputs(tmp_path, copy["id"]), timeout=60, what="the Jobs cancelled and the outputs removed")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert f"{copy['id']}: held for the maintainers' review" in caplog.text
    assert "its lease passed to another" not in caplog.text


def test_a_held_request_is_rejected_with_its_shard_outputs_and_jobs_and_not_cancelled(tmp_path, capsys, monkeypatch):
    """`rexrank review --reject` removes a held request's shard outputs and cancels its Jobs;
    `rexrank cancel` on a held request says to use review."""
    from rexrank.backend import dispatch
    from rexrank.backend.shard_job import _write
    from rexrank.cli.main import main
    from rexrank.store import records as R
    from support.requests import example_rows, write_jsonl

    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = example_rows()
    copy = submit(store, write_jsonl(tmp_path / "b.jsonl", rows), submitter="bob", model_name="B")
    claimed = store.claim("d", lease_seconds=60)
    store.record_dispatch(claimed["id"], "d", {"plan": {"ranges": [[0, 19]]}, "jobs": []})
    json_path, _ = R.shard_paths(copy["id"], 0, 1)
    _write(store, {json_path: b'{"request_id": "..."}'})
    submit(store, write_jsonl(tmp_path / "a.jsonl", rows), submitter="alice", model_name="A",
           now=R.parse_iso(copy["submitted_time"]) - 60)
    assert store.get_request(copy["id"])["status"] == "HELD"
    assert main(["cancel", copy["id"], "--store", str(tmp_path / "s")]) == 1
    assert f"reject it with `rexrank review --reject {copy['id']}`" in capsys.readouterr().err
    cancelled = []
    monkeypatch.setattr(dispatch, "cancel_request_jobs", lambda store, rid: cancelled.append(rid) or 2)
    assert main(["review", "--store", str(tmp_path / "s"), "--reject", copy["id"]]) == 0
    assert "2 running Job(s) cancelled" in capsys.readouterr().out
    assert cancelled == [copy["id"]] and not shard_outputs(tmp_path, copy["id"])


def test_a_persistent_passing_fault_is_given_back_once_per_poll_not_in_a_loop(tmp_path):
    """The Hub keeps answering 503 to the predictions' read: each give-back ends the step,
    so the worker waits its poll before claiming again and `--once` ends (it used to claim
    and give back the same request in a tight loop, for ever with --once)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    claims = []
    real_claim = store.claim
    store.claim = lambda *a, **kw: claims.append(1) or real_claim(*a, **kw)

    def unreachable(request):
        raise StoreUnreachable("the Hub answered 503")

    store.read_predictions = unreachable
    done = []
    thread = in_thread(lambda: done.append(Worker(store, metrics="bleu2", worker_id="w").run(once=True)))
    thread.join(timeout=60)
    assert not thread.is_alive() and done == [0]
    assert len(claims) == 1
    final = store.get_request(req["id"])
    assert final["status"] == PENDING and final["attempts"] == 0 and given_back(final)


def test_a_predictions_reader_killed_by_the_machine_gives_the_request_back(tmp_path, monkeypatch):
    """The reader's child is stopped by the wall clock (an overloaded machine), not by a
    limit the file broke: the request is PENDING again, its attempt not counted (it used
    to FAIL as the submitter's validation error, final and counted on a private set)."""
    from support import sandbox_targets as T
    from rexrank import sandbox

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    real, calls = sandbox.run, []

    def stuck_once(function, args, **kw):  # the first read's child never answers: the server kills it
        calls.append(1)
        if len(calls) == 1:
            return real(T.wait_forever, [], source=kw["source"], limits=sandbox.Limits(wall_seconds=1))
        return real(function, args, **kw)

    monkeypatch.setattr(sandbox, "run", stuck_once)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    worker.run(once=True)
    held = store.get_request(req["id"])
    assert held["status"] == PENDING and held["attempts"] == 0 and given_back(held), held.get("error")
    worker.run(once=True)
    assert store.get_request(req["id"])["status"] == FINISHED


def test_a_shard_whose_reader_the_machine_killed_is_tried_again(tmp_path, monkeypatch):
    """The same in a dispatched shard: another attempt, not a final validation failure."""
    from support import sandbox_targets as T
    from rexrank import sandbox

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    real, calls = sandbox.run, []

    def stuck_once(function, args, **kw):
        calls.append(1)
        if len(calls) == 1:
            return real(T.wait_forever, [], source=kw["source"], limits=sandbox.Limits(wall_seconds=1))
        return real(function, args, **kw)

    monkeypatch.setattr(sandbox, "run", stuck_once)
    d = dispatcher(tmp_path, store, max_jobs=1)
    d.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert [j["attempt"] for j in final["dispatch"]["jobs"] if j["shard"] == 0] == [1, 2]


def test_a_plan_the_organisers_settings_cannot_make_stops_the_dispatcher_instead_of_refusing(tmp_path):
    """A Job timeout too short for any shard is the organisers' setting, not the submitter's
    fault: the request is given back and the dispatcher stops naming the setting (it used
    to be REFUSED for good); --dry-run says the same."""
    from rexrank.backend.dispatch import describe_plans
    from rexrank.backend.worker import BackendStop

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    d = dispatcher(tmp_path, store, job_timeout=1)
    assert "the dispatcher would stop" in describe_plans(d) and "--job-timeout" in describe_plans(d)
    with pytest.raises(BackendStop, match=r"cannot plan request .* with this dispatcher's settings: .*raise "
                                          r"--job-timeout.*PENDING again — change the setting and start the "
                                          r"dispatcher again$"):
        d.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == PENDING and given_back(final) and final.get("error") is None
    assert final["history"][-1]["note"] == "the dispatcher's settings cannot plan it"


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_a_shard_jobs_private_data_download_is_removed_when_the_shard_ends(tmp_path, private_set, monkeypatch,
                                                                            outcome):
    """A Job that downloads the private data repo (REXRANK_PRIVATE_DATA_REPO, no data folder)
    into a scratch folder removes it when its shard is written or has failed, not at the
    process's exit (the folder was let go at once, and the download made it again for good)."""
    import shutil

    import huggingface_hub

    from rexrank.backend import shard_job
    from rexrank.backend.dispatch import Dispatcher, DispatchSettings
    from rexrank.store import FAILED

    data_dir, preds = private_set
    downloads: list = []

    def download(repo_id, *, repo_type, local_dir, token=None):
        assert (repo_id, repo_type) == ("board/private-data", "dataset")
        shutil.copytree(data_dir, local_dir, dirs_exist_ok=True)
        downloads.append(local_dir)
        return local_dir

    ended: list = []  # shards whose run_shard returned (a cancelled Job's thread runs on until then)
    real_run_shard = shard_job.run_shard

    def run_shard(*args, **kw):
        try:
            return real_run_shard(*args, **kw)
        finally:
            ended.append(args[2])

    monkeypatch.setattr(shard_job, "run_shard", run_shard)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    monkeypatch.setenv("REXRANK_PRIVATE_DATA_REPO", "board/private-data")
    if outcome == "failed":
        monkeypatch.setattr(Worker, "score_studies", lambda *a, **kw: 1 / 0)
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    settings = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.05)
    worker = Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="d", min_coverage=0.5)
    worker.clock = RecordingClock([])  # a private request's failure waits for its slot: not here
    jobs = ThreadJobs(str(tmp_path / "s"), None)
    Dispatcher(worker, jobs, settings).run(once=True)
    assert store.get_request(req["id"])["status"] == (FINISHED if outcome == "finished" else FAILED)
    wait_for(lambda: len(ended) == len(jobs.jobs), timeout=120, what="every shard Job to end")
    assert downloads and all(not Path(folder).exists() for folder in downloads)


def test_a_failed_dispatched_request_keeps_its_other_jobs_canceled_in_its_record(tmp_path, monkeypatch):
    """A shard's final failure fails the request: its other running Jobs are cancelled once
    each, and the record says CANCELED (they were cancelled after the record was saved, so
    it kept them RUNNING)."""
    from rexrank.backend import shard_job
    from rexrank.store import FAILED
    from rexrank.store import records as R

    release = threading.Event()

    def run_shard(store, request_id, shard, attempt, **kw):
        if shard == 0:
            json_path, _ = R.shard_paths(request_id, shard, attempt)
            shard_job._write(store, {json_path: shard_job._outcome(request_id, shard, attempt, R.VALIDATION,
                                                                   "the predictions do not fit")})
            return 1
        release.wait(120)  # scoring until cancelled
        return 3

    monkeypatch.setattr(shard_job, "run_shard", run_shard)
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    d = dispatcher(tmp_path, store)
    cancelled: list = []
    real_cancel = d.jobs.cancel
    d.jobs.cancel = lambda job_id: cancelled.append(job_id) or real_cancel(job_id)
    try:
        d.run(once=True)
    finally:
        release.set()
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["error"] == "the predictions do not fit"
    others = [j for j in final["dispatch"]["jobs"] if j["shard"] != 0]
    assert others and {j["state"] for j in others} == {"CANCELED"}
    assert sorted(cancelled) == sorted(j["job_id"] for j in others)  # each once


def test_a_reader_the_machine_keeps_killing_on_one_file_fails_the_request_at_last(tmp_path, monkeypatch):
    """A kill of the predictions reader by the machine gives the request back; the same
    file killed again and again is its own doing (it used to circle the queue for ever)."""
    from rexrank.backend import worker as W
    from rexrank.errors import ReaderKilled

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    kills = []

    def killed(self, resolved):
        kills.append(1)
        raise ReaderKilled("the reader was killed (SIGKILL) while reading it", source="predictions")

    monkeypatch.setattr(W.Worker, "score", killed)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    for _ in range(W.READER_KILLS_GIVEN_BACK):
        worker.run(once=True)
        assert store.get_request(req["id"])["status"] == PENDING
    worker.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == "FAILED" and final["failure_kind"] == "internal", final
    assert "killed (SIGKILL)" in final["error"] and len(kills) == W.READER_KILLS_GIVEN_BACK + 1
    assert [h.get("note") for h in final["history"] if h.get("given_back")] == [W.READER_KILLED_NOTE] * 3
