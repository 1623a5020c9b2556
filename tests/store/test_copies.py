"""The copy rule (rexrank.store.copies) and the maintainers' review (rexrank.store.review,
`rexrank review`) on a local store: what counts as the same predictions, who is one party,
what a held request's release and rejection do, and that finding candidates reads the same
files whatever the history holds."""
from __future__ import annotations

import pytest

from rexrank.backend.worker import Worker
from rexrank.store import FAILED, FINISHED, PENDING, Quota, open_store
from rexrank.store import copies
from rexrank.store import records as R
from support.requests import example_rows, submit, write_jsonl

KEY = b"k" * 32


def test_whitespace_is_normalised_and_empty_predictions_copy_nothing():
    a = copies.fingerprints(KEY, ["s1", "s2", "s3"], ["No effusion.", " No  pneumothorax.\n", ""])
    b = copies.fingerprints(KEY, ["s1", "s2", "s3"], ["No\teffusion. ", "No pneumothorax.", "   "])
    assert a == b and len(a) == 2  # the empty study predicts nothing
    assert copies.fingerprints(KEY, ["s2", "s1"], ["No effusion.", "No  pneumothorax."]) != a  # ids are part of it
    assert copies.fingerprints(b"other key" * 4, ["s1"], ["No effusion."])[0] not in a  # keyed: unguessable
    assert copies.fingerprints(KEY, ["s1", "s2"], ["", ""]) == ()


def _filing(rid: str, prints, *, who="alice", ns=None, when=0.0, test_set="rexgradient", track="findings"):
    request = {"id": rid, "test_set": test_set, "track": track, "submitter": who, "namespace": ns or who}
    return copies.Filing.of(request, prints, n=len(prints), content_time=when, content_from=copies.FROM_UPLOAD)


def test_the_share_is_of_the_larger_filings_predicted_studies_and_one_party_is_never_a_copy():
    prints = [f"{i:016x}" for i in range(200)]
    original = _filing("20260101T000000.000000-0000000001", prints)
    near = _filing("20260101T000000.000000-0000000002", prints[:198] + ["x1", "x2"], who="bob", when=1)
    assert copies.share(original, near) == 0.99  # 198 of 200
    assert copies.share(original, _filing("20260101T000000.000000-0000000003", prints[:197], who="bob")) == 0.985
    assert near.before(original) is False and original.before(near)
    tie = _filing("20260101T000000.000000-0000000000", prints, who="bob", when=0.0)
    assert tie.before(original)  # the same instant: the earlier filing
    teammate = _filing("20260101T000000.000000-0000000004", prints, who="dave", ns="acme")
    assert teammate.same_party(_filing("20260101T000000.000000-0000000005", prints, who="erin", ns="acme"))
    assert teammate.same_party(_filing("20260101T000000.000000-0000000006", prints, who="dave", ns="dave"))
    assert not teammate.same_party(near)


def big(tag: str, n: int = 200) -> dict[str, str]:
    return {f"RG{i:05d}": f"Study {i}: {tag} finding, variant {i * 13}." for i in range(n)}


def file_private(store, tmp_path, rows, who, model="m", **kw):
    name = f"{who}-{model}-{len(list(tmp_path.iterdir()))}.jsonl"
    return submit(store, write_jsonl(tmp_path / name, rows), test_set="rexgradient", submitter=who, model_name=model,
                  **kw)


def test_candidates_are_found_reading_the_same_files_whatever_the_history_holds(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    original = file_private(store, tmp_path, big("original"), "alice")
    reads_per_filing = []
    for n in range(12):  # unrelated filings of others: the history grows
        file_private(store, tmp_path, big(f"unrelated {n}"), f"team{n}")
        seen: list[str] = []
        read = store.requests.read_optional
        monkeypatch.setattr(store.requests, "read_optional", lambda snap, path: (seen.append(path), read(snap, path))[1])
        copy = file_private(store, tmp_path, {**big("original"), "RG00007": "mine"}, f"copier{n}")
        monkeypatch.undo()
        reads_per_filing.append(len([p for p in seen if p.startswith(R.COPIES_DIR)]))
        assert copy["status"] == "HELD"
        assert [m["request_id"] for m in store.get_request(copy["id"])["review"]["matches"]][0] == original["id"]
    # the key, ANCHORS anchor shards at most (all distinct for about 1 key in 10), the list of
    # published copies, and one filing per candidate: the original and the copies found so far
    assert all(r <= 1 + copies.ANCHORS + 1 + (1 + n) for n, r in enumerate(reads_per_filing)), reads_per_filing
    assert reads_per_filing[-1] - reads_per_filing[0] <= 11  # more copies to compare, not more history read


def test_a_released_request_is_scored_once_and_never_held_again(tmp_path, capsys):
    from rexrank.cli.main import main
    from rexrank.store import ledger

    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = example_rows()
    original = submit(store, write_jsonl(tmp_path / "a.jsonl", rows), submitter="alice", model_name="A")
    held = submit(store, write_jsonl(tmp_path / "b.jsonl", rows), submitter="bob", model_name="B")
    assert held["status"] == "HELD" and held["history"][-1]["status"] == "HELD"
    assert main(["review", "--store", str(tmp_path / "s")]) == 0
    listing = capsys.readouterr().out
    assert "held for review (1):" in listing and held["id"] in listing and original["id"] in listing
    assert main(["review", "--store", str(tmp_path / "s"), "--release", held["id"]]) == 0
    released = store.get_request(held["id"])
    assert released["status"] == PENDING and released["error"] is None and released["review"]["released"]
    assert ledger.charge_key(released) == held["id"]  # the same round: never scored before
    while Worker(store, metrics="bleu2", worker_id="w").run(once=True):
        pass
    assert store.get_request(held["id"])["status"] == FINISHED  # the backend's own check does not hold it again
    assert main(["review", "--store", str(tmp_path / "s")]) == 0
    assert "nothing to review" in capsys.readouterr().out


def test_review_refuses_what_is_not_held_and_a_rejection_counts_against_the_quota(tmp_path, capsys):
    from rexrank.cli.main import main

    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = example_rows()
    original = submit(store, write_jsonl(tmp_path / "a.jsonl", rows), submitter="alice", model_name="A")
    held = submit(store, write_jsonl(tmp_path / "b.jsonl", rows), submitter="bob", model_name="B")
    assert main(["review", "--store", str(tmp_path / "s"), "--release", original["id"]]) == 1
    assert f"request {original['id']} is PENDING, not held for review" in capsys.readouterr().err
    assert main(["review", "--store", str(tmp_path / "s"), "--reason", "why"]) == 1
    assert main(["requeue", held["id"], "--store", str(tmp_path / "s")]) == 1  # a held request goes through review
    assert f"release it with `rexrank review --release {held['id']}`" in capsys.readouterr().err
    assert main(["review", "--store", str(tmp_path / "s"), "--reject", held["id"]]) == 0
    rejected = store.get_request(held["id"])
    assert (rejected["status"], rejected["failure_kind"]) == (FAILED, "rejected")
    with pytest.raises(Exception, match="already has 1 submission"):  # bob's rejected copy used his week
        submit(open_store(tmp_path / "s", quota=Quota(1, 7)), write_jsonl(tmp_path / "c.jsonl",
               {k: v + " bob's own" for k, v in rows.items()}), submitter="bob", model_name="B2")


def test_filings_made_before_the_copy_index_are_fingerprinted_by_a_reindex(tmp_path):
    from rexrank.store.layout import reindex

    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = example_rows()
    old = submit(store, write_jsonl(tmp_path / "a.jsonl", rows), submitter="alice", model_name="A")
    for path in (tmp_path / "s" / "requests" / "copies").rglob("*.json"):  # as a store of an earlier version
        if path.name != "key.json":
            path.unlink()
    assert submit(store, write_jsonl(tmp_path / "b.jsonl", rows), submitter="bob", model_name="B")["status"] == PENDING
    reindex(store)  # fingerprints both, dated when they were received
    third = submit(store, write_jsonl(tmp_path / "c.jsonl", rows), submitter="carol", model_name="C")
    assert third["status"] == "HELD"
    assert [m["request_id"] for m in store.get_request(third["id"])["review"]["matches"]][0] == old["id"]


def test_stored_predictions_are_fingerprinted_through_the_sandboxed_reader(tmp_path, monkeypatch):
    """A filing the copy index lacks is fingerprinted from its stored parquet, which is as
    untrusted as any predictions file: read in the reader's limited child (rexrank.sandbox),
    never parsed in the backend's process; the fingerprints are the filing's own."""
    from rexrank import sandbox

    store = open_store(tmp_path / "s", quota=Quota(0))
    request = submit(store, write_jsonl(tmp_path / "a.jsonl", example_rows()), submitter="alice", model_name="A")
    indexed = store.filing_of(request)
    for path in (tmp_path / "s" / "requests" / "copies").rglob("*.json"):  # as a store of an earlier version
        if path.name != "key.json":
            path.unlink()
    reads, real = [], sandbox.run
    monkeypatch.setattr(sandbox, "run", lambda function, args, **kw: reads.append(function.__name__) or real(function, args, **kw))
    again = store.filing_of(request)
    assert reads == ["read_rows_here"]
    assert again.prints == indexed.prints and again.n == indexed.n
