"""On the Hub too (the fake Hub of tests/support/fakehub.py), a claim and a leaderboard reload make
the same few requests whatever the history holds: no listing of the whole repo, no read of
a settled request or of an unchanged result record."""
from __future__ import annotations

from rexrank.leaderboard.source import LeaderboardSource
from rexrank.store import Quota, open_store
from support.requests import submit, variant
from support.store_fixtures import fake_hub, hub  # noqa: F401 (fixtures)
from support.store_fixtures import RESULT, settle


def calls(hub, start: int) -> list[str]:
    return hub.requests[start:]


def claim_calls(hub, org: str, tmp_path, n_history: int) -> list[str]:
    store = open_store(f"hf://{org}", quota=Quota(0))
    settle(store, n_history, tmp_path)
    waiting = submit(store, variant(tmp_path, 90), model_name="waiting", submitter="zed")
    fresh = open_store(f"hf://{org}", quota=Quota(0))  # a worker that starts now: nothing cached
    start = len(hub.requests)
    assert fresh.claim("w", lease_seconds=60)["id"] == waiting["id"]
    return calls(hub, start)


def test_a_claim_on_the_hub_costs_the_same_requests_with_a_long_history(hub, tmp_path):
    short = claim_calls(hub, "orgh1", tmp_path, 1)
    long = claim_calls(hub, "orgh2", tmp_path, 8)
    assert len(short) == len(long) <= 7  # 6, + the register of when the backend saw each open request
    assert not [c for c in long if "/resolve/" in c and "/done/" in c]  # no settled request is read
    trees = [c for c in long if "/tree/" in c]
    assert trees and all(c.endswith("/queue") for c in trees)  # only the queue is listed


def test_a_leaderboard_reload_on_the_hub_reads_only_the_new_record(hub, tmp_path):
    store = open_store("hf://orgh3", quota=Quota(0))
    store.add_results([{**RESULT, "id": f"r{i}", "model_name": f"m{i}"} for i in range(20)])
    source = LeaderboardSource.from_store(open_store("hf://orgh3"), ttl=0)
    assert len(source.frame()) == 20
    start = len(hub.requests)
    source.frame(force=True)
    assert len(calls(hub, start)) == 1  # nothing changed: the version, nothing else
    store.add_result({**RESULT, "id": "new", "model_name": "new"})
    start = len(hub.requests)
    frame = source.frame(force=True)
    record_reads = [c for c in calls(hub, start) if "/resolve/" in c and "/records/" in c and "/index/" not in c]
    assert "new" in set(frame["id"]) and len(record_reads) == 1 and len(calls(hub, start)) <= 4
