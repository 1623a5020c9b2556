"""The Hub store against a fake Hub API served on 127.0.0.1 (tests/support/fakehub.py)."""
from __future__ import annotations

import json
import threading

import pytest

from rexrank.errors import SubmissionError
from rexrank.store import FINISHED, ConflictError, Quota, open_store
from rexrank.store.hub import HubRepo
from support.requests import example_rows, submit, variant, write_jsonl
from support.store_fixtures import fake_hub, hub  # noqa: F401 (fixtures)


def test_hub_store_roundtrip(hub, tmp_path):
    store = open_store("hf://org1", quota=Quota(0))
    assert ("dataset", "org1/requests") in hub.repos and ("dataset", "org1/results") in hub.repos
    req = submit(store)
    files = hub.files("org1/requests")
    assert {p for p in files if not p.startswith("copies/anchors/")} == {
        f"queue/{req['id']}.json", f"predictions/{req['id']}/test.parquet", "index/received.json",
        "copies/key.json", f"copies/filings/{req['id']}.json"}  # (and the filing's anchors: rexrank.store.copies)
    assert json.loads(files[f"queue/{req['id']}.json"])["status"] == "PENDING"
    claimed = store.claim("w1", lease_seconds=60)
    assert claimed["id"] == req["id"] and store.claim("w2", lease_seconds=60) is None
    store.add_result({"id": req["id"], "model_name": "model-a", "test_set": "example", "track": "findings",
                      "values": {"bleu2": {"mean": 0.5, "ci95": 0.1, "n": 19}}}, per_study=b"PAR1")
    assert store.finish(req["id"], "w1", result_id=req["id"])
    assert store.get_request(req["id"])["status"] == FINISHED
    [result] = open_store("hf://org1").list_results()  # a fresh reader sees it
    assert result["values"]["bleu2"]["mean"] == 0.5
    assert hub.files("org1/results")[result["per_study_path"]] == b"PAR1"
    # the duplicate check reads the Hub queue too
    with pytest.raises(SubmissionError, match="identical resubmission"):
        submit(store)


def test_stale_parent_commit_is_refused_with_412(hub):
    repo = HubRepo("org2/requests")
    snap = repo.snapshot()
    repo.commit({"a.txt": b"1"}, message="first", parent=snap.version)
    with pytest.raises(ConflictError):
        repo.commit({"a.txt": b"2"}, message="stale", parent=snap.version)
    assert hub.files("org2/requests") == {"a.txt": b"1"}


def test_injected_conflicts_are_retried(hub, tmp_path):
    store = open_store("hf://org3", quota=Quota(0))
    before = hub.commits("org3/requests")
    hub.fail_next_commits = 2
    req = submit(store)
    assert hub.fail_next_commits == 0
    assert hub.commits("org3/requests") == before + 1
    assert [r["id"] for r in store.list_requests()] == [req["id"]]


def test_concurrent_claims_on_the_hub_take_each_request_once(hub, tmp_path):
    store = open_store("hf://org4", quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(4)}
    claims: list[str] = []
    barrier = threading.Barrier(3)

    def worker(name):
        own = open_store("hf://org4")
        barrier.wait()
        while (req := own.claim(name, lease_seconds=60)) is not None:
            claims.append(req["id"])

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claims) == sorted(ids)


def test_submit_predictions_from_a_hub_dataset(hub, tmp_path):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url, token="hf_fake")
    api.create_repo("alice/preds", repo_type="dataset")
    path = write_jsonl(tmp_path / "preds.jsonl", example_rows())
    info = api.upload_file(path_or_fileobj=str(path), path_in_repo="data/test.jsonl", repo_id="alice/preds", repo_type="dataset")
    store = open_store("hf://org5")
    req = submit(store, "hf://alice/preds")
    assert req["predictions"]["source"] == f"hf://alice/preds@{info.oid}"
    # the same content as the embedded example file -> same fingerprint
    local = submit(open_store(tmp_path / "local"))
    assert req["predictions"]["sha256"] == local["predictions"]["sha256"]
    with pytest.raises(SubmissionError, match="alice/missing: no dataset repo by that name"):
        submit(open_store("hf://org5", quota=Quota(0)), "hf://alice/missing", model_name="x")


def test_backend_worker_on_a_hub_store(hub):
    from rexrank.backend.worker import Worker

    store = open_store("hf://org6")
    req = submit(store)
    assert Worker(store, metrics="bleu2", worker_id="hub-worker").run(once=True) == 1
    assert store.get_request(req["id"])["status"] == FINISHED
    [record] = store.list_results()
    assert record["id"] == req["id"] and record["values"]["bleu2"]["n"] == req["predictions"]["n"]
    assert record["per_study_path"] in hub.files("org6/results")
