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
    assert copies.share(_filing("20260101T000000.000000-0000000003", prints[:197], who="bob"), original) == 0.985
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


def _spy_reads(monkeypatch, repo) -> list:
    """Every `read_optional` of `repo` from now on, as (snapshot, path)."""
    reads, read = [], repo.read_optional
    monkeypatch.setattr(repo, "read_optional", lambda snap, path: (reads.append((snap, path)), read(snap, path))[1])
    return reads


def test_candidates_are_found_reading_the_same_files_whatever_the_history_holds(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    original = file_private(store, tmp_path, big("original"), "alice")
    reads_per_filing = []
    for n in range(12):  # unrelated filings of others: the history grows
        file_private(store, tmp_path, big(f"unrelated {n}"), f"team{n}")
        seen = _spy_reads(monkeypatch, store.requests)
        copy = file_private(store, tmp_path, {**big("original"), "RG00007": "mine"}, f"copier{n}")
        monkeypatch.undo()
        reads_per_filing.append(len([p for _, p in seen if p.startswith(R.COPIES_DIR)]))
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


# ---- the copy rule's parts, by hand (issue 40: what the mutation tool found unpinned) ---------
def _rid(i: int) -> str:
    return f"20260101T000000.000000-{i:010x}"


def test_a_fingerprint_is_64_bits_of_hmac_sha256_of_the_study_id_a_nul_and_the_normalised_text():
    import hashlib
    import hmac

    assert copies.normalised(" No\t\teffusion. \n") == "No effusion." and copies.normalised(3) == "3"
    first = hmac.new(KEY, b"s1\x00No effusion.", hashlib.sha256).hexdigest()[:16]  # the module docstring's definition
    second = hmac.new(KEY, b"s2\x00Clear.", hashlib.sha256).hexdigest()[:16]
    assert copies.fingerprints(KEY, ["s1"], ["  No \n effusion. "]) == (first,)
    # sorted, and a study filed twice with the same text is one fingerprint
    assert copies.fingerprints(KEY, ["s2", "s1", "s1"], ["Clear.", "No effusion.", "No effusion."]) == tuple(
        sorted([first, second]))


def test_a_filing_is_kept_as_json_with_each_field_and_read_back_as_it_was():
    request = {"id": _rid(1), "test_set": "rexgradient", "track": "findings", "submitter": "Alice",
               "submitter_id": "u1", "namespace": "Acme", "namespace_id": "o9"}
    filing = copies.Filing.of(request, ["b" * 16, "a" * 16], n="3", content_time=5, content_from=copies.FROM_COMMIT)
    assert filing.to_json() == {"request_id": _rid(1), "test_set": "rexgradient", "track": "findings",
                                "submitter_key": "id:u1", "namespace_key": "id:o9", "content_time": 5.0,
                                "content_from": "commit", "n": 3, "fingerprints": ["a" * 16, "b" * 16]}
    assert type(filing.content_time) is float and type(filing.n) is int
    assert copies.Filing.from_json(filing.to_json()) == filing
    assert copies.Filing.from_json({**filing.to_json(), "content_time": "5", "n": "3"}) == filing
    by_name = copies.Filing.of({**request, "submitter": " Bob ", "submitter_id": None, "namespace": None}, [], n=0,
                               content_time=0, content_from=copies.FROM_UPLOAD)
    assert (by_name.submitter_key, by_name.namespace_key) == ("name:bob", "name:bob")  # no namespace: the submitter's
    ten = copies.Filing.of(request, [f"{i:016x}" for i in range(9, -1, -1)], n=10, content_time=0, content_from="upload")
    assert ten.anchors == tuple(f"{i:016x}" for i in range(8))  # the 8 smallest (a bottom-k sketch, k = 8)


def test_a_name_recorded_before_ids_is_one_party_with_the_account_it_is_bound_to():
    old = _filing(_rid(1), ["a"], who="alice")  # filed by name, before ids
    new = copies.Filing.of({"id": _rid(2), "test_set": "rexgradient", "track": "findings", "submitter": "alice2",
                            "submitter_id": "u1"}, ["a"], n=1, content_time=0, content_from=copies.FROM_UPLOAD)
    assert not old.same_party(new) and not old.same_party(new, {"bob": {"id": "u1"}})
    assert old.same_party(new, {"alice": {"id": "u1"}}) and new.same_party(old, {"alice": {"id": "u1"}})
    # by namespace: an organisation's name bound to its id
    team_old = _filing(_rid(3), ["a"], who="bob", ns="acme")
    team_new = copies.Filing.of({"id": _rid(4), "test_set": "rexgradient", "track": "findings", "submitter": "carol",
                                 "submitter_id": "c1", "namespace": "acme", "namespace_id": "o1"}, ["a"], n=1,
                                content_time=0, content_from=copies.FROM_UPLOAD)
    assert not team_old.same_party(team_new) and team_old.same_party(team_new, {"acme": {"id": "o1"}})


def test_the_share_of_filings_of_one_study_each_and_of_none():
    one, same = _filing(_rid(1), ["a"]), _filing(_rid(2), ["a"], who="bob")
    assert copies.share(one, same) == 1.0 and copies.share(one, _filing(_rid(3), ["b"], who="bob")) == 0.0
    assert copies.share(_filing(_rid(4), []), _filing(_rid(5), [], who="bob")) == 0.0  # nothing predicted: no copy


def test_where_filings_and_anchors_are_kept():
    assert copies.filing_path(_rid(7)) == f"copies/filings/{_rid(7)}.json"
    with pytest.raises(R.BadRequestId):
        copies.filing_path("../../config")
    assert copies.anchor_path("a/b", "find ings", "c3" + "0" * 14) == "copies/anchors/a_b/find_ings/c3.json"
    assert (copies.KEY_PATH, copies.PUBLISHED_COPIES) == ("copies/key.json", "copies/published.json")


def test_the_key_is_made_once_in_a_commit_of_its_own_and_a_damaged_one_is_made_again(tmp_path, monkeypatch):
    import json

    repo = open_store(tmp_path / "s").requests
    found, changes = copies.key_at(repo, repo.snapshot())
    assert len(found) == 32 and list(changes) == ["copies/key.json"]
    assert changes["copies/key.json"] == (json.dumps({"key": found.hex()}) + "\n").encode()
    messages, commit = [], repo.commit
    monkeypatch.setattr(repo, "commit", lambda changes, *, message, parent: (messages.append(message),
                                                                            commit(changes, message=message,
                                                                                   parent=parent))[1])
    # read as of the snapshot the commit is made on (a local repo reads its files whatever the
    # snapshot; the Hub's reads the snapshot's version)
    reads = _spy_reads(monkeypatch, repo)
    made = copies.key(repo)
    assert len(made) == 32 and copies.key(repo) == made and copies.key_at(repo, repo.snapshot()) == (made, {})
    assert messages == ["copies: the fingerprint key"]  # once
    assert reads and all(snap is not None and snap.version for snap, _ in reads)
    assert json.loads((tmp_path / "s" / "requests" / "copies" / "key.json").read_text()) == {"key": made.hex()}
    (tmp_path / "s" / "requests" / "copies" / "key.json").write_text(json.dumps({"key": "ab" * 31}))  # 62 digits
    again, changes = copies.key_at(repo, repo.snapshot())
    assert len(again) == 32 and again != made and list(changes) == ["copies/key.json"]


def test_the_index_finds_other_parties_filings_on_the_same_set_and_track_at_99_percent(tmp_path, monkeypatch):
    """Rule (CopyIndex.matches): candidates share an anchor; the filing itself, its own
    party's, another test set's or track's, and those under 99 % of the larger filing's
    studies are no match; 99 % is."""
    from rexrank.store import StoreError

    repo = open_store(tmp_path / "s").requests
    prints = [f"{i:016x}" for i in range(100)]
    mine = _filing(_rid(1), prints, when=10.0)
    filings = [mine,
               _filing(_rid(2), prints, who="alice", ns="alice"),  # my own party
               _filing(_rid(3), prints, who="bob", test_set="iu_xray"),  # another test set
               _filing(_rid(4), prints, who="bob", track="impression"),  # another track
               _filing(_rid(5), prints[2:] + ["y1", "y2"], who="carol"),  # 98 of 100
               _filing(_rid(6), prints[1:] + ["z1"], who="dave", when=5.0),  # 99 of 100, filed earlier
               _filing(_rid(7), prints, who="erin", when=20.0)]  # identical, later
    index = copies.CopyIndex(repo, repo.snapshot())
    assert index.filing(_rid(1)) is None
    changes = {}
    for filing in filings:
        changes.update(index.add(filing))
    shard = copies.anchor_path("rexgradient", "findings", prints[0])
    assert shard in changes and copies.filing_path(_rid(7)) in changes
    assert index.add(mine)[shard] == changes[shard]  # filed again (a requeue): listed once
    repo.commit(changes, message="filings", parent=repo.version())
    index = copies.CopyIndex(repo, repo.snapshot())
    assert index.filing(_rid(6)) == filings[5]
    found = index.matches(mine)
    assert [(f.request_id, common) for f, common in found] == [(_rid(6), 0.99), (_rid(7), 1.0)]
    # an anchor that names a filing no longer there is passed over, and the others are still read
    gone = tmp_path / "s" / "requests" / copies.filing_path(_rid(2))
    kept = gone.read_bytes()
    gone.unlink()
    assert [f.request_id for f, _ in copies.CopyIndex(repo, repo.snapshot()).matches(mine)] == [_rid(6), _rid(7)]
    gone.write_bytes(kept)
    reads = _spy_reads(monkeypatch, repo)  # every file read as of the index's snapshot
    assert copies.CopyIndex(repo, repo.snapshot()).matches(mine) == found
    assert len(reads) > 3 and all(snap is not None for snap, _ in reads)
    monkeypatch.undo()
    originals, later = copies.judge(mine, found)
    assert [f.request_id for f, _ in originals] == [_rid(6)] and [f.request_id for f, _ in later] == [_rid(7)]
    assert copies.describe([(filings[5], 2 / 3)]) == [{"request_id": _rid(6), "share": 0.6667,
                                                       "content_time": "1970-01-01T00:00:05Z", "content_from": "upload"}]
    (tmp_path / "s" / "requests" / copies.filing_path(_rid(6))).write_text('{"request_id": "x"}')
    with pytest.raises(StoreError, match=rf"{copies.filing_path(_rid(6))} is damaged; restore it from the repo's history"):
        copies.CopyIndex(repo, repo.snapshot()).matches(mine)


def test_a_published_copy_is_listed_with_its_original_and_the_list_emptied_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "now", lambda: 1_767_225_600.0)  # 2026-01-01T00:00:00Z
    copy, original = _filing(_rid(1), ["a"], when=60.0), _filing(_rid(2), ["a"], who="bob", when=0.0)
    flagged = copies.flag_published({"x": 1}, copy, original, 0.99996)
    assert flagged == {"x": 1, _rid(1): {"original": _rid(2), "share": 1.0, "flagged_time": "2026-01-01T00:00:00Z",
                                         "content_time": "1970-01-01T00:01:00Z",
                                         "original_content_time": "1970-01-01T00:00:00Z"}}
    assert copies.flag_published({}, copy, original, 2 / 3)[_rid(1)]["share"] == 0.6667  # four decimals
    assert copies.published_changes({}) == {"copies/published.json": None}
    repo = open_store(tmp_path / "s").requests
    reads = _spy_reads(monkeypatch, repo)  # read as of the snapshot given
    assert copies.published_copies(repo, repo.snapshot()) == {}
    assert reads and all(snap is not None for snap, _ in reads)
    repo.commit(copies.published_changes(flagged), message="flag", parent=repo.version())
    assert copies.published_copies(repo, repo.snapshot()) == flagged
    repo.commit({copies.PUBLISHED_COPIES: b'{"requests": [1]}'}, message="odd", parent=repo.version())
    assert copies.published_copies(repo, repo.snapshot()) == {}


def test_the_index_reads_names_bound_before_ids_and_passes_over_what_it_cannot_use(tmp_path):
    """CopyIndex without `legacy` reads accounts/legacy.json at its snapshot: a filing by a
    name bound to an id is one party with that id's; an anchor naming a request without a
    filing, or a shard whose anchors are not an object, finds nothing; a filing that is not
    an object is damaged."""
    import json

    from rexrank.store import StoreError

    repo = open_store(tmp_path / "s").requests
    prints = [f"{i:016x}" for i in range(10)]
    by_name = _filing(_rid(1), prints, who="bob")  # before ids
    by_id = copies.Filing.of({"id": _rid(2), "test_set": "rexgradient", "track": "findings", "submitter": "bob-2",
                              "submitter_id": "u2"}, prints, n=10, content_time=1.0, content_from=copies.FROM_UPLOAD)
    index = copies.CopyIndex(repo, repo.snapshot())
    changes = {**index.add(by_name), **index.add(by_id)}
    shard = copies.anchor_path("rexgradient", "findings", prints[0])
    changes[shard] = (json.dumps({"anchors": {**json.loads(changes[shard])["anchors"], prints[0]: [_rid(1), _rid(2),
                                                                                                     _rid(9), 7]}})).encode()
    repo.commit({**changes, "accounts/legacy.json": b'{"bob": {"id": "u2", "name": "bob"}}'}, message="f",
                parent=repo.version())
    assert copies.CopyIndex(repo, repo.snapshot()).matches(by_id) == []  # one party; 9 has no filing; 7 is no id
    assert [f.request_id for f, _ in copies.CopyIndex(repo, repo.snapshot(), legacy={}).matches(by_id)] == [_rid(1)]
    other = copies.anchor_path("iu_xray", "findings", prints[0])
    repo.commit({other: b'{"anchors": []}'}, message="odd", parent=repo.version())
    assert copies.CopyIndex(repo, repo.snapshot()).matches(_filing(_rid(3), prints, who="x", test_set="iu_xray")) == []
    repo.commit({copies.filing_path(_rid(1)): b"[1]"}, message="odd", parent=repo.version())
    with pytest.raises(StoreError, match=rf"{copies.filing_path(_rid(1))} is damaged; restore it from the repo's history"):
        copies.CopyIndex(repo, repo.snapshot(), legacy={}).filing(_rid(1))
    assert not by_id.before(by_id)  # a filing is not before itself
