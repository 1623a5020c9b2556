"""Building the indexes from the records themselves: once for a store written before the
indexes existed (automatic, logged), and on demand after the repos were edited by hand
(`rexrank backend --reindex`). Both read every record: the only operations that do.
"""
from __future__ import annotations

import logging

from rexrank.store import records as R
from rexrank.store.index import IndexEdit
from rexrank.store.repo import Snapshot, transact

log = logging.getLogger("rexrank.store")


INDEX_DIR = "index/"


def _rebuilt(repo, snap: Snapshot, build) -> dict[str, bytes | None]:
    """Changes that make the repo's index files (index/, listed in `snap`) exactly what
    `build(edit)` writes into an empty IndexEdit: new or changed files, and deletions."""
    fresh = IndexEdit(repo, snap, fresh=True)
    build(fresh)
    wanted = {p: d for p, d in fresh.changes().items() if d is not None}
    # the register of received times is the backend's own record, not derived from records
    changes: dict[str, bytes | None] = {p: None for p in snap.paths(INDEX_DIR)
                                        if p not in wanted and p != R.RECEIVED_INDEX}
    for path, data in wanted.items():
        if path not in snap.files or repo.read(snap, path) != data:
            changes[path] = data
    return changes


def index_results(store, *, reason: str = "written before the results index existed") -> int:
    """Index every result record (one commit); returns how many records were indexed."""
    counted: list[int] = [0]

    def decide(snap: Snapshot):
        records = store._read_records("results", snap, [R.RECORDS_DIR], R.parse_result)

        def build(edit: IndexEdit) -> None:
            for path, record in records:
                edit.put_result(path, record, store.results.read(snap, path))
            edit.mark_results_indexed()

        changes = _rebuilt(store.results, snap, build)
        counted[0] = len(records)
        return changes, f"index {len(records)} result records", None

    transact(store.results, decide, folders=(R.RECORDS_DIR, INDEX_DIR))
    log.info("%s: indexed %d result record(s) (%s); from now on the leaderboard reads only what changes",
             store.name, counted[0], reason)
    return counted[0]


def index_requests(store) -> int:
    """Move settled requests out of queue/ and rebuild the request indexes from done/;
    returns how many settled requests are indexed."""
    counted: list[int] = [0]

    def decide(snap: Snapshot):
        found = store._read_records("requests", snap, [R.QUEUE_DIR, R.DONE_DIR], R.parse_request)
        moves: dict[str, bytes | None] = {}
        settled = []
        for path, req in found:
            if req["status"] in R.SETTLED:
                settled.append(req)
                if path.startswith(R.QUEUE_DIR):
                    moves[R.request_path(req["id"], req["status"])] = R.dumps(req)
                    moves[path] = None
        settled.sort(key=lambda r: (r.get("finished_time") or r["submitted_time"], r["id"]))

        def build(edit: IndexEdit) -> None:
            for req in settled:
                edit.add_settled(req)

        changes = _rebuilt(store.requests, snap, build)
        counted[0] = len(settled)
        return {**moves, **changes}, f"index {len(settled)} settled requests", None

    transact(store.requests, decide, folders=(R.QUEUE_DIR, R.DONE_DIR, INDEX_DIR))
    return counted[0]


def reindex(store) -> tuple[int, int]:
    """Rebuild both repos' indexes from their records: (settled requests, result records);
    filings the copy index lacks (made before it existed) are fingerprinted from their
    stored predictions (rexrank.store.copies)."""
    n_requests = index_requests(store)
    n_results = index_results(store, reason="rebuilt on request")
    store._results_indexed = True
    n_copies = store.index_copies()
    if n_copies:
        log.info("%s: fingerprinted %d earlier filing(s) for the copy rule", store.name, n_copies)
    log.info("%s: rebuilt the indexes of %d settled request(s) and %d result record(s)", store.name, n_requests, n_results)
    return n_requests, n_results
