"""The leaderboard reloads incrementally (issue 15): a reload reads only the result records
that changed, re-tables only them, and gives the same frame as reading everything."""
from __future__ import annotations

import json

import pandas as pd

from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.store import Quota, open_store
from rexrank.store import records as R
from support.store_fixtures import RESULT, Reads, earlier_layout_store


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


def test_a_new_result_rebuilds_only_its_own_tables_and_every_view_equals_a_fresh_build(tmp_path):
    """The part cache (views per test set and track): after new and re-scored results, the
    page and model views equal views built from a full read, and only the changed test
    sets' views were computed again."""
    import random

    from rexrank.leaderboard import tables
    from rexrank.leaderboard.model_page import model_results

    def scored(i: int, mean: float) -> dict:
        track = ("findings", "findings_impression")[(i // 4) % 2]
        return record(i, track=track, values={"bleu2": {"mean": mean, "ci95": 0.01, "n": 100}})

    def part_of(i: int) -> tuple[str, str]:
        r = scored(i, 0.0)
        return r["test_set"], r["track"]

    def all_views(frame, cached=tables.uncached):
        out = {}
        for track in ("findings", "findings_impression"):
            views = tables.page_views(frame, track, cached=cached)
            out[(track, "overview")] = views.overview
            out[(track, "overview_plain")] = views.overview_plain
            for test_set, view in views.tables.items():
                out[(track, test_set, "display")], out[(track, test_set, "plain")] = view.display, view.plain
                out[(track, test_set, "note")] = pd.DataFrame({"note": [view.note]})
        for i in (0, 5, 42):
            out[("model", i)] = model_results(frame, f"model-{i}", cached=cached)
        return out

    rng = random.Random(3)
    store = open_store(tmp_path / "s", quota=Quota(0))
    store.add_results([scored(i, rng.random()) for i in range(30)])
    source = LeaderboardSource.from_store(store, ttl=0)
    frame, cached = source.part_cache()
    all_views(frame, cached)  # everything computed once
    for step in range(8):
        changed = rng.sample(range(48), rng.randint(1, 2))  # new results and re-scored ones
        for i in changed:
            store.add_result(scored(i, rng.random()))
        source.frame(force=True)
        frame, cached = source.part_cache()
        computed = set()

        def counting(key, part, compute):
            return cached(key, part, lambda: computed.add(part) or compute())

        got, want = all_views(frame, counting), all_views(full_frame(store))
        assert got.keys() == want.keys()
        for key in want:
            pd.testing.assert_frame_equal(got[key], want[key], obj=f"step {step}: {key}")
        assert computed == {part_of(i) for i in changed}, f"step {step}"
