"""Local store: submit, queue operations, optimistic concurrency, quota, refusals."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from rexrank.errors import RexrankError, SubmissionError
from rexrank.store import FAILED, FINISHED, PENDING, RUNNING, ConflictError, Quota, open_store
from rexrank.store.local import LocalRepo
from rexrank.store.records import parse_iso
from support.requests import example_rows, submit, variant, write_jsonl

def with_duplicate(path: Path) -> Path:
    write_jsonl(path, example_rows())
    with path.open("a") as fh:
        fh.write(json.dumps({"id": "EX001", "prediction": "again"}) + "\n")
    return path


def store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_submit_writes_request_and_datasets_loadable_predictions(tmp_path):
    import datasets

    store = open_store(tmp_path / "store")
    req = submit(store, institution="Lab", model_url="https://x.org/m", trained_on=["mimic_cxr"])
    assert req["status"] == PENDING and req["trained_on"] == ["mimic_cxr"] and req["institution"] == "Lab"
    assert [r["id"] for r in store.list_requests()] == [req["id"]]
    assert store.get_request(req["id"]) == req
    parquet = tmp_path / "store" / "requests" / req["predictions"]["path"]
    ds = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    expected = example_rows()
    assert ds.column_names == ["id", "prediction"]
    assert dict(zip(ds["id"], ds["prediction"])) == {k: expected[k] for k in ds["id"]}
    assert req["predictions"]["n"] == len(ds) == req["predictions"]["n"]


def test_claim_finish_and_lease_guard(tmp_path):
    store = open_store(tmp_path / "s")
    req = submit(store)
    claimed = store.claim("w1", lease_seconds=30)
    assert claimed["id"] == req["id"] and claimed["status"] == RUNNING and claimed["worker"] == "w1"
    assert store.claim("w2", lease_seconds=30) is None  # held, lease valid
    assert not store.finish(req["id"], "w2", result_id="x")  # not the holder
    assert store.renew_lease(req["id"], "w1", lease_seconds=30)
    assert store.finish(req["id"], "w1", result_id=req["id"])
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["result_id"] == req["id"]
    assert [h["status"] for h in final["history"]] == [PENDING, RUNNING, FINISHED]
    assert not store.renew_lease(req["id"], "w1", lease_seconds=30)  # settled


def test_oldest_first(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    t0 = time.time()
    ids = [submit(store, variant(tmp_path, i), model_name=f"m{i}", now=t0 - 100 + i * 10)["id"] for i in (2, 0, 1)]
    order = [store.claim("w", lease_seconds=30)["id"] for _ in ids]
    assert order == [ids[1], ids[2], ids[0]]


def test_expired_lease_is_reclaimed_and_repeated_interruptions_fail(tmp_path):
    store = open_store(tmp_path / "s")
    req = submit(store)
    store.claim("w1", lease_seconds=0.2)
    assert store.claim("w2", lease_seconds=0.2) is None
    time.sleep(0.3)
    again = store.claim("w2", lease_seconds=0.2)
    assert again["id"] == req["id"] and again["worker"] == "w2" and again["attempts"] == 2
    assert not store.finish(req["id"], "w1", result_id="x")  # the dead worker's late write is refused
    time.sleep(0.3)
    assert store.claim("w3", lease_seconds=0.2, max_attempts=3)["attempts"] == 3
    time.sleep(0.3)
    assert store.claim("w4", lease_seconds=0.2, max_attempts=3) is None
    failed = store.get_request(req["id"])
    assert failed["status"] == FAILED and "interrupted 3 times" in failed["error"]


def test_concurrent_claims_from_threads_take_each_request_once(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(8)}
    claims: list[tuple[str, str]] = []
    barrier = threading.Barrier(6)

    def worker(name):
        own = open_store(tmp_path / "s")  # separate objects, as separate workers would have
        barrier.wait()
        while (req := own.claim(name, lease_seconds=60)) is not None:
            claims.append((req["id"], name))

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed_ids = [rid for rid, _ in claims]
    assert sorted(claimed_ids) == sorted(ids)  # every request once, none twice
    on_disk = {r["id"]: r["worker"] for r in store.list_requests()}
    assert on_disk == dict(claims)


def test_local_commit_on_stale_version_is_refused(tmp_path):
    repo = LocalRepo(tmp_path / "r")
    snap = repo.snapshot()
    repo.commit({"a.json": b"1"}, message="first", parent=snap.version)
    with pytest.raises(ConflictError):
        repo.commit({"a.json": b"2"}, message="stale", parent=snap.version)
    assert (tmp_path / "r" / "a.json").read_bytes() == b"1"
    with pytest.raises(RexrankError, match="outside the store"):
        repo.commit({"../evil": b"x"}, message="x", parent=repo.snapshot().version)


def test_quota_per_submitter_test_set_and_track(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    t0 = time.time()
    first = submit(store, now=t0)
    with pytest.raises(SubmissionError, match=r"already has 1 submission\(s\) on example/findings.*limit 1"):
        submit(store, variant(tmp_path, 1), model_name="other", submitter=" ALICE ", now=t0 + 3600)
    submit(store, variant(tmp_path, 2), submitter="bob", model_name="model-b", now=t0 + 3600)  # another submitter
    submit(store, variant(tmp_path, 3), track="findings_impression", now=t0 + 3600)  # another track
    submit(store, variant(tmp_path, 4), model_name="later", now=t0 + 8 * 86400)  # after 7 days
    assert len(store.list_requests()) == 4
    # a FAILED request does not use up the quota
    store2 = open_store(tmp_path / "s2", quota=Quota(1, 7))
    req = submit(store2, now=t0)
    store2.claim("w", lease_seconds=30)
    store2.fail(req["id"], "w", error="boom")
    submit(store2, variant(tmp_path, 5), now=t0 + 60)
    assert parse_iso(first["submitted_time"]) == pytest.approx(t0, abs=1)


def test_quota_from_env(monkeypatch):
    monkeypatch.setenv("REXRANK_QUOTA", "3/1.5")
    assert Quota.from_env() == Quota(3, 1.5)
    monkeypatch.setenv("REXRANK_QUOTA", "lots")
    with pytest.raises(SubmissionError, match="REXRANK_QUOTA"):
        Quota.from_env()


def test_identical_resubmission_refused_even_in_another_format(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    first = submit(store)
    # same predictions as CSV, rows shuffled, model name in other case
    import pandas as pd

    rows = list(example_rows().items())[::-1]
    csv = tmp_path / "p.csv"
    pd.DataFrame(rows, columns=["id", "prediction"]).to_csv(csv, index=False)
    with pytest.raises(SubmissionError, match=f"identical resubmission: request {first['id']}"):
        submit(store, csv, model_name="MODEL-A")
    submit(store, csv, model_name="model-b")  # same predictions, another model name: allowed
    assert len(store.list_requests()) == 2


@pytest.mark.parametrize(
    "name, make, message",
    [
        ("malformed", lambda d: (d / "bad.json").write_text("{not json") and d / "bad.json", "not valid JSON"),
        ("missing", lambda d: write_jsonl(d / "m.jsonl", dict(list(example_rows().items())[1:])), "have no prediction"),
        ("unknown", lambda d: write_jsonl(d / "u.jsonl", {**example_rows(), "ZZZ": "x"}), "not in"),
        ("duplicate", lambda d: with_duplicate(d / "dup.jsonl"), "more than once"),
        ("huge", lambda d: write_jsonl(d / "h.jsonl", {**example_rows(), "EX001": "x" * 1_000_000}), "longer than 20000"),
        ("non_utf8", lambda d: (d / "latin.json").write_bytes(b'{"EX001": {"model_prediction": "caf\xe9"}}') and d / "latin.json", "not UTF-8"),
        ("wrong_test_set", lambda d: write_jsonl(d / "w.jsonl", {"iu_1": "a", "iu_2": "b"}), "another test set"),
    ],
)
def test_bad_inputs_are_refused_and_nothing_is_lost(tmp_path, name, make, message):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    kept = submit(store)
    before = store_files(root)
    bad = make(tmp_path)
    with pytest.raises(SubmissionError, match=message):
        submit(store, bad, model_name="bad")
    assert store_files(root) == before
    assert store.get_request(kept["id"]) == kept


def test_unknown_test_set_track_and_empty_fields(tmp_path):
    store = open_store(tmp_path / "s")
    with pytest.raises(RexrankError, match="unknown test set 'nope'"):
        submit(store, test_set="nope")
    with pytest.raises(RexrankError, match="unknown track"):
        submit(store, track="impression")
    with pytest.raises(SubmissionError, match="model name is empty"):
        submit(store, model_name="  ")
    with pytest.raises(SubmissionError, match="unknown test set"):
        submit(store, trained_on=["imagenet"])
    assert store.list_requests() == []


def test_add_result_and_list_results(tmp_path):
    store = open_store(tmp_path / "s")
    rec = {"id": "published-x", "model_name": "X", "test_set": "iu_xray", "track": "findings",
           "values": {"bleu2": {"mean": 0.2, "ci95": float("nan"), "n": 590}}, "source": "published"}
    store.add_result(rec)
    store.add_result({**rec, "values": {"bleu2": {"mean": 0.3, "ci95": None, "n": 590}}})  # same id: replaced
    results = store.list_results()
    assert len(results) == 1 and results[0]["values"]["bleu2"] == {"mean": 0.3, "ci95": None, "n": 590}
    with pytest.raises(RexrankError, match="lacks"):
        store.add_result({"id": "x"})
    assert store.add_results([{**rec, "id": f"p{i}"} for i in range(3)]) == 3
    assert len(store.list_results()) == 4
    assert store.results.snapshot().version == "3"  # 2 single writes + 1 batch commit


def test_open_store_rejects_bad_specs(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RexrankError, match="is a file"):
        open_store(tmp_path / "file")
    with pytest.raises(RexrankError, match="hf://ORG"):
        open_store("hf://a/b")
    with pytest.raises(RexrankError, match="HF_HUB_OFFLINE"):
        open_store("hf://org")  # tests run offline


def test_a_local_store_has_no_quota_unless_its_config_sets_one(tmp_path, monkeypatch, capsys):
    """Issue 39: two `rexrank submit`s to one's own ./rexrank-store both go in; with the
    store's config.json key "quota" set, the second is refused, and the refusal names it."""
    from rexrank.cli.main import main

    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    monkeypatch.chdir(tmp_path)

    def cli_submit(n: int) -> int:
        return main(["submit", "--dataset", "example", "--predictions", str(variant(tmp_path, n)),
                     "--model-name", f"model-{n}", "--submitter", "me"])

    assert cli_submit(1) == 0 and cli_submit(2) == 0  # the default store: ./rexrank-store
    assert len(open_store("rexrank-store").list_requests()) == 2
    (tmp_path / "rexrank-store" / "requests" / "config.json").write_text(json.dumps({"quota": "2/7"}))
    capsys.readouterr()
    assert cli_submit(3) == 1
    err = capsys.readouterr().err
    assert "'me' already has 2 submission(s) on example/findings in the last 7 days (limit 2)" in err
    assert 'the quota is set by the store\'s config.json key "quota" (2/7)' in err
    assert main(["submit", "--dataset", "example", "--predictions", str(variant(tmp_path, 4)), "--model-name",
                 "model-4", "--submitter", "me", "--quota", "0"]) == 0  # --quota still decides for this filing
    (tmp_path / "rexrank-store" / "requests" / "config.json").write_text(json.dumps({"quota": "lots"}))
    assert cli_submit(5) == 1
    assert "rexrank-store/config.json: quota='lots': expected N/DAYS, e.g. 1/7" in capsys.readouterr().err
