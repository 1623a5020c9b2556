"""The index files kept beside the records (layout in rexrank.store.records), edited in
the same commit as the records they describe, so they share the records' optimistic
concurrency: an index can never describe a version of the repo that was not committed.

Each index file is small whatever the history holds: one model name's, submitter's or
predictions content's settled requests, the last RECENT_LIMIT settled requests, 1/256 of the result records.
"""
from __future__ import annotations

import json

from rexrank.store import records as R
from rexrank.store.accounts import index_name
from rexrank.store.repo import Repo, Snapshot, git_blob_oid, load_json_object

REINDEX_ADVICE = "rebuild the indexes with `rexrank backend --reindex`"


def load_index(repo: Repo, snap: Snapshot, path: str) -> dict:
    """An index file's content at the snapshot's version ({} if there is none)."""
    return load_json_object(repo, snap, path, damaged=f"index file {path} is damaged; {REINDEX_ADVICE}")


def dumps_index(content: dict) -> bytes:
    # compact: index files are read by programs, and json's C encoder only serves this form
    return (json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def result_entry(record: dict, data: bytes) -> dict:
    """What the results index says of one record: its content id and the names the
    submission rules and the leaderboard's change detection need."""
    return {"blob": git_blob_oid(data), "id": record["id"], "model_name": str(record.get("model_name", "")),
            "source": record.get("source"), "submitter": record.get("submitter")}


class IndexEdit:
    """Index files read at one snapshot, edited, and turned into commit changes."""

    def __init__(self, repo: Repo, snap: Snapshot, *, fresh: bool = False):
        """`fresh`: start from empty files instead of reading them (rebuilding an index)."""
        self.repo, self.snap, self.fresh = repo, snap, fresh
        self._files: dict[str, dict] = {}
        self._existed: set[str] = set()
        self._dirty: set[str] = set()

    def file(self, path: str) -> dict:
        if path not in self._files:
            self._files[path] = {} if self.fresh else load_index(self.repo, self.snap, path)
            if self._files[path]:
                self._existed.add(path)
        return self._files[path]

    def _section(self, path: str, key: str, empty):
        content = self.file(path)
        self._dirty.add(path)
        return content.setdefault(key, empty)

    def changes(self) -> dict[str, bytes | None]:
        """Edited files as commit changes; a file left with nothing in it is deleted."""
        out: dict[str, bytes | None] = {}
        for path in sorted(self._dirty):
            content = self._files[path]
            empty = all(isinstance(v, (dict, list)) and not v for v in content.values())
            if not empty:
                out[path] = dumps_index(content)
            elif path in self._existed:
                out[path] = None
        return out

    # ---- requests repo ---------------------------------------------------------------
    def add_settled(self, request: dict) -> None:
        if not self.file(R.RECENT_INDEX):  # the first settled request: the indexes start at this version
            self._files[R.REQUESTS_LAYOUT] = dict(R.REQUESTS_LAYOUT_CONTENT)
            self._dirty.add(R.REQUESTS_LAYOUT)
        entry = R.summary(request)
        for path in R.request_index_files(request["model_name"], index_name(request), request["predictions"]["sha256"]):
            self._section(path, "requests", {})[request["id"]] = entry
        recent = [e for e in self._section(R.RECENT_INDEX, "requests", []) if e.get("id") != request["id"]]
        recent.append(R.recent_entry(request))
        self._files[R.RECENT_INDEX]["requests"] = recent[-R.RECENT_LIMIT:]

    def remove_settled(self, request: dict) -> None:
        for path in R.request_index_files(request["model_name"], index_name(request), request["predictions"]["sha256"]):
            self._section(path, "requests", {}).pop(request["id"], None)
        recent = self._section(R.RECENT_INDEX, "requests", [])
        self._files[R.RECENT_INDEX]["requests"] = [e for e in recent if e.get("id") != request["id"]]

    def receive(self, request_id: str, when: str) -> None:
        """Register when the backend first saw an open request (see R.with_server_time)."""
        if self.file(R.RECEIVED_INDEX).get("requests", {}).get(request_id) != when:
            self._section(R.RECEIVED_INDEX, "requests", {})[request_id] = when

    def forget_received(self, open_ids: set[str]) -> None:
        """Drop register entries of requests no longer in the queue (removed by hand)."""
        received = self.file(R.RECEIVED_INDEX).get("requests", {})
        gone = [rid for rid in received if rid not in open_ids]
        if gone:
            section = self._section(R.RECEIVED_INDEX, "requests", {})
            for rid in gone:
                section.pop(rid, None)

    def move_request(self, old_path: str | None, old: dict | None, new: dict) -> dict[str, bytes | None]:
        """Changes that write `new` where its status puts it (queue/ or done/), remove the
        file it was read from if that is elsewhere, and keep the settled index and the
        register of received times in step (`new` as R.with_server_time returned it)."""
        new_path = R.request_path(new["id"], new["status"])
        if new_path.startswith(R.QUEUE_DIR) and new.get("received_time"):
            self.receive(new["id"], new["received_time"])  # e.g. requeued: keeps its time
        elif new["id"] in self.file(R.RECEIVED_INDEX).get("requests", {}):
            self._section(R.RECEIVED_INDEX, "requests", {}).pop(new["id"])  # settled: its record holds it
        changes: dict[str, bytes | None] = {new_path: R.dumps(new)}
        if old_path and old_path != new_path:
            changes[old_path] = None
        if old is not None and old_path and old_path.startswith(R.DONE_DIR):
            self.remove_settled(old)
        if new_path.startswith(R.DONE_DIR):
            self.add_settled(new)
        return changes

    # ---- results repo ----------------------------------------------------------------
    def put_result(self, path: str, record: dict, data: bytes) -> None:
        entries = self._section(R.result_shard(path), "records", {})
        old = entries.get(path)
        if old is not None:
            self._section(R.key_file(R.RESULT_NAMES_DIR, old.get("model_name", "")), "records", {}).pop(path, None)
        entry = result_entry(record, data)
        entries[path] = entry
        named = {k: v for k, v in entry.items() if k != "blob"}
        self._section(R.key_file(R.RESULT_NAMES_DIR, entry["model_name"]), "records", {})[path] = named

    def remove_result(self, path: str) -> None:
        entries = self._section(R.result_shard(path), "records", {})
        old = entries.pop(path, None)
        if old is not None:
            self._section(R.key_file(R.RESULT_NAMES_DIR, old.get("model_name", "")), "records", {}).pop(path, None)

    def mark_results_indexed(self) -> None:
        if self.file(R.RESULTS_LAYOUT) != R.RESULTS_LAYOUT_CONTENT:
            self._files[R.RESULTS_LAYOUT] = dict(R.RESULTS_LAYOUT_CONTENT)
            self._dirty.add(R.RESULTS_LAYOUT)
