"""Where the leaderboard's records come from: a store (local folder or Hub) or a plain list.

The frame is refreshed at most every `ttl` seconds (a page load forces it). From a store
it is refreshed incrementally: the store's ResultsFeed reads only the records that
changed since the last look (a version check when nothing did), and only those are
checked and re-tabled. Bad records are left out and listed in `problems`, which the app
shows above the tables.
"""
from __future__ import annotations

import bisect
import io
import threading
import time
from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np
import pandas as pd
from pyarrow import ArrowException

from rexrank.errors import RexrankError, first_line
from rexrank.leaderboard.records import check_record, frame_from_rows, records_frame
from rexrank.store.names import display

class LeaderboardSource:
    def __init__(self, load: Callable[[], list[dict]] | None = None, *, label: str, store=None, ttl: float = 60.0,
                 load_problems: Callable[[], list] | None = None, feed=None):
        self._load = load
        self._load_problems = load_problems or (lambda: [])
        self._feed = feed  # a ResultsFeed: incremental; otherwise `load` is called for a full rebuild
        self.label = label
        self.store = store
        self.ttl = ttl
        self._lock = threading.Lock()
        self._frame: pd.DataFrame | None = None
        self._paths: list[str] = []  # the frame's rows' record paths, row for row (incremental refresh)
        self._keys: list[tuple] = []  # and their sort keys
        self._record_ids: dict[str, str] = {}  # path -> result id
        self._rows: dict[str, dict] = {}  # path -> frame row
        self._row_problems: dict[str, str] = {}  # path -> why the record cannot be shown
        self._value_problems: dict[str, list[str]] = {}  # path -> why some of its values are not ranked
        self._records: dict[str, dict] = {}
        self._loaded_at = 0.0
        self._per_study: dict[str, pd.DataFrame | None] = {}  # result id -> its per-study scores (None: unusable)
        self.per_study_problems: dict[str, str] = {}  # result id -> why its per-study file cannot be used
        # (id above, id below, column) -> paired test p-value (the tiers), while both results stay
        self.pair_p: dict[tuple[str, str, str], float] = {}
        self.generation = 0  # increases whenever the frame changes (a key for caching views)
        self.problems: list[str] = []
        self._views: OrderedDict = OrderedDict()  # (generation, key) -> a view of that frame
        # views of one (test set, track): kept while its rows are unchanged, so that a new
        # result rebuilds the views of its own table only
        self._epoch = 0  # bumped by a full rebuild: every part changes
        self._part_versions: dict[tuple[str, str], int] = {}
        self._part_views: OrderedDict = OrderedDict()  # (part, key) -> ((epoch, part version), view)

    @classmethod
    def from_records(cls, records: list[dict], *, label: str = "records given in code") -> "LeaderboardSource":
        records = list(records)
        return cls(lambda: records, label=label, ttl=float("inf"))

    @classmethod
    def from_store(cls, store, *, ttl: float = 60.0) -> "LeaderboardSource":
        # the store's feed quarantines result files it cannot read, and reads only what changed
        from rexrank.store.records import public_store_name

        # the page shows the label: never the server's path to a local store
        return cls(label=public_store_name(store.name), store=store, ttl=ttl, feed=store.results_feed())

    def frame(self, *, force: bool = False) -> pd.DataFrame:
        with self._lock:
            stale = time.monotonic() - self._loaded_at > self.ttl
            if self._frame is None or force or stale:
                if self._feed is not None:
                    self._refresh_from_feed()
                else:
                    self._rebuild(self._load(), [str(p) for p in self._load_problems()])
                self._loaded_at = time.monotonic()
            return self._frame

    def _rebuild(self, records: list[dict], problems: list[str]) -> None:
        self._per_study.clear()
        self.pair_p.clear()
        self.per_study_problems.clear()
        self._frame = records_frame(records, problems=problems)
        self.problems = [display(p) for p in problems]
        self._records = {r.get("id"): r for r in records if isinstance(r, dict)}
        self._epoch += 1
        self.generation += 1

    def _refresh_from_feed(self) -> None:
        delta = self._feed.refresh()
        if self._frame is not None and not delta:
            return
        parts = {_part(self._rows[p]) for p in [*delta.removed, *delta.changed] if p in self._rows}  # before
        gone = set()
        for path in [*delta.removed, *delta.changed]:  # per-study data of changed results is read again
            if path in self._rows:
                gone.add(self._rows[path]["id"])
                self._per_study.pop(self._rows[path]["id"], None)
                self.per_study_problems.pop(self._rows[path]["id"], None)
        if gone:  # and their tests too
            self.pair_p = {k: p for k, p in self.pair_p.items() if k[0] not in gone and k[1] not in gone}
        for path in delta.removed:
            self._rows.pop(path, None)
            self._row_problems.pop(path, None)
            self._value_problems.pop(path, None)
        for path, record in delta.changed.items():
            self._row_problems.pop(path, None)
            self._value_problems[path] = []
            try:
                self._rows[path] = check_record(record, value_problems=self._value_problems[path])
            except RexrankError as exc:
                self._rows.pop(path, None)
                self._row_problems[path] = str(exc)
        touched = set(delta.removed) | set(delta.changed)
        ids = [row["id"] for row in self._rows.values()]
        if self._frame is None or len(ids) != len(set(ids)) or len(touched) > len(self._rows) // 4:
            self._assemble()
            self._records = {row_id: self._feed.records[path] for path, row_id in zip(self._paths, self._frame["id"])}
            self._epoch += 1
        else:
            parts |= {_part(self._rows[p]) for p in touched if p in self._rows}  # after
            for part in parts:
                self._part_versions[part] = self._part_versions.get(part, 0) + 1
            for path in touched:
                self._records.pop(self._record_ids.pop(path, None), None)
            self._patch(touched)
            self._records.update({self._rows[p]["id"]: self._feed.records[p] for p in touched if p in self._rows})
        self._record_ids = {path: row["id"] for path, row in self._rows.items()}
        feed_problems = [str(p) for _, p in sorted(self._feed.problems.items())]
        value_problems = [why for p in sorted(self._value_problems) for why in self._value_problems[p]]
        self.problems = [display(p) for p in feed_problems + [self._row_problems[p] for p in sorted(self._row_problems)]
                         + value_problems] + [why for rid, why in sorted(self.per_study_problems.items()) if rid in self._records]
        self.generation += 1

    def _assemble(self) -> None:
        """Every row, sorted, with the first of two records with one id kept (records_frame's rule)."""
        self._row_problems = {p: why for p, why in self._row_problems.items() if not why.endswith(DUPLICATE)}
        seen: set[str] = set()
        kept: list[tuple[str, dict]] = []
        for path, row in sorted(self._rows.items(), key=lambda pr: _sort_key(*pr)):
            if row["id"] in seen:
                self._row_problems[path] = f"result record {row['id']}: {DUPLICATE}"
                continue
            seen.add(row["id"])
            kept.append((path, row))
        self._paths = [p for p, _ in kept]
        self._keys = [_sort_key(p, r) for p, r in kept]
        self._frame = frame_from_rows([r for _, r in kept])

    def _patch(self, touched: set[str]) -> None:
        """Replace only the touched rows: the frame is re-tabled for them, not rebuilt, and
        the new rows are put in place by bisection in the (sorted) keys of the others."""
        keep = [i for i, p in enumerate(self._paths) if p not in touched]
        kept_keys = [self._keys[i] for i in keep]
        added = sorted((_sort_key(p, self._rows[p]), p) for p in touched if p in self._rows)
        frame = self._frame.iloc[keep]
        if added:
            new = frame_from_rows([self._rows[p] for _, p in added])
            frame = pd.concat([frame, new], ignore_index=True)
            positions = [bisect.bisect_right(kept_keys, key) for key, _ in added]
            order = np.insert(np.arange(len(keep)), positions, np.arange(len(keep), len(keep) + len(added)))
            frame = frame.take(order)
            all_keys = kept_keys + [key for key, _ in added]
            self._keys = [all_keys[i] for i in order]
        else:
            self._keys = kept_keys
        self._frame = frame.reset_index(drop=True)
        self._paths = [key[-1] for key in self._keys]

    def cached(self, key, compute: Callable[[], object]):
        """`compute()` (a view of the frame), computed once per version of the frame: a page
        load that finds nothing new rebuilds no table."""
        self.frame()
        generation = self.generation
        with self._lock:
            if (generation, key) in self._views:
                self._views.move_to_end((generation, key))
                return self._views[(generation, key)]
        value = compute()
        with self._lock:
            self._views[(generation, key)] = value
            while self._views and (len(self._views) > VIEW_CACHE_SIZE or next(iter(self._views))[0] != self.generation):
                self._views.popitem(last=False)  # views of an older frame, or the least recently used
        return value

    def part_cache(self) -> tuple[pd.DataFrame, Callable]:
        """The current frame, and `cached(key, (test_set, track), compute)` for it: `compute()`
        (a view of that test set and track's rows) computed once while those rows stay the
        same, even across new results elsewhere (rexrank.leaderboard.tables.PartCache)."""
        while True:
            frame = self.frame()
            with self._lock:
                if self._frame is frame:  # versions taken with the frame they describe
                    epoch, versions = self._epoch, dict(self._part_versions)
                    break

        def cached(key: Hashable, part: tuple[str, str], compute: Callable):
            stamp, slot = (epoch, versions.get(part, 0)), (part, key)
            with self._lock:
                kept = self._part_views.get(slot)
                if kept is not None and kept[0] == stamp:
                    self._part_views.move_to_end(slot)
                    return kept[1]
            value = compute()
            with self._lock:
                self._part_views[slot] = (stamp, value)
                self._part_views.move_to_end(slot)
                while len(self._part_views) > VIEW_CACHE_SIZE:
                    self._part_views.popitem(last=False)
            return value

        return frame, cached

    def record(self, record_id: str) -> dict | None:
        self.frame()
        return self._records.get(record_id)

    def per_study(self, record_id: str, *, refresh: bool = True) -> pd.DataFrame | None:
        """Per-study scores of a result (id + one column per score), when the store has them;
        kept until the record changes (a re-scored result has a new record). A file that is
        missing or cannot be used gives None and a line in `problems`: it affects the pages
        that show this result's tests only. `refresh=False`: of the frame as it is (a view
        being built from it), without looking for new results."""
        record = self.record(record_id) if refresh else self._records.get(record_id)
        if self.store is None or record is None or not record.get("per_study_available"):
            return None
        if record_id not in self._per_study:
            try:
                data = self.store.read_per_study(record)
                if data is None:
                    raise RexrankError("the file is missing")
                self._per_study[record_id] = _checked_per_study(pd.read_parquet(io.BytesIO(data)))
            except (RexrankError, OSError, ValueError, ArrowException) as exc:
                why = f"per-study scores of result record {record_id} cannot be used: {first_line(exc)}"
                with self._lock:
                    self.per_study_problems[record_id] = display(why)
                    self.problems = [*self.problems, display(why)]
                self._per_study[record_id] = None
        return self._per_study[record_id]


def _checked_per_study(table: pd.DataFrame) -> pd.DataFrame:
    """A per-study table the significance tests can use: unique study ids, numeric scores."""
    from rexrank.results_schema import LEADERBOARD_COLUMNS

    if "id" not in table.columns:
        raise RexrankError("it has no 'id' column")
    if table["id"].duplicated().any():
        raise RexrankError(f"study id {table['id'][table['id'].duplicated()].iloc[0]!r} appears more than once")
    for column in (c.per_study_column for c in LEADERBOARD_COLUMNS):
        if column in table.columns and not pd.api.types.is_numeric_dtype(table[column].dtype):
            raise RexrankError(f"column {column!r} is {table[column].dtype}, not numbers")
    return table


def _part(row: dict) -> tuple[str, str]:
    return row["test_set"], row["track"]


def _sort_key(path: str, row: dict) -> tuple[str, str, str, str]:
    """The frame's order (records_frame's, of list_results: test set, track, id); the path
    last, which orders records with one id the same way every time."""
    return row["test_set"], row["track"], row["id"], path


DUPLICATE = "id appears more than once"
VIEW_CACHE_SIZE = 256


def seed_if_empty(store) -> int:
    """Fill an empty store with the shipped published results; returns how many were added."""
    from rexrank.leaderboard.published import load_seed_records

    if store.list_results():
        return 0
    return store.add_results(load_seed_records())


def open_leaderboard_store(spec: str | None = None):
    """The store the leaderboard serves, and a note for the console.

    `spec` None means $REXRANK_STORE, else the default local store, which is seeded with the
    published results when empty; a store named explicitly is never written to here."""
    import os

    from rexrank.store import open_store

    default = spec is None and not os.environ.get("REXRANK_STORE")
    store = open_store(spec)
    note = ""
    if default:
        added = seed_if_empty(store)
        if added:
            note = f"seeded the empty default store {store.name} with {added} published ReXrank results"
    elif not store.list_results():
        note = (
            f"note: store {store.name} has no results yet "
            f"(`rexrank import-published DIR --store {store.name}` adds the published ones)"
        )
    return store, note
