"""The request queue: its state machine, leases, commits and the backend's policy check (rexrank.store.queue).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import json
import re

import pytest

from rexrank.store import records as R
from rexrank.store.repo import StoreError
from support.requests import submit, variant
from support.store_queue import T0, _Clock, _store_with_request


# ---- store.queue: the request state machine's rules, written out -------------------------
def test_a_lease_expires_after_its_own_duration_on_this_processes_clock(monkeypatch):
    """The rule (LeaseClock): a lease has expired once its token (lease_token, worker,
    attempts, lease_expires) has stayed the same for its `lease_seconds`, measured from when
    this process first saw it; a duration that is not a number in (0, 86400] (a bool, a
    string, 0, negative, more than a day) is replaced by the caller's default."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    leases = Q.LeaseClock()
    req = {"id": "r1", "lease_token": "a", "worker": "w", "attempts": 1, "lease_expires": 5.0, "lease_seconds": 10}
    assert leases.observe(req) == 0.0
    clock.t += 9.5
    assert leases.observe(req) == 9.5 and not leases.expired(req, 1000)
    clock.t += 0.5
    assert leases.expired(req, 1000)  # 10 s unchanged: expired exactly at its duration
    for field, value in (("lease_token", "b"), ("worker", "w2"), ("attempts", 2), ("lease_expires", 6.0)):
        req = {**req, field: value}  # any part of the token changed: a renewal, counted from now
        assert leases.observe(req) == 0.0
        clock.t += 10
        assert leases.observe(req) == 10.0
    # durations outside (0, 86400] or not numbers fall back to the default (here 100 s)
    for i, duration in enumerate((True, "10", 0, -5, 86400.5, None)):
        other = {"id": f"d{i}", "lease_token": "t", "lease_seconds": duration}
        leases.observe(other)
        clock.t += 99
        assert not leases.expired(other, 100), duration
        clock.t += 1
        assert leases.expired(other, 100), duration
    day = {"id": "day", "lease_token": "t", "lease_seconds": 86400}  # a day is still its own duration
    leases.observe(day)
    clock.t += 86399
    assert not leases.expired(day, 1)
    clock.t += 1
    assert leases.expired(day, 1)
    small = {"id": "small", "lease_token": "t", "lease_seconds": 0.5}
    leases.observe(small)
    clock.t += 0.5
    assert leases.expired(small, 1000)
    leases.forget({"day", "small"})  # the others are no longer RUNNING: what was seen of them goes
    assert set(leases._seen) == {"day", "small"}
    clock.t += 1
    assert leases.observe({"id": "r1", **{k: req[k] for k in ("lease_token", "worker", "attempts", "lease_expires")}}) == 0.0


def test_a_new_lease_is_a_fresh_16_hex_digit_token_and_the_duration_asked():
    from rexrank.store.queue import new_lease

    first, second = new_lease(30), new_lease(30)
    assert set(first) == {"lease_token", "lease_seconds"}
    assert re.fullmatch(r"[0-9a-f]{16}", first["lease_token"]) and first["lease_token"] != second["lease_token"]
    assert first["lease_seconds"] == 30.0 and type(first["lease_seconds"]) is float


def test_a_transition_sets_the_status_dates_a_settled_request_and_appends_its_history():
    """The rule: the new status and fields replace the old; FINISHED and FAILED get
    finished_time; the history gains {time, status} and the worker when one is given."""
    from rexrank.store.queue import transition

    ts = 1_767_225_600.0  # 2026-01-01T00:00:00Z, by hand:
    assert ts == (2026 - 1970) * 365 * 86400 + 14 * 86400  # 14 leap days between 1970 and 2026
    old = {"id": "r", "status": "PENDING", "history": [{"time": "x", "status": "PENDING"}], "keep": 1}
    running = transition(old, "RUNNING", ts, worker="w1", attempts=1)
    assert running == {"id": "r", "status": "RUNNING", "keep": 1, "worker": "w1", "attempts": 1,
                       "history": [{"time": "x", "status": "PENDING"},
                                   {"time": "2026-01-01T00:00:00Z", "status": "RUNNING", "worker": "w1"}]}
    assert old["history"] == [{"time": "x", "status": "PENDING"}]  # the old record is left as it was
    for status in ("FINISHED", "FAILED"):
        done = transition(running, status, ts + 61, worker=None)
        assert done["finished_time"] == "2026-01-01T00:01:01Z" and done["status"] == status
        assert done["history"][-1] == {"time": "2026-01-01T00:01:01Z", "status": status}  # no worker given: none named
    back = transition({"id": "r", "status": "RUNNING"}, "PENDING", ts)
    assert "finished_time" not in back and back["history"] == [{"time": "2026-01-01T00:00:00Z", "status": "PENDING"}]


def test_arrivals_are_open_queue_requests_not_yet_received_and_get_the_servers_time():
    """The rule (stamp_arrivals): an open request in queue/ without received_time is
    registered now and dated now; anything else (settled, in done/, already received)
    is returned as it is. _seen: settled, or open and registered."""
    from rexrank.store.queue import _seen, stamp_arrivals

    class Edit:
        def __init__(self):
            self.received = []

        def receive(self, rid, when):
            self.received.append((rid, when))

    edit = Edit()
    when = "2026-01-01T00:00:00Z"
    requests = [("queue/a.json", {"id": "a", "status": "PENDING", "submitted_time": "1999-01-01T00:00:00Z"}),
                ("queue/b.json", {"id": "b", "status": "RUNNING", "submitted_time": "x"}),
                ("queue/c.json", {"id": "c", "status": "PENDING", "submitted_time": "y", "received_time": "y"}),
                ("queue/d.json", {"id": "d", "status": "FAILED", "submitted_time": "z"}),
                ("done/e.json", {"id": "e", "status": "PENDING", "submitted_time": "w"})]
    out = stamp_arrivals(edit, requests, 1_767_225_600.0)
    assert edit.received == [("a", when), ("b", when)]
    assert [p for p, _ in out] == [p for p, _ in requests]
    assert out[0][1] == {"id": "a", "status": "PENDING", "submitted_time": when, "received_time": when}
    assert out[1][1]["submitted_time"] == out[1][1]["received_time"] == when
    assert [r for _, r in out[2:]] == [r for _, r in requests[2:]]
    assert [_seen(r) for _, r in requests] == [False, False, True, True, False]
    assert [_seen(r) for _, r in out] == [True, True, True, True, False]


def test_each_queue_operation_follows_the_state_machine_written_out(tmp_path):
    """The rules, from the queue's docstrings: only the holder of a RUNNING request may
    renew, publish, dispatch, finish, fail or release it; release puts it back PENDING with
    the attempt not counted and the reason in its history; requeue takes FAILED or RUNNING
    back to PENDING with attempts 0, no error, no dispatch; cancel takes PENDING or RUNNING
    to FAILED, kind "cancelled", with "cancelled by the maintainers: <reason>"."""
    from rexrank.store import StoreError

    store, req = _store_with_request(tmp_path)
    rid = req["id"]
    claimed = store.claim("w1", lease_seconds=60)
    assert (claimed["status"], claimed["worker"], claimed["attempts"], claimed["lease_seconds"]) == ("RUNNING", "w1", 1, 60.0)
    assert claimed["history"][-1]["worker"] == "w1" and claimed["started_time"] == claimed["history"][-1]["time"]
    assert claimed["lease_expires"] - time_of(claimed["started_time"]) == pytest.approx(60, abs=1.5)
    for other in ("w2", None):  # not the holder: refused, nothing changes
        assert not store.renew_lease(rid, other, lease_seconds=60)
        assert not store.begin_publish(rid, other)
        assert not store.record_dispatch(rid, other, {"jobs": []})
        assert not store.release(rid, other, reason="r")
        assert not store.fail(rid, other, error="e")
        assert not store.finish(rid, other, result_id="x")
    assert store.get_request(rid)["history"] == claimed["history"]
    assert store.renew_lease(rid, "w1", lease_seconds=90)
    renewed = store.get_request(rid)
    assert renewed["lease_seconds"] == 90.0 and renewed["lease_token"] != claimed["lease_token"]
    assert store.record_dispatch(rid, "w1", {"jobs": ["j1"]}) and store.get_request(rid)["dispatch"] == {"jobs": ["j1"]}
    assert store.release(rid, "w1", reason="no test set here")
    back = store.get_request(rid)
    assert (back["status"], back["worker"], back["lease_expires"], back["attempts"], back["publishing"]) == ("PENDING", None, None, 0, False)
    assert back["history"][-1]["note"] == "no test set here" and back["history"][-1]["status"] == "PENDING"
    assert [h["status"] for h in back["history"]] == ["PENDING", "RUNNING", "PENDING"]
    again = store.claim("w2", lease_seconds=60)
    assert again["attempts"] == 1  # the released attempt was not counted
    assert store.fail(rid, "w2", error="boom", kind="validation")
    failed = store.get_request(rid)
    assert (failed["status"], failed["error"], failed["failure_kind"], failed["lease_expires"]) == ("FAILED", "boom", "validation", None)
    assert failed["finished_time"] == failed["history"][-1]["time"]
    with pytest.raises(StoreError, match=re.escape(f"request {rid} is FAILED; only PENDING or RUNNING requests can be cancelled")):
        store.cancel(rid)
    requeued = store.requeue(rid)
    assert {k: requeued[k] for k in ("status", "worker", "lease_expires", "error", "failure_kind", "attempts", "publishing", "dispatch")} \
        == {"status": "PENDING", "worker": None, "lease_expires": None, "error": None, "failure_kind": None,
            "attempts": 0, "publishing": False, "dispatch": None}
    assert store.get_request(rid) == requeued
    with pytest.raises(StoreError, match=re.escape(f"request {rid} is PENDING; only FAILED or RUNNING requests can be requeued")):
        store.requeue(rid)
    cancelled = store.cancel(rid, reason="withdrawn")
    assert (cancelled["status"], cancelled["failure_kind"], cancelled["error"], cancelled["worker"]) == \
        ("FAILED", "cancelled", "cancelled by the maintainers: withdrawn", None)
    assert store.get_request(rid) == cancelled


def time_of(text):
    from datetime import datetime, timezone

    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def test_finish_keeps_notes_and_a_cancel_without_reason_says_only_who(tmp_path):
    from rexrank.store import StoreError

    store, req = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.begin_publish(req["id"], "w") and store.get_request(req["id"])["publishing"] is True
    with pytest.raises(StoreError, match=re.escape(f"request {req['id']}: its result is being published; too late to cancel it")):
        store.cancel(req["id"])
    assert store.finish(req["id"], "w", result_id="res-1", notes=("metric x not run",))
    done = store.get_request(req["id"])
    assert (done["status"], done["result_id"], done["notes"], done["error"], done["lease_expires"]) == \
        ("FINISHED", "res-1", ["metric x not run"], None, None)
    with pytest.raises(StoreError, match=re.escape(f"request {req['id']} is FINISHED; only FAILED or RUNNING requests can be requeued")):
        store.requeue(req["id"])
    store2, other = _store_with_request(tmp_path / "b")
    assert store2.cancel(other["id"])["error"] == "cancelled by the maintainers"
    store3, third = _store_with_request(tmp_path / "c")
    store3.claim("w", lease_seconds=60)
    assert store3.finish(third["id"], "w", result_id="r")
    assert "notes" not in store3.get_request(third["id"])  # no notes: no field
    store4, fourth = _store_with_request(tmp_path / "d")
    store4.claim("w", lease_seconds=60)
    assert store4.requeue(fourth["id"])["status"] == "PENDING"  # a RUNNING request can be requeued too
    with pytest.raises(StoreError, match="no request '20260101T120000.000000-0123456789' in "):
        store4.renew_lease("20260101T120000.000000-0123456789", "w", lease_seconds=1)


def test_a_request_interrupted_max_attempts_times_fails_with_the_count_in_its_message(tmp_path, monkeypatch):
    """Rule: a RUNNING request whose lease expired and that was claimed max_attempts times
    is FAILED, kind internal, with the count in its message; below that it is claimed again."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    assert store.claim("w1", lease_seconds=10, max_attempts=2)["attempts"] == 1
    clock.t += 10
    assert store.claim("w2", lease_seconds=10, max_attempts=2)["attempts"] == 2
    clock.t += 9.9
    assert store.claim("w3", lease_seconds=10, max_attempts=2) is None  # 9.9 s of a 10 s lease: live
    clock.t += 0.1
    assert store.claim("w3", lease_seconds=10, max_attempts=2) is None
    failed = store.get_request(req["id"])
    assert (failed["status"], failed["failure_kind"]) == ("FAILED", "internal")
    assert failed["error"] == ("scoring was interrupted 2 times (worker stopped or timed out); this usually means it needs "
                               "more memory or time than the worker has — contact the maintainers")
    assert failed["history"][-1] == {"time": failed["finished_time"], "status": "FAILED"}


def test_a_release_gives_back_only_the_released_attempt(tmp_path, monkeypatch):
    """Rule (release): attempts becomes max(0, attempts − 1): a request claimed twice (its
    first lease expired) and then released has 1 attempt, not 0; one whose record has no
    attempts (an earlier store's) counts as 1 and goes back to 0."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=10)
    clock.t += 10
    assert store.claim("w2", lease_seconds=10)["attempts"] == 2
    assert store.release(req["id"], "w2", reason="r")
    assert store.get_request(req["id"])["attempts"] == 1
    store.claim("w3", lease_seconds=10)
    path = tmp_path / "s" / "requests" / "queue" / f"{req['id']}.json"
    record = json.loads(path.read_text())
    del record["attempts"]
    path.write_text(json.dumps(record))
    assert store.release(req["id"], "w3", reason="r")
    assert store.get_request(req["id"])["attempts"] == 0


# ---- store.queue: operations, their commits and the backend's policy check, written out ----------
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


def test_the_backend_refuses_a_submitter_the_organisers_did_not_approve(tmp_path, monkeypatch):
    """Rule (policy_problem, config approved_submitters): a test set listed there accepts
    only the submitters listed for it, with check_approved's message written out; the list
    and its bindings are read at a snapshot."""
    from rexrank.store.repo import Snapshot

    store, req = _store_with_request(tmp_path)
    (tmp_path / "s" / "requests" / R.CONFIG_FILE).write_text(json.dumps({"approved_submitters": {"example": ["carol"]}}))
    assert store.policy_problem(req) == (
        "test set example accepts submissions only from submitters approved by its organisers, and 'alice' is not one "
        "of them; ask the organisers to be added")
    seen = _record_reads(store, monkeypatch)
    assert store.policy_problem({**req, "submitter": "carol"}) is None
    assert R.CONFIG_FILE in {p for _, p in seen} and "accounts/approved.json" in {p for _, p in seen}
    assert all(kind is Snapshot for kind, _ in seen), [p for kind, p in seen if kind is not Snapshot]  # a Hub store's reads


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
    from support.store_queue import _Clock

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


# ---- store.queue: leases of earlier records, claims and the settled index --------------------
def test_a_lease_of_an_earlier_versions_record_uses_the_claims_duration_and_counts_no_attempt(tmp_path, monkeypatch):
    """Rule (claim on a record an earlier version wrote: no lease_token, lease_seconds or
    attempts): its lease lasts the claiming worker's lease_seconds from when this process
    first saw it, and a missing attempt count is 0 (claimed again with max_attempts 1; failed
    with "interrupted 0 times" with max_attempts 0)."""
    from rexrank.store import queue as Q
    from support.store_queue import _Clock

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


def _a_private_request_on_a_stopped_clock(tmp_path, monkeypatch):
    """A store with one request on the private test set (rexgradient), the store's clock at T0
    and the lease clock (time.monotonic) a `_Clock` the test moves."""
    from rexrank.store import Quota, open_store
    from rexrank.store import queue as Q
    from support.requests import write_jsonl

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    _at(monkeypatch, T0)
    store = open_store(tmp_path / "s", quota=Quota(0))
    rows = {f"RG{i:05d}": f"Study {i}: no acute finding." for i in range(20)}
    req = submit(store, write_jsonl(tmp_path / "p.jsonl", rows), test_set="rexgradient", submitter="alice")
    return store, req, clock


def test_a_private_earlier_versions_record_with_no_attempt_count_is_claimed_again_not_marked_out_of_attempts(tmp_path, monkeypatch):
    """Rule (claim, private test set, a record with no `attempts`): the missing count is 0
    here too, so with max_attempts 1 the request is claimed for its first counted attempt,
    not marked out_of_attempts to be failed at its slot."""
    store, req, clock = _a_private_request_on_a_stopped_clock(tmp_path, monkeypatch)
    store.claim("w1", lease_seconds=10)
    path = tmp_path / "s" / "requests" / R.request_path(req["id"])
    record = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in record.items() if k not in ("lease_token", "lease_seconds", "attempts")}))
    assert store.claim("w2", lease_seconds=10, max_attempts=1) is None  # first seen now
    clock.t += 10
    again = store.claim("w2", lease_seconds=10, max_attempts=1)
    assert (again["worker"], again["attempts"], again.get("out_of_attempts")) == ("w2", 1, None)


def test_a_claim_that_fails_an_interrupted_request_goes_on_to_claim_the_next(tmp_path, monkeypatch):
    """Rule (claim): failing a request interrupted max_attempts times does not end the claim:
    the next PENDING request is claimed in the same commit."""
    from rexrank.store import queue as Q
    from support.store_queue import _Clock

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


def test_dropping_shard_outputs_removes_that_requests_scratch_folder_only_in_one_commit(tmp_path, monkeypatch):
    """Rule (drop_shard_outputs): every file under scratch/<id>/ goes, in one commit saying
    so; another request's shard outputs and the request itself stay; nothing to remove
    commits nothing; an id that is not a request id is refused before any path is built."""
    store, req = _store_with_request(tmp_path)
    rid, other = req["id"], R.new_request_id(T0, "other")
    mine = [*R.shard_paths(rid, 0, 1), *R.shard_paths(rid, 1, 2)]
    theirs = R.shard_paths(other, 0, 1)
    store.requests.commit({path: b"{}" for path in (*mine, *theirs)}, message="shards", parent=store.requests.version())
    requests = tmp_path / "s" / "requests"
    assert mine[0] == f"scratch/{rid}/shard-000-attempt-1.json"  # the layout by hand (records' docstring)
    messages = _commits(monkeypatch, store)
    store.drop_shard_outputs(rid)
    assert messages == [f"remove the shard outputs of {rid}"]
    assert [p for p in (*mine, *theirs) if (requests / p).exists()] == list(theirs)
    assert store.get_request(rid)["status"] == "PENDING"
    store.drop_shard_outputs(rid)  # nothing left: no commit
    assert messages == [f"remove the shard outputs of {rid}"]
    with pytest.raises(R.BadRequestId, match=r"'\.\./x' is not a request id"):
        store.drop_shard_outputs("../x")
    assert messages == [f"remove the shard outputs of {rid}"] and all((requests / p).exists() for p in theirs)


def test_a_name_recorded_before_ids_is_bound_to_the_first_account_with_an_id_that_files_under_it(tmp_path, monkeypatch):
    """Rule (bind_legacy_name): an account with an id filing under a name that has open or
    settled requests filed by name, or a privacy ledger under that name, binds the name to
    its id (accounts/legacy.json, written with the filing); a name already bound, an account
    without an id (a local store's typed name), or a name with nothing recorded binds nothing,
    and a request filed with an id leaves its name free."""
    import json as json_

    from rexrank.store.accounts import LEGACY_BINDINGS, Account
    from rexrank.store.ledger import ledger_path

    _at(monkeypatch, T0)
    store, _ = _store_with_request(tmp_path)  # alice's request, filed by name, still open
    store.claim("w", lease_seconds=60)
    carol = submit(store, variant(tmp_path, 1), model_name="model-c", submitter="carol")
    store.claim("w", lease_seconds=60)
    assert store.fail(carol["id"], "w", error="boom")  # carol's: settled, in the index by name
    submit(store, variant(tmp_path, 2), model_name="model-d", submitter="dave", submitter_id="u4")
    store.requests.commit({ledger_path(Account("erin"), "rexgradient"): b"{}"}, message="ledger",
                          parent=store.requests.version())

    def bind(account):
        return store.bind_legacy_name(store.requests.snapshot(R.QUEUE_DIR), account)

    how = "the first filing under this name by an account with an id"
    for account, key in ((Account(" Alice ", "u1"), "alice"), (Account("CAROL", "u3"), "carol"), (Account("erin", "u5"), "erin")):
        entry = {"id": account.id, "name": account.name, "time": "2026-01-01T00:00:00Z", "how": how}
        assert bind(account) == ({key: entry}, {LEGACY_BINDINGS: R.dumps({key: entry})}), account
    for account in (Account("alice"), Account("dave", "u6"), Account("frank", "u7")):
        assert bind(account) == ({}, {}), account  # no id; a name filed with an id; nothing under the name
    taken = {"alice": {"id": "u1", "name": "alice", "time": "t", "how": how}}
    (tmp_path / "s" / "requests" / LEGACY_BINDINGS).parent.mkdir(exist_ok=True)
    (tmp_path / "s" / "requests" / LEGACY_BINDINGS).write_text(json_.dumps(taken))
    assert bind(Account("ALICE", "u9")) == (taken, {})  # bound already: nobody takes its place
    assert bind(Account("carol", "u3"))[0] == {**taken, "carol": {"id": "u3", "name": "carol",
                                                                  "time": "2026-01-01T00:00:00Z", "how": how}}


def test_binding_a_name_recorded_before_ids_reads_every_file_at_the_snapshot_it_is_given(tmp_path, monkeypatch):
    """Rule (bind_legacy_name): the bindings, the name's index of settled requests, the open
    requests and the ledgers are read at the given snapshot, on which the filing's commit is
    made (a Hub store reads that version; a local one has only its current files)."""
    from rexrank.store.accounts import Account

    _at(monkeypatch, T0)
    store, _ = _store_with_request(tmp_path)  # alice's request, filed by name, still open
    snap = store.requests.snapshot(R.QUEUE_DIR)
    reads = []
    read_optional = store.requests.read_optional

    def recorded(at, path):
        reads.append((at, path))
        return read_optional(at, path)

    monkeypatch.setattr(store.requests, "read_optional", recorded)
    legacy, changes = store.bind_legacy_name(snap, Account("alice", "u1"))
    assert list(legacy) == ["alice"] and changes
    assert {path.split("/")[0] for _, path in reads} >= {"accounts", "index", "queue"}
    assert [path for at, path in reads if at is not snap] == []


def test_the_approved_list_binds_an_approved_name_to_the_first_account_that_files_under_it(tmp_path, monkeypatch):
    """Rule (check_approval): no list for the test set, or a typed name on it (a local
    store): nothing to record; an account with an id filing under an approved name not yet
    bound: the change that binds it on that test set (accounts/approved.json), beside the
    other test sets' bindings; the name bound to another id: refused."""
    from rexrank.errors import SubmissionError
    from rexrank.store import StoreError
    from rexrank.store.accounts import APPROVED_BINDINGS, Account

    _at(monkeypatch, T0)
    store, _ = _store_with_request(tmp_path)
    requests = tmp_path / "s" / "requests"
    assert store.check_approval(store.requests.snapshot(), "example", Account("anyone", "u0")) is None  # no list
    (requests / R.CONFIG_FILE).write_text(json.dumps({"approved_submitters": {"example": ["Carol", "dave"]}}))
    assert store.check_approval(store.requests.snapshot(), "example", Account("carol")) is None
    first = {"id": "u3", "name": "carol", "time": "2026-01-01T00:00:00Z", "how": "its first filing"}
    assert store.check_approval(store.requests.snapshot(), "example", Account("carol", "u3")) == \
        {APPROVED_BINDINGS: R.dumps({"example": {"carol": first}})}  # the first binding of all: no file yet
    (requests / APPROVED_BINDINGS).parent.mkdir(exist_ok=True)
    (requests / APPROVED_BINDINGS).write_text(json.dumps({"other": {"x": {"id": "u9"}},
                                                          "example": {"dave": {"id": "u4", "name": "dave"}}}))
    change = store.check_approval(store.requests.snapshot(), "example", Account("CAROL", "u3"))
    carol = {"id": "u3", "name": "CAROL", "time": "2026-01-01T00:00:00Z", "how": "its first filing"}
    assert change == {APPROVED_BINDINGS: R.dumps({"other": {"x": {"id": "u9"}},
                                                  "example": {"dave": {"id": "u4", "name": "dave"}, "carol": carol}})}
    assert store.check_approval(store.requests.snapshot(), "example", Account("dave", "u4")) is None  # bound already
    with pytest.raises(SubmissionError, match="'dave' is not one of them"):
        store.check_approval(store.requests.snapshot(), "example", Account("dave", "u8"))  # the name is another's
    (requests / APPROVED_BINDINGS).write_text("[]")
    with pytest.raises(StoreError, match=r"accounts/approved\.json is damaged; restore it from the repo's history"):
        store.check_approval(store.requests.snapshot(), "example", Account("carol", "u3"))


def test_the_backends_quota_counts_what_an_account_filed_by_name_before_ids_once_the_name_is_bound(tmp_path, monkeypatch):
    """Rule (_history): the settled requests filed by name before ids are read from the index
    of every name bound to the account's id (accounts/legacy.json), so an account renamed
    since still has them counted against its quota; unbound, the name is someone else's."""
    from rexrank.store.accounts import LEGACY_BINDINGS

    _at(monkeypatch, T0)
    store, old = _store_with_request(tmp_path)  # alice, by name, 1 per 7 days
    store.claim("w", lease_seconds=60)
    assert store.finish(old["id"], "w", result_id="r")
    renamed = {**old, "id": R.new_request_id(T0 + 3600, "renamed"), "submitter": "alice-2", "submitter_id": "u1",
               "model_name": "model-z", "predictions": {**old["predictions"], "sha256": "0" * 64},
               "submitted_time": "2026-01-01T01:00:00Z", "status": "PENDING"}
    assert store.policy_problem(renamed) is None  # "alice" is bound to nobody: not this account's
    (tmp_path / "s" / "requests" / LEGACY_BINDINGS).parent.mkdir(exist_ok=True)
    (tmp_path / "s" / "requests" / LEGACY_BINDINGS).write_text(json.dumps({"alice": {"id": "u1", "name": "alice"}}))
    assert store.policy_problem(renamed).startswith(
        "submitter 'alice-2' already has 1 submission(s) on example/findings in the last 7 days (limit 1); next "
        "submission possible after 2026-01-08T00:00:00Z")


def test_a_private_request_out_of_attempts_is_claimed_to_be_failed_at_its_slot_not_failed_now(tmp_path, monkeypatch):
    """Rule (claim, private test set): when it was interrupted is private, so a private
    request whose lease expired after max_attempts claims is claimed again by this worker,
    marked out_of_attempts, its attempts not counted up, with a fresh lease; the worker
    fails it at its publication slot. A public one is FAILED at once (test above)."""
    store, req, clock = _a_private_request_on_a_stopped_clock(tmp_path, monkeypatch)
    first = store.claim("w1", lease_seconds=10, max_attempts=1)
    assert first["attempts"] == 1 and "out_of_attempts" not in first
    clock.t += 10
    messages = _commits(monkeypatch, store)
    _at(monkeypatch, T0 + 60)
    again = store.claim("w2", lease_seconds=30, max_attempts=1)
    assert messages == [f"claim {req['id']} by w2"]
    assert (again["id"], again["status"], again["worker"], again["attempts"]) == (req["id"], "RUNNING", "w2", 1)
    assert again["out_of_attempts"] is True and again["lease_expires"] == T0 + 60 + 30 and again["lease_seconds"] == 30.0
    assert again["lease_token"] != first["lease_token"] and again["started_time"] == first["started_time"]
    assert again["history"][-1] == {"time": "2026-01-01T00:01:00Z", "status": "RUNNING", "worker": "w2"}
    assert store.get_request(req["id"]) == again


def test_a_held_request_is_neither_requeued_nor_cancelled_and_each_refusal_names_the_ways_out(tmp_path):
    """Rules (requeue, cancel): a request HELD for review leaves the hold by review only; each
    refusal says how, with the request's id in the commands."""
    store, req = _store_with_request(tmp_path)
    rid = req["id"]
    path = tmp_path / "s" / "requests" / R.request_path(rid)
    held = {**json.loads(path.read_text()), "status": "HELD"}
    path.unlink()
    (tmp_path / "s" / "requests" / R.request_path(rid, "HELD")).write_text(json.dumps(held))
    with pytest.raises(StoreError) as refused:
        store.requeue(rid)
    assert str(refused.value) == (f"request {rid} is HELD for review; release it with `rexrank review --release {rid}` "
                                  f"or reject it with `rexrank review --reject {rid}`")
    with pytest.raises(StoreError) as refused:
        store.cancel(rid, reason="withdrawn")
    assert str(refused.value) == (f"request {rid} is HELD for review; reject it with `rexrank review --reject {rid}` "
                                  f"(or release it for scoring with `rexrank review --release {rid}`)")
    assert store.get_request(rid)["status"] == "HELD"


def test_a_released_request_is_pending_again_with_its_attempt_not_counted_and_marked_given_back(tmp_path):
    """Rule (release): the worker gives the request back; the history's last entry says why
    and that it was given back (the worker's count of killed readers and the privacy
    ledger's one charge per round read that flag)."""
    store, req = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.get_request(req["id"])["attempts"] == 1
    assert store.release(req["id"], "w", reason="cannot load the test set")
    back = store.get_request(req["id"])
    assert (back["status"], back["attempts"], back["worker"], back["lease_expires"]) == ("PENDING", 0, None, None)
    last = back["history"][-1]
    assert (last["status"], last["note"], last["given_back"]) == ("PENDING", "cannot load the test set", True)
    assert not store.release(req["id"], "w", reason="again")  # no longer its holder
