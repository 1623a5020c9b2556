"""`ResultsFeed`: the result records of a store, re-read incrementally.

The first look reads every record (listing records/). Each later look costs one version
check when nothing changed; otherwise it lists the 256 index shards (index/records/),
reads the shards whose content changed, and reads only the records those shards say
changed. Every `full_every` seconds it lists records/ again, so that a record written
past the index (by hand, or by an older rexrank) is not missed for long; a store written
before the index existed is always read by listing (only changed files are read).
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field

from rexrank.store import records as R
from rexrank.store.problems import Problem
from rexrank.store.repo import Snapshot, git_blob_oid

log = logging.getLogger("rexrank.store")


@dataclass
class Delta:
    """What changed since the previous look: record path -> record (new or changed),
    removed paths, and the current problems (path -> Problem)."""

    changed: dict[str, dict] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    problems_changed: bool = False

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed or self.problems_changed)


class ResultsFeed:
    def __init__(self, store, *, full_every: float = 900.0):
        self.store = store
        self.repo = store.results
        self.full_every = full_every
        self.version: str | None = None
        self.records: dict[str, dict] = {}  # path -> record
        self.problems: dict = {}  # path -> rexrank.store.Problem
        self._blobs: dict[str, str] = {}  # path -> git blob id of what was read (records and bad files)
        self._listed: dict[str, str] = {}  # path -> the repo's content id when it was last read by listing
        self._shards: dict[str, str] = {}  # shard path -> content id when last read
        self._last_full = -math.inf
        self._indexed = False
        self._members: dict[str, set[str]] = {}  # shard path -> record paths read that it covers

    def refresh(self) -> Delta:
        # no lock (readers take none): result records are only ever replaced whole, and a
        # commit landing during this look moves the version, so the next look sees it
        version = self.repo.version()
        full_due = time.monotonic() - self._last_full > self.full_every
        if version == self.version and not full_due:
            return Delta()
        if not self._indexed:
            self._indexed = self.repo.read_optional(Snapshot(version), R.RESULTS_LAYOUT) is not None
        if full_due or not self._indexed:
            snap = self.repo.snapshot(R.RECORDS_DIR, R.RESULT_SHARDS_DIR, at=version)
            delta = self._by_listing(snap)
        else:
            snap = self.repo.snapshot(R.RESULT_SHARDS_DIR, at=version)
            delta = self._by_index(snap)
        self._shards = {p: c for p, c in snap.files.items() if p.startswith(R.RESULT_SHARDS_DIR)}
        self.version = snap.version
        return delta

    def _read(self, snap: Snapshot, path: str, delta: Delta) -> None:
        """Read one record file into the state (or into problems), noting what changed."""
        data = self.repo.read_optional(snap, path)
        if data is None:  # named by the index but gone (removed by hand)
            self._forget(path, delta)
            return
        blob = git_blob_oid(data)
        if self._blobs.get(path) == blob:
            return
        self._blobs[path] = blob
        self._members.setdefault(R.result_shard(path), set()).add(path)
        try:
            record = R.parse_result(data, path)
        except R.BadRecord as exc:
            if path in self.records:
                del self.records[path]
                delta.removed.add(path)
            self.problems[path] = Problem("results", path, str(exc))
            delta.problems_changed = True
            log.warning("%s: skipped an unreadable record: %s", self.store.name, self.problems[path])
            return
        if self.problems.pop(path, None) is not None:
            delta.problems_changed = True
        self.records[path] = record
        delta.changed[path] = record
        delta.removed.discard(path)

    def _forget(self, path: str, delta: Delta) -> None:
        if self._blobs.pop(path, None) is not None:
            self._members.get(R.result_shard(path), set()).discard(path)
        self._listed.pop(path, None)
        if self.records.pop(path, None) is not None:
            delta.removed.add(path)
        if self.problems.pop(path, None) is not None:
            delta.problems_changed = True

    def _by_listing(self, snap: Snapshot) -> Delta:
        delta = Delta()
        listed = {p: c for p, c in snap.files.items() if p.startswith(R.RECORDS_DIR) and p.endswith(".json")}
        for path in set(self._blobs) - set(listed):
            self._forget(path, delta)
        for path, content_id in sorted(listed.items()):
            # on the Hub the listing's content id is the blob id itself
            if self._listed.get(path) == content_id or self._blobs.get(path) == content_id:
                continue
            self._read(snap, path, delta)
            self._listed[path] = content_id
        self._last_full = time.monotonic()
        return delta

    def _by_index(self, snap: Snapshot) -> Delta:
        delta = Delta()
        for shard, content_id in sorted(snap.files.items()):
            if not shard.startswith(R.RESULT_SHARDS_DIR) or self._shards.get(shard) == content_id:
                continue
            entries = _shard_entries(self.repo.read(snap, shard))
            for path in [p for p in self._members.get(shard, ()) if p not in entries]:
                self._forget(path, delta)
            for path, entry in sorted(entries.items()):
                if self._blobs.get(path) != entry.get("blob"):
                    snap.files[path] = entry.get("blob")  # lets a Hub repo serve it from its cache
                    self._read(snap, path, delta)
        for shard in set(self._shards) - set(snap.files):  # a shard deleted: all its records went
            for path in list(self._members.get(shard, ())):
                self._forget(path, delta)
        return delta


def _shard_entries(data: bytes) -> dict:
    try:
        content = json.loads(data)
    except ValueError:
        content = None
    records = content.get("records") if isinstance(content, dict) else None
    return records if isinstance(records, dict) else {}
