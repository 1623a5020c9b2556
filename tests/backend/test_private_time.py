"""Issue 37, attack 7 (timing) and the publication slots that close it.

`provenance.scored_time` was when scoring started, so the results commit's date minus it
was the scoring time, which counts the private track's studies (800 vs 100 with long
predictions: 5.6 s vs 0.5 s), without noise or charge. Through the Space, the backend and
the fake Hub (tests/support/neighbours.py), with a controlled clock and a metric whose scoring time
grows with the references (`timed`): a private request is now settled at the next
publication slot after its scoring ended, and its record says no time but its date.
"""
from __future__ import annotations

import json
import re

import pytest

from support.neighbours import ControlledClock, START, run_world
from rexrank.backend.publication_slot import next_slot
from rexrank.store.config import parse_duration
from rexrank.store import records as R
from support.backend_fixtures import HOUR

LONG_PREDICTION = "Small left pleural effusion with adjacent atelectasis in the left lower lobe. " * 6
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def in_track(n: int, total: int = 800) -> dict[str, str | None]:
    """A private set of `total` studies of which the first `n` have findings."""
    return {f"RG{i:04d}": (f"Confidential finding {i}: a patchy opacity in zone {i % 6}, unchanged." if i < n else None)
            for i in range(total)}


def times_in(obj, where: str = "") -> list[str]:
    """Where a JSON value holds a date or time (ISO form) or a field named like one."""
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if re.search(r"(^|_)(time|seconds|created|started|finished|elapsed)($|_)", key):
                found.append(f"{where}.{key}")
            found += times_in(value, f"{where}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found += times_in(value, f"{where}[{i}]")
    elif isinstance(obj, str) and ISO_TIME.search(obj):
        found.append(where)
    return found


def result_commit(world) -> dict:
    [commit] = [c for c in world.results_commits if c["title"] == f"result {world.request_id}"]
    return commit


def test_the_scoring_time_of_a_private_request_is_not_public(tmp_path):
    """Attack 7: 800 vs 100 studies in the findings track, long predictions. Both results are
    committed at 11:00 UTC, the slot after scoring ended (the two scorings ended apart), and
    the records say no time but the submission's date (used to: scored_time, 10:10 UTC, and
    a commit at the end of scoring)."""
    predictions = {sid: LONG_PREDICTION for sid in in_track(800)}
    many, few = (run_world(tmp_path / label, in_track(n), predictions=predictions)
                 for label, n in (("many", 800), ("few", 100)))
    assert many.scoring_ended - few.scoring_ended > 30  # what the attack measured: it is there to hide
    for world in (many, few):
        assert world.status["request"]["status"] == "FINISHED"
        assert result_commit(world)["date"] == HOUR == next_slot(world.scoring_ended, 3600)
        assert world.waits == [(world.scoring_ended, HOUR)]  # nothing was settled before the slot
        record = world.record
        assert "scored_time" not in record["provenance"]
        assert times_in(record) == [] and record["date"] == "2026-03-02"  # the submission's day only
    assert result_commit(many) == result_commit(few)


def test_a_private_failure_after_scoring_is_settled_at_the_slot_too(tmp_path, monkeypatch):
    """A coverage failure is decided after scoring: it is settled (FAILED in /status and the
    queue) at the slot, not when scoring ended, which would say the scoring time as well as
    a commit date does; nothing is published."""
    from rexrank.backend import privacy

    monkeypatch.setattr(privacy, "COVERAGE_MARGIN", -1e6)  # the noisy rule fails whatever the coverage
    world = run_world(tmp_path, in_track(40, 50))
    assert world.status["request"]["status"] == "FAILED"
    assert world.request["finished_time"] == R.iso(HOUR) and world.scoring_ended < HOUR
    assert [c["title"] for c in world.results_commits] == ["initial commit"]


@pytest.mark.parametrize("dispatched", [False, True],
                         ids=["single worker", "dispatched"])
def test_a_private_internal_error_is_settled_at_the_slot(tmp_path, dispatched):
    """A metric that raises on the private set (backendhelpers' `crashing`, after the timed
    one has scored): FAILED with the fixed sentence, at the slot."""
    from rexrank.backend.public_door import PRIVATE_INTERNAL_ERROR

    world = run_world(tmp_path, in_track(40, 50), dispatched=dispatched, metrics="bleu2,timed,crashing")
    assert world.status["request"]["status"] == "FAILED"
    assert world.status["request"]["error"] == PRIVATE_INTERNAL_ERROR
    assert world.request["finished_time"] == R.iso(HOUR) and len(world.waits) == 1


def test_the_slot_is_the_stores_setting(tmp_path):
    """"publication_slot": "15m" in the store's config: the result is committed at 10:15 UTC,
    the first quarter hour after scoring ended (10:10 and a few seconds)."""
    world = run_world(tmp_path, in_track(40, 50), config={"publication_slot": "15m"})
    assert START < world.scoring_ended < START + 300
    assert result_commit(world)["date"] == START + 300 == next_slot(world.scoring_ended, 900)


def test_a_bad_slot_setting_stops_the_worker_at_start_and_public_sets_wait_for_no_slot(tmp_path, monkeypatch):
    from rexrank.backend.worker import Worker
    from rexrank.store import Quota, open_store
    from rexrank.store.repo import StoreError
    from support.requests import submit

    store = open_store(tmp_path / "s", quota=Quota(0))
    config = tmp_path / "s" / "requests" / "config.json"
    for bad in ("soon", 0, -5, "1w", True):
        config.write_text(json.dumps({"publication_slot": bad}))
        with pytest.raises(StoreError, match=r"config\.json: publication_slot .* is not a duration; give positive "
                                             r"seconds \(3600\) or a duration such as \"15m\", \"1h\""):
            Worker(store, metrics="bleu2", worker_id="w")
    config.write_text(json.dumps({"publication_slot": 60}))
    clock = ControlledClock(START)
    monkeypatch.setattr(R, "now", clock.now)
    worker = Worker(store, metrics="bleu2", worker_id="w", clock=clock)
    public = submit(store)  # the embedded example: a public test set is published when scored
    assert worker.run(once=True) == 1 and store.get_request(public["id"])["status"] == "FINISHED"
    assert clock.waits == [] and "scored_time" in store.get_result(public["id"])["provenance"]


def test_the_next_slot_is_the_first_multiple_strictly_after():
    assert next_slot(HOUR - 0.001, 3600) == HOUR
    assert next_slot(HOUR, 3600) == HOUR + 3600  # a scoring that ends on the hour waits a whole slot
    assert next_slot(START, 900) == START + 300
    assert [parse_duration(v, setting="publication_slot", where="w")
            for v in (3600, 90.5, "1h", "15m", "30s", "2d", " 5 m ")] == [3600, 90.5, 3600, 900, 30, 172800, 300]
