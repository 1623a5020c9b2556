"""The leaderboard reloads incrementally (issue 15): a reload reads only the result records
that changed, re-tables only them, and gives the same frame as reading everything."""
from __future__ import annotations

import json

import pandas as pd

from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.store import Quota, open_store
from rexrank.store import records as R
from test_store_layout import RESULT, Reads, earlier_layout_store


def record(i: int, **kw) -> dict:
    test_set = ("iu_xray", "mimic_cxr", "chexpert_plus", "rexgradient")[i % 4]
    return {**RESULT, "id": f"r{i:03d}", "model_name": f"model-{i}", "test_set": test_set,
            "values": {"bleu2": {"mean": 0.1 + i / 1000, "ci95": 0.01, "n": 100}}, **kw}


def full_frame(store) -> pd.DataFrame:
    return records_frame(store.list_results(), problems=[])


def test_a_reload_reads_only_what_changed_and_matches_a_full_read(tmp_path, monkeypatch):
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([record(i) for i in range(40)])
    source = LeaderboardSource.from_store(store, ttl=0)
    pd.testing.assert_frame_equal(source.frame(), full_frame(store))
    reads = Reads(monkeypatch, store.results)
    source.frame(force=True)
    assert reads.paths == [] and reads.listed_files == 0  # nothing changed: a version check only

    store.add_result(record(100))
    store.add_result(record(7, values={"bleu2": {"mean": 0.9, "ci95": None, "n": 100}}))  # re-scored: replaced
    reads.clear()
    frame = source.frame(force=True)
    records_read = reads.records(R.RECORDS_DIR)
    assert sorted(records_read) == sorted([R.result_path(record(100)), R.result_path(record(7))])
    assert reads.listed_files <= 256 and all(f == (R.RESULT_SHARDS_DIR,) for f in reads.listed if f)
    pd.testing.assert_frame_equal(frame, full_frame(store))
    assert frame.loc[frame["id"] == "r007", "bleu2"].item() == 0.9


def test_removed_and_bad_records_and_duplicate_ids_as_a_full_read_gives_them(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    store.add_results([record(i) for i in range(12)])
    source = LeaderboardSource.from_store(store, ttl=0)
    source.frame()
    # a second record with an id already shown (another test set), and a record the leaderboard refuses
    store.add_result(record(3, test_set="mimic_cxr", track="findings_impression"))
    store.add_result(record(200, values={"nonsense": {"mean": 1}}))
    frame = source.frame(force=True)
    problems = []
    pd.testing.assert_frame_equal(frame, records_frame(store.list_results(), problems=problems))
    assert sorted(source.problems) == sorted(problems) and len(problems) == 2
    assert any("appears more than once" in p for p in source.problems)
    assert any("unknown leaderboard column" in p for p in source.problems)
    # a record removed by hand, past the index: gone after a reindex, or at the next full listing
    (root / "results" / R.result_path(record(5))).unlink()
    (root / "results" / R.result_path(record(6))).unlink()
    from rexrank.store.layout import index_results

    index_results(store, reason="a test")
    assert "r005" not in set(source.frame(force=True)["id"])
    source._feed.full_every = 0
    frame = source.frame(force=True)
    assert not {"r005", "r006"} & set(frame["id"])
    pd.testing.assert_frame_equal(frame, records_frame(store.list_results(), problems=[]))


def test_a_store_without_the_index_is_read_by_listing(tmp_path, monkeypatch):
    root = tmp_path / "s"
    earlier_layout_store(root, 8)  # results written by an earlier rexrank: no index, read-only here
    store = open_store(root, quota=Quota(0))
    source = LeaderboardSource.from_store(store, ttl=0)
    assert len(source.frame()) == 6
    # an older backend commits another record (no index)
    store.results.commit({"records/iu_xray/findings/late.json": json.dumps({**RESULT, "id": "late"}).encode()},
                         message="old", parent=store.results.version())
    reads = Reads(monkeypatch, store.results)
    frame = source.frame(force=True)
    assert "late" in set(frame["id"]) and reads.records(R.RECORDS_DIR) == ["records/iu_xray/findings/late.json"]
    assert not (root / "results" / "index").exists()  # the leaderboard never writes


def test_views_are_built_once_per_version_of_the_frame(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([record(i) for i in range(4)])
    source = LeaderboardSource.from_store(store, ttl=0)
    built = []
    view = source.cached(("v",), lambda: built.append(1) or len(source.frame()))
    source.frame(force=True)
    assert source.cached(("v",), lambda: built.append(1) or len(source.frame())) == view == 4 and len(built) == 1
    store.add_result(record(9))
    source.frame(force=True)
    assert source.cached(("v",), lambda: built.append(1) or len(source.frame())) == 5 and len(built) == 2


def test_many_small_changes_keep_the_frame_equal_to_a_full_read(tmp_path):
    import random

    rng = random.Random(7)
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([record(i) for i in range(30)])
    source = LeaderboardSource.from_store(store, ttl=0)
    source.frame()
    for step in range(12):
        for _ in range(rng.randint(1, 3)):  # new results and re-scored ones, in any order
            i = rng.randrange(60)
            store.add_result(record(i, values={"bleu2": {"mean": rng.random(), "ci95": None, "n": 100}}))
        pd.testing.assert_frame_equal(source.frame(force=True), full_frame(store), obj=f"step {step}")
