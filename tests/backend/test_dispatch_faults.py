"""Faults the Hub really has, survived by the dispatcher (rexrank.backend.dispatch) on the fake
Hub (tests/support/fakehub.py), with the Jobs and the scorings counted: passing API errors while
polling (5xx, a dropped connection, 429 with Retry-After) fail nothing; a dispatcher that
loses its lease (paused past it, then resumed) leaves the Jobs and the shard outputs to the
dispatcher that took the request over, whether it resumes while the Jobs run or after they
finished, while the new holder merges."""
from __future__ import annotations

import threading

from support.backend_fixtures import HELPER, test_metrics  # noqa: F401 (fixtures)
from support import dispatch_fixtures
from support.dispatch_fixtures import ORG, hub, in_thread, wait_for  # noqa: F401 (fixtures)
from rexrank.store import FINISHED, Quota, open_store
from support.requests import submit

assert HELPER  # the Jobs run the rexrank command line with the test metrics


def dispatcher(store, metrics, **kw):
    """Two shards a request (the Jobs cap): each fault here needs two Jobs at most, and each Job
    is a process of seconds."""
    return dispatch_fixtures.dispatcher(store, metrics, max_jobs=2, **kw)


class Pause:
    """Stops a dispatcher at the methods it gates, as a paused process (SIGSTOP) stops there:
    while closed, each call to a gated method waits until `open()`. `close_at` closes the
    pause when that method is first called (the dispatcher stops there)."""

    def __init__(self):
        self._open = threading.Event()
        self._open.set()
        self.waiting: list[str] = []  # the gated calls that waited

    def gate(self, obj, name: str, *, closes: bool = False) -> None:
        real = getattr(obj, name)

        def gated(*args, **kwargs):
            if closes:
                self._open.clear()
            if not self._open.is_set():
                self.waiting.append(name)
                self._open.wait()
            return real(*args, **kwargs)

        setattr(obj, name, gated)

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()


def scorings(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def cancels(hub) -> list[str]:
    return [r for r in hub.requests if r.startswith("POST") and r.endswith("/cancel")]


def attempts(request) -> list[tuple[int, int, str]]:
    return sorted((j["shard"], j["attempt"], j["state"]) for j in request["dispatch"]["jobs"])


def test_passing_hub_faults_while_polling_fail_nothing(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    log, hold = tmp_path / "scorings", tmp_path / "go"
    d = dispatcher(store, "counting", job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_LOG": str(log),
                                               "REXRANK_TEST_HOLD": str(hold)})
    d.jobs.backoff = 0.05  # the Jobs client's retry waits, short for the test (a Retry-After answer says its own)
    thread = in_thread(lambda: d.run(once=True))
    wait_for(lambda: scorings(log) == 2, what="both Jobs scoring")
    # while the Jobs run: the Jobs API answers 503, drops a connection and asks to wait with 429; the
    # store answers 503 to a read and to a commit of the dispatcher's record
    hub.inject("GET", f"/api/jobs/{ORG}/", 503, "reset")
    hub.inject("GET", f"/api/jobs/{ORG}/", 429, retry_after=0.2)
    hub.inject("GET", f"/api/datasets/{ORG}/requests", 503)
    hub.inject("POST", f"/api/datasets/{ORG}/requests/commit", 503)
    # (read from the fake's memory: a call of the test's own would meet the faults)
    settled = lambda: any(p.startswith("done/") and req["id"] in p for p in hub.files(f"{ORG}/requests"))  # noqa: E731
    wait_for(lambda: not hub.faults or settled(), what="every fault answered (or the request settled by one)")
    hold.touch()
    thread.join(timeout=180)
    assert not thread.is_alive()
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert len(hub.faults_served) == 5
    assert len(hub.jobs) == 2 and scorings(log) == 2 and cancels(hub) == []
    assert attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED")]
    assert len(store.list_results()) == 1


def test_a_dispatcher_that_lost_its_lease_leaves_the_running_jobs_to_the_new_holder(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    log, hold = tmp_path / "scorings", tmp_path / "go"
    env = {"HF_HUB_OFFLINE": "0", "REXRANK_TEST_LOG": str(log), "REXRANK_TEST_HOLD": str(hold)}
    first_store = open_store(f"hf://{ORG}", quota=Quota(0))
    first = dispatcher(first_store, "counting", worker_id="first", lease=2.0, job_env=env)
    pause = Pause()  # the first dispatcher's lease renewals and polls of its Jobs
    pause.gate(first_store, "renew_lease")
    pause.gate(first.jobs, "inspect")
    first_thread = in_thread(lambda: first.run(once=True))
    wait_for(lambda: scorings(log) == 2, what="both Jobs scoring")
    pause.close()
    wait_for(lambda: "inspect" in pause.waiting, what="the first dispatcher paused in a poll")
    # its lease runs out; another dispatcher takes the request over and adopts both Jobs
    stop = threading.Event()
    second = dispatcher(open_store(f"hf://{ORG}", quota=Quota(0)), "counting", worker_id="second", lease=2.0,
                        job_env=env)
    second_thread = in_thread(lambda: second.run(stop=stop))
    try:
        wait_for(lambda: (lambda r: r.get("worker") == "second" and len((r.get("dispatch") or {}).get("jobs") or []) == 2)(
            store.get_request(req["id"])), what="the second dispatcher holding the request with both Jobs")
        pause.open()  # the first one resumes while the Jobs still run
        first_thread.join(timeout=60)
        assert not first_thread.is_alive()
        assert cancels(hub) == [] and {j.stage for j in hub.jobs.values()} == {"RUNNING"}
        hold.touch()
        wait_for(lambda: store.get_request(req["id"])["status"] == FINISHED, timeout=180, what="FINISHED")
    finally:
        stop.set()
        second_thread.join(timeout=30)
    final = store.get_request(req["id"])
    assert final["worker"] == "second"
    assert len(hub.jobs) == 2 and scorings(log) == 2 and cancels(hub) == []  # each shard scored once
    assert attempts(final) == [(0, 1, "COMPLETED"), (1, 1, "COMPLETED")]  # no attempt used up
    assert len(store.list_results()) == 1


def test_a_late_takeover_neither_removes_the_outputs_nor_publishes_twice(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    log = tmp_path / "scorings"
    env = {"HF_HUB_OFFLINE": "0", "REXRANK_TEST_LOG": str(log)}
    results_before = hub.commits(f"{ORG}/results")
    first_store = open_store(f"hf://{ORG}", quota=Quota(0))
    first = dispatcher(first_store, "counting", worker_id="first", lease=2.0, job_env=env)
    first_pause = Pause()  # the first dispatcher stops where it merges, its lease renewals with it
    first_pause.gate(first_store, "renew_lease")
    first_pause.gate(first, "_merge_and_publish", closes=True)
    first_thread = in_thread(lambda: first.run(once=True))
    wait_for(lambda: "_merge_and_publish" in first_pause.waiting, timeout=180, what="the first dispatcher at its merge")
    # another dispatcher takes the request over, adopts the finished Jobs and stops at its own merge
    stop = threading.Event()
    second = dispatcher(open_store(f"hf://{ORG}", quota=Quota(0)), "counting", worker_id="second", lease=2.0,
                        job_env=env)
    second_pause = Pause()
    second_pause.gate(second, "_merge_and_publish", closes=True)
    second_thread = in_thread(lambda: second.run(stop=stop))
    try:
        wait_for(lambda: "_merge_and_publish" in second_pause.waiting, timeout=120, what="the second at its merge")
        first_pause.open()  # the first resumes late: the request is the second's
        first_thread.join(timeout=60)
        assert not first_thread.is_alive()
        assert [p for p in hub.files(f"{ORG}/requests") if p.startswith(f"scratch/{req['id']}/")]  # outputs kept
        second_pause.open()
        wait_for(lambda: store.get_request(req["id"])["status"] != "RUNNING", timeout=120, what="settled")
    finally:
        stop.set()
        second_thread.join(timeout=30)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["worker"] == "second", final.get("error")
    assert len(hub.jobs) == 2 and scorings(log) == 2 and cancels(hub) == []
    assert len(store.list_results()) == 1 and hub.commits(f"{ORG}/results") - results_before == 1
    assert not [p for p in hub.files(f"{ORG}/requests") if p.startswith("scratch/")]  # the holder removed them


def test_rexrank_cancel_cancels_the_jobs_of_a_request_no_dispatcher_holds(hub, tmp_path, test_metrics, capsys):
    import json

    from huggingface_hub import HfApi

    from rexrank.cli.main import main
    from support.dispatch_fixtures import TOKEN

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    HfApi(endpoint=hub.url, token=TOKEN).upload_file(path_or_fileobj=json.dumps({"dispatch": {"mode": "hf-jobs"}}).encode(),
                                                     path_in_repo="config.json", repo_id=f"{ORG}/requests",
                                                     repo_type="dataset")
    log, hold = tmp_path / "scorings", tmp_path / "go"
    stop = threading.Event()
    d = dispatcher(store, "counting", job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_LOG": str(log),
                                               "REXRANK_TEST_HOLD": str(hold)})
    thread = in_thread(lambda: d.run(stop=stop))
    wait_for(lambda: scorings(log) == 2, what="both Jobs scoring")
    stop.set()  # the dispatcher stops (a crash, a restart): its Jobs run on, held by nobody
    thread.join(timeout=30)
    assert {j.stage for j in hub.jobs.values()} == {"RUNNING"}
    assert main(["cancel", req["id"], "--store", f"hf://{ORG}", "--reason", "withdrawn"]) == 0
    assert "2 running Job(s) cancelled" in capsys.readouterr().out
    assert {j.stage for j in hub.jobs.values()} == {"CANCELED"} and len(cancels(hub)) == 2
    assert store.get_request(req["id"])["status"] == "FAILED" and store.list_results() == []


def test_a_passing_store_fault_before_scoring_puts_the_request_back_instead_of_failing_it(hub):
    from rexrank.backend.worker import Worker

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    # the submission rules' read of the name index, once the worker holds the request: the Hub answers 503
    hub.inject("GET", "/index/names/", 503)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    assert worker.run(once=True) == 0 and store.get_request(req["id"])["status"] == "PENDING"  # given back
    assert worker.run(once=True) == 1 and store.get_request(req["id"])["status"] == FINISHED  # then scored
    assert len(hub.faults_served) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["attempts"] == 1, final.get("error")
    assert len(store.list_results()) == 1
