"""Tests that pin the store's queue operations and record helpers (issue 32: the survivors of
mutmut's runs over rexrank.store.queue and rexrank.store.records). Each asserts against a
rule written out by hand (the modules' docstrings), never against the code's earlier output."""
from __future__ import annotations

import json
import re

import pytest

from rexrank.store import records as R
from test_pins import _store_with_request
from test_store import submit, variant

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z (56 x 365 days + 14 leap days after 1970, by hand)


def _at(monkeypatch, ts: float) -> None:
    """The store's clock (records.now, which the queue reads) stopped at `ts`."""
    monkeypatch.setattr(R, "now", lambda: ts)


def _commits(monkeypatch, store) -> list[str]:
    """The message of every commit the store makes to its requests repo from now on (what
    a Hub store's history shows)."""
    messages: list[str] = []
    commit = store.requests.commit

    def spy(changes, *, message, parent):
        messages.append(message)
        return commit(changes, message=message, parent=parent)

    monkeypatch.setattr(store.requests, "commit", spy)
    return messages


def _unregister(tmp_path, request_id: str, store_dir: str = "s") -> None:
    """Drop a request from the backend's register of received requests, as if its file had
    been written straight into queue/ rather than filed through the API."""
    path = tmp_path / store_dir / "requests" / R.RECEIVED_INDEX
    index = json.loads(path.read_text())
    del index["requests"][request_id]
    path.write_text(json.dumps(index))


def _received(tmp_path, store_dir: str = "s") -> dict:
    path = tmp_path / store_dir / "requests" / R.RECEIVED_INDEX
    return json.loads(path.read_text()).get("requests", {}) if path.exists() else {}


def test_each_queue_operation_commits_with_a_message_naming_it_and_the_request(tmp_path, monkeypatch):
    """A Hub store's history is the audit trail: each operation's commit says what it did to
    which request ("<operation> <id>", a claim also by whom)."""
    store, req = _store_with_request(tmp_path)
    rid = req["id"]
    messages = _commits(monkeypatch, store)
    store.claim("w1", lease_seconds=60)
    assert store.renew_lease(rid, "w1", lease_seconds=60)
    assert store.record_dispatch(rid, "w1", {"jobs": []})
    assert store.release(rid, "w1", reason="r")
    store.claim("w1", lease_seconds=60)
    assert store.fail(rid, "w1", error="e")
    store.requeue(rid)
    store.claim("w1", lease_seconds=60)
    assert store.begin_publish(rid, "w1")
    assert store.finish(rid, "w1", result_id="x")
    assert messages == [f"claim {rid} by w1", f"renew lease {rid}", f"dispatch {rid}", f"release {rid}",
                        f"claim {rid} by w1", f"fail {rid}", f"requeue {rid}", f"claim {rid} by w1",
                        f"publish {rid}", f"finish {rid}"]
    store2, other = _store_with_request(tmp_path / "b")
    messages2 = _commits(monkeypatch, store2)
    store2.cancel(other["id"])
    assert messages2 == [f"cancel {other['id']}"]


def test_a_renewal_dates_the_lease_and_registers_arrivals_at_the_servers_time(tmp_path, monkeypatch):
    """Rule (renew_lease, _update's `arrivals`): a renewal at time t sets lease_expires to
    t + lease_seconds and registers the requests that arrived since the backend last looked,
    dated t; other holder operations (here: publishing) touch only their own request."""
    store, first = _store_with_request(tmp_path)
    _at(monkeypatch, T0)
    store.claim("w1", lease_seconds=60)
    second = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    _unregister(tmp_path, second["id"])
    assert second["id"] not in _received(tmp_path)
    _at(monkeypatch, T0 + 30)
    assert store.renew_lease(first["id"], "w1", lease_seconds=90)
    renewed = store.get_request(first["id"])
    assert renewed["lease_expires"] == T0 + 30 + 90 and renewed["lease_seconds"] == 90.0
    assert _received(tmp_path)[second["id"]] == "2026-01-01T00:00:30Z"
    assert store.get_request(second["id"])["submitted_time"] == "2026-01-01T00:00:30Z"
    third = submit(store, variant(tmp_path, 2), model_name="model-c", submitter="carol")
    _unregister(tmp_path, third["id"])
    _at(monkeypatch, T0 + 60)
    assert store.begin_publish(first["id"], "w1")
    assert third["id"] not in _received(tmp_path)  # left for the next claim or renewal



def test_requeueing_a_running_request_being_published_clears_its_worker_lease_and_publishing(tmp_path, monkeypatch):
    """Rule (requeue): a stuck RUNNING request goes back to PENDING with no worker, no lease,
    no error, attempts 0, not publishing and no dispatch, and its history gains a PENDING
    entry naming no worker."""
    store, req = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=60)
    assert store.record_dispatch(req["id"], "w1", {"jobs": ["j1"]}) and store.begin_publish(req["id"], "w1")
    _at(monkeypatch, T0)
    back = store.requeue(req["id"])
    assert {k: back[k] for k in ("status", "worker", "lease_expires", "error", "failure_kind", "attempts", "publishing",
                                 "dispatch")} == {"status": "PENDING", "worker": None, "lease_expires": None, "error": None,
                                                  "failure_kind": None, "attempts": 0, "publishing": False, "dispatch": None}
    assert back["history"][-1] == {"time": "2026-01-01T00:00:00Z", "status": "PENDING"}
    assert store.cancel(req["id"])["status"] == "FAILED"  # no longer "being published": it can be cancelled


@pytest.mark.parametrize("operation", ["requeue", "cancel"])
def test_a_request_settled_between_the_check_and_the_commit_is_left_as_it_is(tmp_path, monkeypatch, operation):
    """Rule (requeue, cancel): the status is checked again inside the commit; a RUNNING
    request that its worker finished after the maintainer's command read it stays FINISHED,
    and the command returns it as it is."""
    store, req = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=60)
    read = store.get_request

    def read_then_the_worker_finishes(request_id):
        current = read(request_id)
        if current["status"] == "RUNNING":
            assert store.finish(request_id, "w1", result_id="res-1")
        return current

    monkeypatch.setattr(store, "get_request", read_then_the_worker_finishes)
    out = getattr(store, operation)(req["id"])
    assert (out["status"], out["result_id"]) == ("FINISHED", "res-1")
    assert read(req["id"]) == out


def test_cancelling_a_running_request_settles_it_without_worker_or_lease(tmp_path, monkeypatch):
    """Rule (cancel): a RUNNING request becomes FAILED, kind "cancelled", dated now, with no
    worker and no lease left (its worker's publishing step then fails)."""
    store, req = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=60)
    _at(monkeypatch, T0)
    out = store.cancel(req["id"], reason="withdrawn")
    assert {k: out[k] for k in ("status", "failure_kind", "error", "worker", "lease_expires", "finished_time")} == \
        {"status": "FAILED", "failure_kind": "cancelled", "error": "cancelled by the maintainers: withdrawn",
         "worker": None, "lease_expires": None, "finished_time": "2026-01-01T00:00:00Z"}
    assert out["history"][-1] == {"time": "2026-01-01T00:00:00Z", "status": "FAILED"}
    assert not store.begin_publish(req["id"], "w1")


def test_the_backends_policy_check_reads_settled_requests_by_name_and_by_content(tmp_path):
    """Rule (policy_problem, _history): the backend checks a request against the settled
    requests filed under its model name and under its predictions' content (the index of
    done/), not only the open ones: alice's finished request makes a second filing of the
    same model with the same predictions an identical resubmission. A model name is its
    namespace's: bob may use alice's (the board shows "bob / model-a")."""
    from rexrank.store import Quota

    store, first = _store_with_request(tmp_path)  # alice's model-a, the example predictions
    store._quota = Quota(0)
    store.claim("w", lease_seconds=60)
    assert store.finish(first["id"], "w", result_id="res-1")  # settled, moved to done/ and indexed
    later = {"submitted_time": R.iso(R.parse_iso(first["submitted_time"]) + 60), "id": R.new_request_id(T0, "again")}
    again = {**first, **later, "status": "PENDING"}
    assert store.policy_problem(again) == (
        f"identical resubmission: request {first['id']} (FINISHED) already has these predictions for model "
        "'alice / model-a' on example/findings")
    bobs_name = {**again, "submitter": "bob", "namespace": "bob", "predictions": {"sha256": "0" * 64}}
    assert store.policy_problem(bobs_name) is None


def _quota_message(submitter: str, first_time: str) -> str:
    """check_quota's refusal for a default quota (1 per 7 days), written out."""
    return (f"submitter {submitter!r} already has 1 submission(s) on example/findings in the last 7 days (limit 1); "
            f"next submission possible after {R.iso(R.parse_iso(first_time) + 7 * 86400)} (the quota is set with "
            "--quota or the store's config.json key \"quota\")")


def test_the_backends_quota_counts_requests_filed_before_this_one_and_finished_ones(tmp_path):
    """Rule (policy_problem): the requests that count against a request's quota are those
    seen by the backend and filed before it ((time, id) order), and any FINISHED one
    whatever its date; a request filed after it never counts."""
    from rexrank.store import Quota, open_store

    store, first = _store_with_request(tmp_path)  # quota: 1 per 7 days
    second = submit(open_store(tmp_path / "s", quota=Quota(0)), variant(tmp_path, 1), model_name="model-b")
    assert R.parse_iso(second["submitted_time"]) >= R.parse_iso(first["submitted_time"])
    assert store.policy_problem(store.get_request(first["id"])) is None  # the later one does not count
    assert store.policy_problem(store.get_request(second["id"])) == _quota_message("alice", first["submitted_time"])
    store2, done = _store_with_request(tmp_path / "b")
    store2.claim("w", lease_seconds=60)
    assert store2.finish(done["id"], "w", result_id="res-1")
    dated_before = {**second, "id": R.new_request_id(T0, "dated before"),
                    "submitted_time": R.iso(R.parse_iso(done["submitted_time"]) - 60)}
    assert store2.policy_problem(dated_before) == _quota_message("alice", done["submitted_time"])


def test_the_backend_refuses_a_submitter_the_organisers_did_not_approve(tmp_path):
    """Rule (policy_problem, config approved_submitters): a test set listed there accepts
    only the submitters listed for it, with check_approved's message written out."""
    store, req = _store_with_request(tmp_path)
    (tmp_path / "s" / "requests" / R.CONFIG_FILE).write_text(json.dumps({"approved_submitters": {"example": ["carol"]}}))
    assert store.policy_problem(req) == (
        "test set example accepts submissions only from submitters approved by its organisers, and 'alice' is not one "
        "of them; ask the organisers to be added")
    assert store.policy_problem({**req, "submitter": "carol"}) is None


def test_the_backend_lets_a_namespace_use_the_name_of_a_published_entry(tmp_path):
    """Rule (policy_problem): nobody owns a bare model name, not even a published ReXrank
    entry: a submitted "MedVersa" is shown as "alice / MedVersa" beside the published one."""
    store, req = _store_with_request(tmp_path)
    store.add_result({"id": "pub-1", "model_name": "MedVersa", "test_set": "example", "track": "findings", "values": {},
                      "source": "published"})
    store.ensure_results_indexed()
    assert store.policy_problem({**req, "model_name": "MedVersa"}) is None


def _settled_left_in_the_queue(tmp_path, n: int) -> tuple:
    """A store with one PENDING request (bob's) and `n` FAILED requests left in queue/, as a
    worker of an earlier version left them (their ids made by hand, one second apart)."""
    store, failed = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=60)
    assert store.fail(failed["id"], "w1", error="boom")
    pending = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    record = json.loads((tmp_path / "s" / "requests" / R.request_path(failed["id"], "FAILED")).read_text())
    (tmp_path / "s" / "requests" / R.request_path(failed["id"], "FAILED")).unlink()
    ids = [R.new_request_id(T0 + i, "by hand") for i in range(n)]
    for rid in ids:
        (tmp_path / "s" / "requests" / R.request_path(rid)).write_text(json.dumps({**record, "id": rid}))
    return store, pending, ids


@pytest.mark.parametrize("n", [1, 25])
def test_a_claim_moves_up_to_25_settled_requests_left_in_the_queue_to_done(tmp_path, monkeypatch, caplog, n):
    """Rule (claim): settled requests in queue/ (an older worker's) move to done/ and into
    the settled index in the claim's own commit, whose message says how many; the log
    says so too."""
    store, pending, ids = _settled_left_in_the_queue(tmp_path, n)
    messages = _commits(monkeypatch, store)
    caplog.set_level("INFO", logger="rexrank.store")
    assert store.claim("w2", lease_seconds=60)["id"] == pending["id"]
    assert messages == [f"claim {pending['id']} by w2; move {n} settled request(s) to done/"]
    requests = tmp_path / "s" / "requests"
    assert all((requests / "done" / f"{rid}.json").exists() and not (requests / "queue" / f"{rid}.json").exists()
               for rid in ids)
    by_name = json.loads((requests / R.key_file(R.REQUEST_NAMES_DIR, "model-a")).read_text())["requests"]
    assert set(ids) <= set(by_name)
    assert f"{store.name}: moved {n} settled request(s) from queue/ to done/ and indexed them (the store layout of " \
        "this version: workers list only open requests)" in caplog.text


def test_more_than_25_settled_requests_in_the_queue_are_a_store_of_the_earlier_layout(tmp_path, caplog):
    """Rule (claim, MOVE_IN_A_CLAIM = 25): 26 settled requests in queue/ mean a store of the
    earlier layout: they are moved and indexed first (rexrank.store.layout), the log says
    how many, and the claim then proceeds."""
    store, pending, ids = _settled_left_in_the_queue(tmp_path, 26)
    caplog.set_level("INFO", logger="rexrank.store")
    assert store.claim("w2", lease_seconds=60)["id"] == pending["id"]
    requests = tmp_path / "s" / "requests"
    assert all((requests / "done" / f"{rid}.json").exists() for rid in ids)
    assert f"{store.name}: moved 26 settled request(s) from queue/ to done/ and indexed them: the store had the " \
        "layout of an earlier rexrank, in which workers read every request ever filed" in caplog.text


def test_a_finished_request_shows_no_error_even_one_its_writer_put_in_its_file(tmp_path):
    """Rule (finish): FINISHED sets error to None and the lease to none; `rexrank status`
    must not show an error text a request's writer put in its file."""
    store, req = _store_with_request(tmp_path)
    path = tmp_path / "s" / "requests" / R.request_path(req["id"])
    path.write_text(json.dumps({**json.loads(path.read_text()), "error": "your model was disqualified"}))
    store.claim("w", lease_seconds=60)
    assert store.finish(req["id"], "w", result_id="res-1")
    done = store.get_request(req["id"])
    assert (done["status"], done["error"], done["lease_expires"]) == ("FINISHED", None, None)
    assert R.status_view(done)["error"] is None


def test_the_backends_policy_check_reads_again_when_a_listed_request_settles_meanwhile(tmp_path, monkeypatch):
    """Rule (policy_problem: consistent_reads): a request another worker settles between the
    listing of queue/ and its read (moved to done/ after the index was read) still counts:
    the history is read again at one version. Here alice's earlier request finishes while
    her second one is checked, and still takes her quota (1 per 7 days)."""
    from rexrank.store import Quota, open_store

    store, first = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=60)
    second = submit(open_store(tmp_path / "s", quota=Quota(0)), variant(tmp_path, 1), model_name="model-b")
    queued = store._queued
    settled: list[str] = []

    def list_while_the_worker_finishes(snap):
        if not settled:  # once: the first listing's files change before they are read
            assert store.finish(first["id"], "w1", result_id="res-1")
            settled.append(first["id"])
        return queued(snap)

    monkeypatch.setattr(store, "_queued", list_while_the_worker_finishes)
    assert store.policy_problem(store.get_request(second["id"])) == _quota_message("alice", first["submitted_time"])
    assert settled == [first["id"]]


def _record_reads(store, monkeypatch) -> list:
    """(type of the snapshot given, path) of each file the store's requests read from now on."""
    seen: list = []
    read_optional = store.requests.read_optional

    def spy(snapshot, path):
        seen.append((type(snapshot), path))
        return read_optional(snapshot, path)

    monkeypatch.setattr(store.requests, "read_optional", spy)
    return seen


def test_every_read_a_queue_operation_makes_is_at_its_transactions_snapshot(tmp_path, monkeypatch):
    """Rule (transact: "decide must only depend on the snapshot and files read at its
    version"): a Hub store reads each file at a snapshot's commit (its `files`), so every
    read of the index and the register inside a claim or an update is given the snapshot
    the transaction listed, never None (which a local store would not notice)."""
    from rexrank.store.repo import Snapshot

    store, req = _store_with_request(tmp_path)
    seen = _record_reads(store, monkeypatch)
    store.claim("w", lease_seconds=60)
    assert store.renew_lease(req["id"], "w", lease_seconds=60) and store.begin_publish(req["id"], "w")
    assert store.finish(req["id"], "w", result_id="r")
    assert {p for _, p in seen} >= {R.RECEIVED_INDEX, R.RECENT_INDEX}
    assert all(kind is Snapshot for kind, _ in seen), [p for kind, p in seen if kind is not Snapshot]


def test_a_requeued_request_leaves_the_settled_indexes(tmp_path):
    """Rule (_update via IndexEdit.move_request): a FAILED request in done/ that is requeued
    moves back to queue/ and out of the settled indexes (the queue tables' recent list and
    the index by model name), which list settled requests only."""
    store, req = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.fail(req["id"], "w", error="boom")
    requests = tmp_path / "s" / "requests"
    by_name = requests / R.key_file(R.REQUEST_NAMES_DIR, "model-a")
    assert req["id"] in json.loads(by_name.read_text())["requests"]
    store.requeue(req["id"])
    assert (requests / R.request_path(req["id"])).exists() and not (requests / R.request_path(req["id"], "FAILED")).exists()
    assert not by_name.exists() or req["id"] not in json.loads(by_name.read_text()).get("requests", {})
    recent = requests / R.RECENT_INDEX
    assert not recent.exists() or all(e["id"] != req["id"] for e in json.loads(recent.read_text()).get("requests", []))


def test_by_default_a_request_interrupted_three_times_fails(tmp_path, monkeypatch):
    """Rule (claim's max_attempts = 3): leases that expire three times leave a FAILED request
    ("interrupted 3 times"); the third claim still happens."""
    from rexrank.store import queue as Q
    from test_pins import _Clock

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    for attempt in (1, 2, 3):
        assert store.claim(f"w{attempt}", lease_seconds=10)["attempts"] == attempt
        clock.t += 10
    messages = _commits(monkeypatch, store)
    assert store.claim("w4", lease_seconds=10) is None
    assert messages == ["fail interrupted requests"]
    failed = store.get_request(req["id"])
    assert failed["status"] == "FAILED" and failed["error"].startswith("scoring was interrupted 3 times")


def test_a_request_file_with_an_old_id_does_not_jump_the_queue(tmp_path, monkeypatch):
    """Rule (claim): the queue's order is the server's received time, then the id; a request
    file written straight into queue/ under an id dated years back is received when the
    backend first sees it, after a request filed earlier, and is claimed after it."""
    store, first = _store_with_request(tmp_path)
    other = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    requests = tmp_path / "s" / "requests"
    record = json.loads((requests / R.request_path(other["id"])).read_text())
    (requests / R.request_path(other["id"])).unlink()
    _unregister(tmp_path, other["id"])
    old_id = R.new_request_id(T0 - 4 * 365 * 86400, "written by hand")  # a 2022 id
    (requests / R.request_path(old_id)).write_text(json.dumps({**record, "id": old_id}))
    _at(monkeypatch, R.parse_iso(first["submitted_time"]) + 3600)  # seen an hour after the first was filed
    assert store.claim("w", lease_seconds=60)["id"] == first["id"]
    assert store.get_request(old_id)["submitted_time"] == R.iso(R.parse_iso(first["submitted_time"]) + 3600)


def test_a_claim_with_nothing_to_claim_still_registers_arrivals_and_forgets_removed_requests(tmp_path, monkeypatch,
                                                                                               caplog):
    """Rule (claim): with nothing to claim, a claim commits only the register of received
    requests ("register received requests"): entries of requests no longer in queue/ (removed
    by hand) are dropped, open ones kept; with nothing to register it commits nothing.
    A claim that moves nothing logs no move."""
    store, req = _store_with_request(tmp_path)
    caplog.set_level("INFO", logger="rexrank.store")
    store.claim("w", lease_seconds=60)
    assert "moved" not in caplog.text
    gone = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    (tmp_path / "s" / "requests" / R.request_path(gone["id"])).unlink()  # removed by hand: never claimed
    assert gone["id"] in _received(tmp_path)
    messages = _commits(monkeypatch, store)
    assert store.claim("w2", lease_seconds=60) is None  # the first request's lease is live
    assert messages == ["register received requests"]
    assert gone["id"] not in _received(tmp_path) and req["id"] in _received(tmp_path)  # open: it keeps its time
    assert store.claim("w2", lease_seconds=60) is None and messages == ["register received requests"]


# ---- store.records: paths, public names and views, written out ---------------------------
RID = "20260101T120000.000000-0123456789"  # the form new_request_id gives (records.REQUEST_ID_EXAMPLE)


def test_result_and_scratch_paths_by_hand():
    """Where records live (records' module docstring): index/records/<first two hex digits of
    the path's sha256>.json (FIPS 180-2's test vector sha256("abc") = ba7816bf...), records/
    and per_study/ under test set and track with every character but letters, digits and
    "-_." replaced by "_" (an empty part is "_"), scratch/<id>/shard-<kkk>-attempt-<a>."""
    assert R.result_shard("abc") == "index/records/ba.json"
    assert R.result_shard("") == "index/records/e3.json"  # sha256 of nothing: e3b0c442...
    record = {"test_set": "iu_xray", "track": "find ings", "id": "../a:b"}
    assert R.result_path(record) == "records/iu_xray/find_ings/.._a_b.json"
    assert R.result_path({"test_set": "", "track": "t-1", "id": "x.y"}) == "records/_/t-1/x.y.json"
    assert R.per_study_path("iu/xray", "", "r 1") == "per_study/iu_xray/_/r_1.parquet"
    assert R.shard_paths(RID, 3, 2) == (f"scratch/{RID}/shard-003-attempt-2.json", f"scratch/{RID}/shard-003-attempt-2.parquet")
    assert R.shard_paths(RID, "12", 1.0)[0] == f"scratch/{RID}/shard-012-attempt-1.json"
    with pytest.raises(R.BadRequestId):
        R.shard_paths("../x", 0, 0)


def test_public_names_of_stores_sources_and_paths_by_hand():
    """Nothing public holds a server's or a submitter's path: a local store is named
    "local store <its folder's name>", a local source or a local path in a provenance by its
    base name (after / or \\, trailing ones dropped); hf:// ids, URLs and plain words stay."""
    assert R.public_store_name("hf://org/store") == "hf://org/store"
    assert R.public_store_name("/srv/data/my-store/") == "local store my-store"
    assert R.public_store_name("HF://org/store") == "local store store"
    assert R.public_source("C:\\Users\\me\\preds.jsonl") == "preds.jsonl"
    assert R.public_source("/home/me/runs/a/b/preds.parquet") == "preds.parquet"
    assert R.public_source("hf://me/preds@abc") == "hf://me/preds@abc"
    assert R.public_source(None) == R.public_source("") == ""
    assert R.public_paths({"ckpt": ["/opt/models/a.pt", "~/b.bin", "./c.pt", "C:\\d.pt", "..\\e.pt"],
                           "hub": "hf://x/y", "url": "https://e.org/a/b", "name": "BERT/base", 3: 4.5}) == \
        {"ckpt": ["a.pt", "b.bin", "c.pt", "d.pt", "e.pt"], "hub": "hf://x/y", "url": "https://e.org/a/b",
         "name": "BERT/base", 3: 4.5}


def test_public_predictions_sources_by_hand():
    """A Hub dataset is named by its id only if the Hub said it was public when filed (True,
    not a truthy string); else "a private dataset at commit <revision, or the id's @sha>"; a
    local file by its base name."""
    hub = "hf://alice/preds@0123abc"
    assert R.public_predictions_source({"source": hub, "public": True}) == hub
    assert R.public_predictions_source({"source": hub, "public": "yes"}) == "a private dataset at commit 0123abc"
    assert R.public_predictions_source({"source": hub, "revision": "fedcba9"}) == "a private dataset at commit fedcba9"
    assert R.public_predictions_source({"source": "hf://a/b@c@d"}) == "a private dataset at commit d"
    assert R.public_predictions_source({"source": "/home/alice/preds.jsonl", "public": True}) == "preds.jsonl"
    assert R.public_predictions_source({}) == ""


def test_status_view_by_hand():
    """What `rexrank status --json` prints: id, status, error, the result's values (None
    without a result), and notes only when there are some."""
    request = {"id": RID, "status": "FINISHED", "error": None, "notes": ("metric x not run",), "model_name": "m"}
    assert R.status_view(request, {"values": {"bleu2": 0.5}, "id": "r"}) == \
        {"id": RID, "status": "FINISHED", "error": None, "results": {"bleu2": 0.5}, "notes": ["metric x not run"]}
    assert R.status_view({"id": RID, "status": "FAILED", "error": "boom", "notes": []}) == \
        {"id": RID, "status": "FAILED", "error": "boom", "results": None}
    assert R.status_view({"id": RID, "status": "PENDING"}, {}) == {"id": RID, "status": "PENDING", "error": None,
                                                                    "results": None}


def test_records_are_written_as_indented_utf8_json_and_jsonable_makes_plain_values():
    """dumps: JSON indented by 2, non-ASCII kept as UTF-8, a final newline, NaN refused;
    jsonable: numpy scalars and arrays to Python, NaN and infinities to None, tuples to
    lists, keys to strings."""
    import numpy as np

    assert R.dumps({"a": "é", "b": [1]}) == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}\n'.encode("utf-8")
    with pytest.raises(ValueError):
        R.dumps({"x": float("nan")})
    out = R.jsonable({1: np.float32(0.5), "a": (np.int64(3), float("inf")), "n": np.array([1.0, np.nan]),
                      "m": -float("inf"), "s": "x", "f": 2.5})
    assert out == {"1": 0.5, "a": [3, None], "n": [1.0, None], "m": None, "s": "x", "f": 2.5}
    assert type(out["a"][0]) is int and type(out["1"]) is float


def test_request_ids_are_the_time_to_the_microsecond_and_a_10_digit_hash():
    """new_request_id: UTC %Y%m%dT%H%M%S.%f, "-", and the first 10 hex digits of the sha256 of
    repr(ts) and the parts joined by NUL (the digest written out with hashlib)."""
    import hashlib

    rid = R.new_request_id(T0 + 0.25, "alice", "model-a")
    digest = hashlib.sha256(b"1767225600.25\x00alice\x00model-a").hexdigest()[:10]
    assert rid == f"20260101T000000.250000-{digest}"
    assert R.check_request_id(rid) == rid
    assert R.new_request_id(T0, "a") != R.new_request_id(T0, "b")


def test_a_lease_of_an_earlier_versions_record_uses_the_claims_duration_and_counts_no_attempt(tmp_path, monkeypatch):
    """Rule (claim on a record an earlier version wrote: no lease_token, lease_seconds or
    attempts): its lease lasts the claiming worker's lease_seconds from when this process
    first saw it, and a missing attempt count is 0 (claimed again with max_attempts 1; failed
    with "interrupted 0 times" with max_attempts 0)."""
    from rexrank.store import queue as Q
    from test_pins import _Clock

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    path = tmp_path / "s" / "requests" / R.request_path(req["id"])

    def as_an_earlier_version_wrote_it():
        record = json.loads(path.read_text())
        path.write_text(json.dumps({k: v for k, v in record.items() if k not in ("lease_token", "lease_seconds", "attempts")}))

    store.claim("w1", lease_seconds=10)
    as_an_earlier_version_wrote_it()
    assert store.claim("w2", lease_seconds=10, max_attempts=1) is None  # first seen now
    clock.t += 9.9
    assert store.claim("w2", lease_seconds=10, max_attempts=1) is None
    clock.t += 0.1
    again = store.claim("w2", lease_seconds=10, max_attempts=1)
    assert (again["worker"], again["attempts"]) == ("w2", 1)
    as_an_earlier_version_wrote_it()
    store.claim("w3", lease_seconds=10, max_attempts=0)
    clock.t += 10
    assert store.claim("w3", lease_seconds=10, max_attempts=0) is None
    failed = store.get_request(req["id"])
    assert failed["status"] == "FAILED" and failed["error"].startswith("scoring was interrupted 0 times (")


def test_a_claim_that_fails_an_interrupted_request_goes_on_to_claim_the_next(tmp_path, monkeypatch):
    """Rule (claim): failing a request interrupted max_attempts times does not end the claim:
    the next PENDING request is claimed in the same commit."""
    from rexrank.store import queue as Q
    from test_pins import _Clock

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, first = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=10, max_attempts=1)
    second = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    clock.t += 10
    messages = _commits(monkeypatch, store)
    assert store.claim("w2", lease_seconds=10, max_attempts=1)["id"] == second["id"]
    assert messages == [f"claim {second['id']} by w2"]
    assert store.get_request(first["id"])["status"] == "FAILED"


def _request_file(**change) -> dict:
    """A well-formed open request record (REQUEST_FIELDS), changed by `change`."""
    record = {"id": RID, "status": "PENDING", "test_set": "example", "track": "findings", "model_name": "m",
              "submitter": "alice", "submitted_time": "2026-01-01T12:00:00Z",
              "predictions": {"path": f"predictions/{RID}/test.parquet", "sha256": "ab"}}
    return {k: v for k, v in {**record, **change}.items() if v is not ...}


@pytest.mark.parametrize("record, path, message", [
    ([1], None, "a JSON list, not an object"),
    (_request_file(status=..., track=...), None, "lacks status, track"),
    (_request_file(status=1, predictions=[]), None, "status is int, not str; predictions is list, not dict"),
    (_request_file(id="../x"), None,
     "'../x' is not a request id (expected the form 20260101T120000.000000-0123456789)"),
    (_request_file(), f"queue/{RID[:-1]}8.json",
     f"holds request id '{RID}', which belongs in queue/{RID}.json"),
    (_request_file(status="FINISHED"), f"queue/{RID[:-1]}8.json",
     f"holds request id '{RID}', which belongs in done/{RID}.json"),
    (_request_file(status="DONE"), None, "unknown status 'DONE'"),
    (_request_file(status="RUNNING"), f"done/{RID}.json",
     f"is RUNNING but lies among the settled requests; it belongs in queue/{RID}.json"),
    (_request_file(submitted_time="2026-01-01 12:00:00"), None,
     "submitted_time '2026-01-01 12:00:00' is not YYYY-MM-DDTHH:MM:SSZ"),
    (_request_file(predictions={"path": "p"}), None, "predictions lacks its path or sha256"),
    (_request_file(predictions={"sha256": "ab"}), None, "predictions lacks its path or sha256"),
    (_request_file(attempts=True), None, "attempts is bool"),
    (_request_file(attempts=1.0), None, "attempts is float"),
    (_request_file(lease_expires="soon"), None, "lease_expires is str"),
    (_request_file(lease_expires=False), None, "lease_expires is bool"),
])
def test_a_queue_file_that_cannot_be_used_is_refused_with_its_reason(record, path, message):
    """parse_request's checks, in order, each message written out: an object, the fields
    and their types, the id's form, the file it must be in (queue/ open, done/ settled),
    a known status, an open request not in done/, the date's form, the predictions' path
    and sha256, attempts an int and lease_expires a number or null (never a bool)."""
    with pytest.raises(R.BadRecord) as caught:
        R.parse_request(json.dumps(record).encode("utf-8"), path or f"queue/{RID}.json")
    assert str(caught.value) == message


def test_a_usable_queue_file_is_read_as_it_is():
    record = _request_file(attempts=2, lease_expires=1.5, status="FAILED")
    assert R.parse_request(json.dumps(record).encode(), f"done/{RID}.json") == record
    assert R.parse_request(json.dumps(_request_file(lease_expires=None, attempts=0)).encode(), f"queue/{RID}.json") \
        == _request_file(lease_expires=None, attempts=0)
    assert R.parse_request(json.dumps(_request_file(lease_expires=3)).encode(), f"queue/{RID}.json")["lease_expires"] == 3


@pytest.mark.parametrize("data, message", [
    (b'{"a": 1, "a": 2}', "repeated keys ['a']"),
    (b"\xff{}", "not UTF-8 (byte 0)"),
    (b'{"a": 1,}', "not valid JSON (line 1, column 9): Expecting property name enclosed in double quotes"),
])
def test_a_file_that_is_not_a_json_object_says_why_in_one_line(data, message):
    """_load: the JSON module's own message with its line and column, the first byte that is
    not UTF-8, the keys given twice."""
    with pytest.raises(R.BadRecord) as caught:
        R.parse_result(data, "records/x.json")
    assert str(caught.value) == message


def test_result_records_need_their_five_fields():
    good = {"id": "r", "model_name": "m", "test_set": "t", "track": "k", "values": {}}
    assert R.parse_result(json.dumps(good).encode(), "records/x.json") == good
    with pytest.raises(R.BadRecord, match="^lacks values$"):
        R.parse_result(json.dumps({k: v for k, v in good.items() if k != "values"}).encode(), "records/x.json")
    with pytest.raises(R.BadRecord, match="^values is list, not dict$"):
        R.parse_result(json.dumps({**good, "values": []}).encode(), "records/x.json")


def test_a_request_id_that_is_no_id_is_shown_short():
    """check_request_id: only the form new_request_id gives (ASCII digits), any other value
    refused with its repr, cut to 40 characters and its length when longer than 60."""
    with pytest.raises(R.BadRequestId) as caught:
        R.check_request_id("a" * 100)
    assert str(caught.value) == f"'{'a' * 39}... (100 characters) is not a request id (expected the form {R.REQUEST_ID_EXAMPLE})"
    sixty = "b" * 58  # repr adds two quotes: 60 characters, shown whole
    with pytest.raises(R.BadRequestId, match=re.escape(f"'{sixty}' is not a request id")):
        R.check_request_id(sixty)
    for bad in (None, 20260101, RID + "\n", "\u0662" * 8 + RID[8:], RID.upper().replace("0123456789", "ABCDEF0123")):
        with pytest.raises(R.BadRequestId):
            R.check_request_id(bad)
    assert R.request_path(RID) == f"queue/{RID}.json" and R.request_path(RID, "FAILED") == f"done/{RID}.json"
    assert R.request_paths(RID) == (f"queue/{RID}.json", f"done/{RID}.json")
    assert R.predictions_path(RID) == f"predictions/{RID}/test.parquet"
    with pytest.raises(R.BadRequestId):
        R.request_paths("x")


def test_an_open_request_is_dated_by_the_servers_register_and_a_settled_one_as_written():
    """with_server_time: an open request in queue/ takes submitted_time and received_time
    from the register (an ISO date), loses a received_time its writer put there when the
    register has none; a settled request, or one outside queue/, is returned as it is."""
    req = _request_file(received_time="1999-01-01T00:00:00Z")
    when = "2026-02-03T04:05:06Z"
    assert R.with_server_time(f"queue/{RID}.json", req, {RID: when}) == \
        {**req, "submitted_time": when, "received_time": when}
    unseen = R.with_server_time(f"queue/{RID}.json", req, {RID: "not a date"})
    assert unseen == {k: v for k, v in req.items() if k != "received_time"}
    assert R.with_server_time(f"queue/{RID}.json", req, {}) == unseen
    assert R.with_server_time(f"queue/{RID}.json", unseen, {}) == unseen  # none in the file, none in the register
    assert req["received_time"] == "1999-01-01T00:00:00Z"  # the record read is left as it was
    settled = {**req, "status": "FINISHED"}
    assert R.with_server_time(f"queue/{RID}.json", settled, {RID: when}) is settled
    assert R.with_server_time(f"done/{RID}.json", req, {RID: when}) is req


def test_summaries_and_recent_entries_hold_what_the_rules_and_tables_read():
    """summary: the fields the submission rules read and the predictions' sha256 only;
    recent_entry: those and the queue tables' (institution, error, finished_time, worker,
    result_id); a missing field is None."""
    req = {**_request_file(status="FINISHED"), "failure_kind": None, "private": False, "institution": "Lab",
           "worker": "w", "result_id": "r1", "finished_time": "2026-01-02T00:00:00Z", "lease_token": "t"}
    expected = {"id": RID, "status": "FINISHED", "failure_kind": None, "private": False,
                "submitted_time": "2026-01-01T12:00:00Z", "submitter": "alice", "model_name": "m",
                "test_set": "example", "track": "findings", "predictions": {"sha256": "ab"}}
    assert R.summary(req) == expected
    assert R.recent_entry(req) == {**expected, "institution": "Lab", "error": None,
                                   "finished_time": "2026-01-02T00:00:00Z", "worker": "w", "result_id": "r1"}


def test_index_files_are_named_by_the_names_key_and_the_contents_sha256():
    """request_index_files: index/names/ and index/submitters/ files named by the first 32
    hex digits of the sha256 of the name's key (names that compare equal share one), and
    index/predictions/ by those of the sha256 of the predictions' sha256 text."""
    import hashlib

    from rexrank.store.names import name_key

    names, submitters, contents = R.request_index_files("Model A", "alice", "ab")
    assert names == f"index/names/{hashlib.sha256(name_key('Model A').encode()).hexdigest()[:32]}.json"
    assert submitters == f"index/submitters/{hashlib.sha256(name_key('alice').encode()).hexdigest()[:32]}.json"
    assert contents == f"index/predictions/{hashlib.sha256(b'ab').hexdigest()[:32]}.json"
    assert R.request_index_files("model a", "ALICE", "ab")[:2] == (names, submitters)
    assert R.request_index_files("Model B", "bob", "cd")[0] != names


def test_dates_are_utc_seconds_written_with_a_z_whatever_the_machines_time_zone(monkeypatch):
    """iso and parse_iso read and write UTC, also on a machine whose local time is 5 hours
    behind it (POSIX TZ "XYZ+5", no daylight saving)."""
    import time

    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        assert time.localtime(T0).tm_hour == 19  # the zone is in effect: 2025-12-31 19:00 there
        _check_dates()
    finally:
        monkeypatch.undo()  # the machine's own zone back for the tests that follow
        time.tzset()


def test_request_ids_are_dated_in_utc_whatever_the_machines_time_zone(monkeypatch):
    """new_request_id's time is UTC, also where local time is 5 hours behind it."""
    import time

    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        assert R.new_request_id(T0 + 0.25, "alice").startswith("20260101T000000.250000-")
    finally:
        monkeypatch.undo()
        time.tzset()


def _check_dates():
    assert R.iso(T0 + 3661.9) == "2026-01-01T01:01:01Z"
    assert R.parse_iso("2026-01-01T01:01:01Z") == T0 + 3661
    for bad in ("2026-01-01T01:01:01", "2026-01-01 01:01:01Z", None):
        assert not R._is_iso(bad)
    assert R._is_iso("2026-01-01T01:01:01Z")


def test_a_claim_on_a_store_indexed_by_an_earlier_name_key_reindexes_it_first(tmp_path):
    """Rule (claim, requests_index_stale): request indexes of another name key version are
    rebuilt before the claim, which then proceeds; the layout file says the current version."""
    from rexrank.store import open_store

    store, first = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.fail(first["id"], "w", error="boom")  # the indexes exist from now on
    second = submit(store, variant(tmp_path, 1), model_name="model-b", submitter="bob")
    layout = tmp_path / "s" / "requests" / R.REQUESTS_LAYOUT
    layout.write_text(json.dumps({**R.REQUESTS_LAYOUT_CONTENT, "names": "an earlier key"}))
    again = open_store(tmp_path / "s")  # a backend that has not looked at the layout yet
    assert again.claim("w", lease_seconds=60)["id"] == second["id"]
    assert json.loads(layout.read_text()) == R.REQUESTS_LAYOUT_CONTENT


def test_the_backends_policy_check_reads_the_settled_index_at_a_snapshot(tmp_path, monkeypatch):
    """As above for policy_problem's history: the index files by model name, submitter and
    content are read at the snapshot that listed queue/, never at None."""
    from rexrank.store.repo import Snapshot

    store, req = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.finish(req["id"], "w", result_id="r")
    seen = _record_reads(store, monkeypatch)
    assert store.policy_problem({**req, "id": R.new_request_id(T0, "later")}) is not None  # alice's quota is spent
    assert {p for _, p in seen} >= set(R.request_index_files("model-a", "alice", req["predictions"]["sha256"]))
    assert all(kind is Snapshot for kind, _ in seen), [p for kind, p in seen if kind is not Snapshot]


def test_a_61_character_id_is_cut_and_a_base_name_keeps_its_last_letters():
    """check_request_id shows a repr of at most 60 characters whole (59 letters and two
    quotes: 61, cut to 40 and the length); public_source drops only trailing slashes."""
    with pytest.raises(R.BadRequestId) as caught:
        R.check_request_id("c" * 59)
    assert str(caught.value).startswith(f"'{'c' * 39}... (59 characters) is not a request id")
    assert R.public_source("/data/runs/MAX/") == "MAX"
