"""Where the leaderboard's records come from: a store (local folder or Hub) or a plain list.

The frame is rebuilt at most every `ttl` seconds (page loads re-read the store; a Hub
store is not listed on every click). Bad records are left out and listed in `problems`,
which the app shows above the tables.
"""
from __future__ import annotations

import io
import threading
import time
from typing import Callable

import pandas as pd

from rexrank.leaderboard.records import records_frame
from rexrank.store.names import display


class LeaderboardSource:
    def __init__(self, load: Callable[[], list[dict]], *, label: str, store=None, ttl: float = 60.0,
                 load_problems: Callable[[], list] | None = None):
        self._load = load
        self._load_problems = load_problems or (lambda: [])
        self.label = label
        self.store = store
        self.ttl = ttl
        self._lock = threading.Lock()
        self._frame: pd.DataFrame | None = None
        self._records: dict[str, dict] = {}
        self._loaded_at = 0.0
        self.problems: list[str] = []

    @classmethod
    def from_records(cls, records: list[dict], *, label: str = "records given in code") -> "LeaderboardSource":
        records = list(records)
        return cls(lambda: records, label=label, ttl=float("inf"))

    @classmethod
    def from_store(cls, store, *, ttl: float = 60.0) -> "LeaderboardSource":
        # the store quarantines result files it cannot read (rexrank.store.Store.problems)
        # (as of the listing just made: nothing is read twice)
        return cls(store.list_results, label=f"store {store.name}", store=store, ttl=ttl,
                   load_problems=lambda: store.quarantined("results"))

    def frame(self, *, force: bool = False) -> pd.DataFrame:
        with self._lock:
            stale = time.monotonic() - self._loaded_at > self.ttl
            if self._frame is None or force or stale:
                records = self._load()
                problems: list[str] = [str(p) for p in self._load_problems()]
                self._frame = records_frame(records, problems=problems)
                problems = [display(p) for p in problems]
                self._records = {r.get("id"): r for r in records if isinstance(r, dict)}
                self.problems = problems
                self._loaded_at = time.monotonic()
            return self._frame

    def record(self, record_id: str) -> dict | None:
        self.frame()
        return self._records.get(record_id)

    def per_study(self, record_id: str) -> pd.DataFrame | None:
        """Per-study scores of a result (id + one column per score), when the store has them."""
        record = self.record(record_id)
        if self.store is None or record is None or not record.get("per_study_available"):
            return None
        data = self.store.read_per_study(record)
        if data is None:
            return None
        return pd.read_parquet(io.BytesIO(data))


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
