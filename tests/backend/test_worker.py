"""The scoring worker: results, failures, leases, crashes, several workers, private sets."""
from __future__ import annotations

import io
import json
import time

import pandas as pd
import pytest

from rexrank.backend.worker import PRIVATE_INTERNAL_ERROR, Worker
from rexrank.errors import MetricError
from rexrank.scoring import score_submission
from rexrank.store import FAILED, FINISHED, PENDING, RUNNING, Quota, open_store
from support.requests import EXAMPLE_PREDS, submit, variant, write_jsonl
from support.backend_fixtures import cli, leaks_in
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)

def test_worker_scores_like_rexrank_score_and_publishes_per_study(tmp_path):
    store = open_store(tmp_path / "s")
    req = submit(store, institution="Lab")
    worker = Worker(store, metrics="bleu2", worker_id="w1")
    assert worker.run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["result_id"] == req["id"]
    [record] = store.list_results()
    direct = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False)
    summary = direct.results["metrics"]["bleu2"]["scores"]["bleu2"]
    assert record["values"]["bleu2"] == {"mean": summary["mean"], "ci95": summary["ci95"], "n": summary["n"]}
    assert record["institution"] == "Lab" and record["source"] == "rexrank"
    prov = record["provenance"]
    assert prov["metrics"]["bleu2"]["version"] and prov["test_set"]["name"] == "example"
    assert prov["test_set"]["track"] == "findings" and prov["worker"] == "w1"
    per_study = pd.read_parquet(io.BytesIO(store.read_per_study(record)))
    pd.testing.assert_frame_equal(per_study, direct.per_study)
    assert worker.run(once=True) == 0  # nothing left


def test_unknown_metric_stops_the_worker_at_start(tmp_path):
    with pytest.raises(MetricError, match="unknown metric"):
        Worker(open_store(tmp_path / "s"), metrics="bleu2,nope")


def test_metric_failure_marks_request_failed_with_the_reason(tmp_path, test_metrics):
    store = open_store(tmp_path / "s")
    req = submit(store)
    Worker(store, metrics="crashing", worker_id="w").run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and "ValueError" in final["error"]  # public set: the reason is shown
    assert store.list_results() == []


def test_a_request_given_back_before_an_unexpected_error_waits_in_the_queue_not_claimed_again_at_once(tmp_path):
    """A handler that hands its request back and then fails (a bug in a stop's own message):
    the worker cannot fail what it no longer holds, and the request is not settled, so the
    loop waits its poll; `once` ends instead of claiming it again for ever."""
    store = open_store(tmp_path / "s")
    req = submit(store)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    claims = []

    def give_back_then_fail(request, keeper):
        claims.append(request["id"])
        store.release(request["id"], "w", reason="handed back")
        raise KeyError("test_set")

    assert worker.process_next(handle=give_back_then_fail) is None
    assert worker.run(once=True, step=lambda: worker.process_next(handle=give_back_then_fail)) == 0
    assert claims == [req["id"]] * 2 and store.get_request(req["id"])["status"] == PENDING


def test_lease_is_renewed_while_scoring(tmp_path, test_metrics, monkeypatch):
    store = open_store(tmp_path / "s")
    req = submit(store)
    monkeypatch.setenv("REXRANK_TEST_SLOW", "1.2")
    import threading

    worker = Worker(store, metrics="counting", worker_id="slow", lease_seconds=0.4)
    t = threading.Thread(target=worker.run, kwargs={"once": True})
    t.start()
    while store.get_request(req["id"])["status"] != RUNNING:  # let the worker claim first
        time.sleep(0.02)
    steals = []
    deadline = time.time() + 1.0
    while time.time() < deadline:  # the lease (0.4 s) would have expired without renewal
        steals.append(store.claim("thief", lease_seconds=10))
        time.sleep(0.1)
    t.join()
    assert not any(steals)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["attempts"] == 1
    assert len(store.list_results()) == 1


def test_result_written_before_a_crash_is_not_scored_again(tmp_path, test_metrics, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("REXRANK_TEST_LOG", str(log))
    store = open_store(tmp_path / "s")
    req = submit(store)
    store.claim("dead", lease_seconds=0.1)
    store.add_result({"id": req["id"], "model_name": "model-a", "test_set": "example", "track": "findings", "values": {}})
    time.sleep(0.2)  # the dead worker never marked it FINISHED
    Worker(store, metrics="counting", worker_id="w2").run(once=True)
    assert store.get_request(req["id"])["status"] == FINISHED
    assert not log.exists()  # reused, not recomputed
    assert len(store.list_results()) == 1


def test_worker_killed_mid_scoring_then_request_finishes_exactly_once(tmp_path, test_metrics, monkeypatch):
    store = open_store(tmp_path / "s")
    req = submit(store)
    started = tmp_path / "started"
    log = tmp_path / "calls.log"
    proc = cli("backend", "--store", str(tmp_path / "s"), "--once", "--metrics", "counting", "--worker-id", "doomed",
               "--lease-seconds", "1.5", env={"REXRANK_TEST_SLOW": "60", "REXRANK_TEST_STARTED": str(started),
                                              "REXRANK_TEST_LOG": str(log)})
    try:
        deadline = time.time() + 60
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "worker did not start scoring"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: no cleanup, the lease is simply not renewed any more
        proc.wait()
    held = store.get_request(req["id"])
    assert held["status"] == RUNNING and held["worker"] == "doomed"
    monkeypatch.setenv("REXRANK_TEST_LOG", str(log))
    assert Worker(store, metrics="counting", worker_id="w2").run(once=True) == 0  # lease still valid
    time.sleep(1.6)  # the lease (1.5 s) stays unrenewed for as long as this process has watched it
    assert Worker(store, metrics="counting", worker_id="w2").run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["worker"] == "w2" and final["attempts"] == 2
    assert len(store.list_results()) == 1
    assert len(log.read_text().splitlines()) == 2  # interrupted once, completed once


def test_two_worker_processes_score_each_submission_exactly_once(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    keys = {}
    for i in range(6):
        keys[submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"]] = i
    log = tmp_path / "calls.log"
    env = {"REXRANK_TEST_LOG": str(log), "REXRANK_TEST_SLOW": "0.2"}
    procs = [cli("backend", "--store", str(tmp_path / "s"), "--once", "--metrics", "counting", "--worker-id", f"p{i}",
                 "--quota", "0", env=env)
             for i in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    requests = store.list_requests()
    assert {r["status"] for r in requests} == {FINISHED}
    assert all(r["attempts"] == 1 for r in requests)
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    assert len(calls) == 6 and len(set(calls)) == 6  # six distinct submissions, each scored once
    results = store.list_results()
    assert sorted(r["id"] for r in results) == sorted(keys)


# ---- private test sets ---------------------------------------------------------------------

def test_private_set_results_are_aggregate_only(tmp_path, private_set):
    data_dir, preds = private_set
    store = open_store(tmp_path / "s")
    req = submit(store, preds, test_set="rexgradient")
    assert req["predictions"]["ids_checked"] is False and req["private"] is True
    Worker(store, data_dir=data_dir, metrics="bleu2,leaky", worker_id="w", min_coverage=0.5).run(once=True)
    assert store.get_request(req["id"])["status"] == FINISHED
    [record] = store.list_results()
    assert record["values"]["bleu2"]["n"] is None  # counts of scored studies are not published
    assert not record["per_study_available"] and "per_study_path" not in record
    assert not list((tmp_path / "s" / "results").rglob("*.parquet"))
    leaky = record["summaries"]["leaky"]
    assert set(leaky) <= {"scores", "rounding_decimals", "privacy", "higher_is_better"}
    assert leaky["scores"] == {}  # a column without a declared range publishes nothing
    assert "RG000" not in json.dumps(record)  # no per-study ids either
    assert leaks_in(tmp_path / "s") == []


def test_the_same_careless_metric_does_publish_details_on_a_public_set(tmp_path, test_metrics):
    # the control for the test above: the leak check finds what the private filter removes
    store = open_store(tmp_path / "s")
    submit(store)
    Worker(store, metrics="leaky", worker_id="w", min_coverage=0.5).run(once=True)
    [record] = store.list_results()
    assert record["summaries"]["leaky"]["details"]["examples"] and record["summaries"]["leaky"]["failures"]


def test_private_set_errors_do_not_quote_references(tmp_path, private_set):
    data_dir, preds = private_set
    store = open_store(tmp_path / "s")
    req = submit(store, preds, test_set="rexgradient")
    Worker(store, data_dir=data_dir, metrics="crashing", worker_id="w").run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["error"] == PRIVATE_INTERNAL_ERROR
    assert leaks_in(tmp_path / "s") == []
    assert str(data_dir) not in json.dumps(final)  # nor where the private data lives


def test_private_set_id_mismatch_fails_with_counts_not_ids(tmp_path, private_set):
    data_dir, _ = private_set
    preds = write_jsonl(tmp_path / "partial.jsonl", {"RG000": "x", "RG001": "y", "RG999": "z"})
    store = open_store(tmp_path / "s")
    req = submit(store, preds, test_set="rexgradient")
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FAILED
    assert "4 of 6 studies have no prediction" in final["error"] and "1 submitted study ids are not in" in final["error"]
    assert "RG0" not in final["error"] and "RG999" not in final["error"]  # a prober learns counts, never ids
    assert final["failure_kind"] == "validation"
    assert leaks_in(tmp_path / "s") == []
