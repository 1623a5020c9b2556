"""Tests that pin the store's queue operations and record helpers (issue 32: the survivors of
mutmut's runs over rexrank.store.queue and rexrank.store.records). Each asserts against a
rule written out by hand (the modules' docstrings), never against the code's earlier output."""
from __future__ import annotations

import json
import re

import pytest

from rexrank.store import StoreError
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
