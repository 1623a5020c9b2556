"""The store's cost does not grow with its history (issue 15): a worker reads only open
requests, the submission rules read only the index files of the names involved, a result
is written with a fixed number of files, and a store of the earlier layout is moved to
the current one once, with a log line, keeping every rule."""
from __future__ import annotations

import json
import logging

import pytest

from rexrank.errors import SubmissionError
from rexrank.store import FINISHED, PENDING, Quota, open_store
from rexrank.store import records as R
from support.requests import submit, variant
from support.store_fixtures import RESULT, Reads, earlier_layout_store, settle

def test_settled_requests_leave_the_queue_and_a_claim_reads_only_open_ones(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    settled = settle(store, 12, tmp_path)
    root = tmp_path / "s" / "requests"
    assert sorted(p.name for p in (root / "done").iterdir()) == sorted(f"{r['id']}.json" for r in settled)
    assert not list((root / "queue").iterdir())
    waiting = submit(store, variant(tmp_path, 99), model_name="new", submitter="zed")
    reads = Reads(monkeypatch, store.requests)
    claimed = store.claim("w2", lease_seconds=60)
    assert claimed["id"] == waiting["id"]
    # the old claim read all 13 requests; now: the one open request, nothing of the history
    assert reads.records(R.DONE_DIR) == [] and reads.records(R.QUEUE_DIR) == [f"queue/{waiting['id']}.json"]
    assert all(folders in ((R.QUEUE_DIR,), ()) for folders in reads.listed)
    assert store.get_request(settled[0]["id"])["status"] == FINISHED  # still found, in done/
    assert [r["id"] for r in store.list_requests()] == [*[r["id"] for r in settled], waiting["id"]]


def test_the_rules_read_only_the_names_involved_and_still_hold(tmp_path, monkeypatch):
    settled = settle(open_store(tmp_path / "s", quota=Quota(0)), 9, tmp_path)  # m0..m8; team0 filed m0, m3, m6
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    reads = Reads(monkeypatch, store.requests)
    results_reads = Reads(monkeypatch, store.results)
    with pytest.raises(SubmissionError, match="already has 3 submission"):
        submit(store, variant(tmp_path, 50), model_name="fresh", submitter="team0")
    with pytest.raises(SubmissionError, match="identical resubmission"):
        submit(store, variant(tmp_path, 4), model_name="M4", submitter="team1")
    # each check read three request index files (model name, submitter, predictions content), no
    # request or result record (the rules read no result: nobody owns a bare model name)
    assert reads.records(R.DONE_DIR) == [] and results_reads.records(R.RECORDS_DIR) == []
    assert {p.split("/")[1] for p in reads.records("index/")} <= {"names", "submitters", "predictions", "received.json"}
    # (+ the register of when the backend saw the open requests: one small file a check)
    assert len(reads.records("index/")) == 6 + 2 and results_reads.records("index/") == []
    assert len(settled) == 9
    assert submit(store, variant(tmp_path, 51), model_name="m5", submitter="newcomer")["status"] == "PENDING"


def test_the_backend_rules_see_the_settled_history(tmp_path):
    from rexrank.backend.worker import Worker

    store = open_store(tmp_path / "s", quota=Quota(0))
    [first] = settle(store, 1, tmp_path)
    rogue = open_store(tmp_path / "s", quota=Quota(0))
    import rexrank.store.store as store_module

    original, judged = store_module.check_policy, store_module.Store.judge_copies
    store_module.check_policy = lambda *a, **k: None  # a client that skips the rules
    store_module.Store.judge_copies = lambda self, snap, edit, request, *_: (request, {})
    try:
        again = submit(rogue, variant(tmp_path, 0), model_name="M0", submitter="team0")
        copy = submit(rogue, variant(tmp_path, 0), model_name="not-m0", submitter="mallory")
    finally:
        store_module.check_policy, store_module.Store.judge_copies = original, judged
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert "identical resubmission" in store.get_request(again["id"])["error"]
    assert store.get_request(copy["id"])["status"] == "HELD"  # team0's settled filing had them first
    assert store.get_request(first["id"])["status"] == FINISHED


def test_writing_a_result_costs_the_same_with_a_long_history(tmp_path, monkeypatch):
    costs = []
    for n in (2, 12):
        store = open_store(tmp_path / f"s{n}", quota=Quota(0))
        store.add_results([{**RESULT, "id": f"r{i}", "model_name": f"m{i}"} for i in range(n)])
        reads = Reads(monkeypatch, store.results)
        store.add_result({**RESULT, "id": "new", "model_name": "new-model"}, per_study=b"PAR1")
        costs.append((len(reads.paths), reads.listed_files, len(reads.listed)))
    assert costs[0] == costs[1]  # files read, files listed, listings: none depends on the history
    assert costs[0][1] == 0  # nothing is listed: the index files are read by name


def test_a_store_of_the_earlier_layout_is_moved_once_with_a_log_line(tmp_path, caplog):
    root = tmp_path / "s"
    old = earlier_layout_store(root, 40)
    store = open_store(root, quota=Quota(0))
    assert len(store.list_requests()) == 40 and len(store.list_results()) == 30  # readable as it is
    with caplog.at_level(logging.INFO, logger="rexrank.store"):
        assert store.claim("w", lease_seconds=60) is None
        store.add_result({**RESULT, "id": "new", "model_name": "new-model"})
    messages = [r.getMessage() for r in caplog.records]
    assert any("moved 40 settled request(s) from queue/ to done/" in m and "earlier rexrank" in m for m in messages)
    assert any("indexed 30 result record(s)" in m for m in messages)
    assert not list((root / "requests" / "queue").iterdir()) and len(list((root / "requests" / "done").iterdir())) == 40
    assert {r["id"]: r for r in store.list_requests()} == {r["id"]: r for r in old}  # records unchanged, moved
    # the rules still see the history: requests recorded by name count for that name on a local store
    with pytest.raises(SubmissionError, match=r"'olduser1' already has 20 submission\(s\)"):
        submit(open_store(root, quota=Quota(1, 36500)), variant(tmp_path, 1), model_name="new", submitter="olduser1")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rexrank.store"):
        store.claim("w", lease_seconds=60)
        store.add_result({**RESULT, "id": "new2", "model_name": "new-model"})
    assert not [r for r in caplog.records if "moved" in r.getMessage() or "indexed" in r.getMessage()]  # once


def test_a_few_requests_settled_by_an_older_worker_are_tidied_by_the_next_claim(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    path = tmp_path / "s" / "requests" / "queue" / f"{req['id']}.json"
    path.write_text(json.dumps({**req, "status": FINISHED}))  # an older worker settles in place
    assert store.claim("w", lease_seconds=60) is None
    assert not path.exists() and (tmp_path / "s" / "requests" / "done" / f"{req['id']}.json").exists()
    with pytest.raises(SubmissionError, match="identical resubmission"):
        submit(store)


def test_requeue_brings_a_request_back_to_the_queue_and_out_of_the_index(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    req = submit(store)
    store.claim("w", lease_seconds=60)
    store.fail(req["id"], "w", error="outage", kind="coverage")
    root = tmp_path / "s" / "requests"
    assert (root / "done" / f"{req['id']}.json").exists()
    store.requeue(req["id"])
    assert (root / "queue" / f"{req['id']}.json").exists() and not (root / "done" / f"{req['id']}.json").exists()
    index_files = [json.loads(p.read_text()) for p in (root / "index").rglob("*.json") if p.name != "received.json"]
    assert not any(req["id"] in json.dumps(c) for c in index_files)
    # open again: registered as received when the backend first saw it, not when requeued
    received = json.loads((root / "index" / "received.json").read_text())["requests"]
    assert received == {req["id"]: store.get_request(req["id"])["received_time"]}
    assert store.claim("w", lease_seconds=60)["id"] == req["id"]


def test_the_queue_view_shows_open_requests_and_the_latest_settled_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "RECENT_LIMIT", 4)
    store = open_store(tmp_path / "s", quota=Quota(0))
    settled = settle(store, 6, tmp_path)
    waiting = submit(store, variant(tmp_path, 40), model_name="w", submitter="x")
    reads = Reads(monkeypatch, store.requests)
    view = store.queue_view()
    assert [r["id"] for r in view] == [waiting["id"], *[r["id"] for r in settled[::-1][:4]]]
    assert view[1]["status"] == FINISHED and view[0]["status"] == PENDING
    assert reads.records(R.DONE_DIR) == []


def test_reindex_rebuilds_what_was_edited_by_hand(tmp_path, capsys):
    from rexrank.cli.main import main

    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    [req] = settle(store, 1, tmp_path)
    for index in (root / "requests" / "index", root / "results" / "index"):
        for p in index.rglob("*.json"):
            p.unlink()  # the indexes lost by hand
    assert store.policy_problem({**req, "id": "x", "submitted_time": "2100-01-01T00:00:00Z"}) is None  # blind now
    code = main(["backend", "--store", str(root), "--reindex", "--once", "--metrics", "bleu2", "--quota", "0"])
    assert code == 0, capsys.readouterr().err
    assert "identical resubmission" in open_store(root, quota=Quota(0)).policy_problem(
        {**req, "id": "x", "submitted_time": "2100-01-01T00:00:00Z"})
    assert (root / "results" / "index" / "layout.json").exists()
