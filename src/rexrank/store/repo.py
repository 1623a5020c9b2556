"""The storage under a store: a `Repo` is a set of files at a version, a local folder or a Hub
dataset repo. Every write is a commit made against the version the writer read
(optimistic concurrency): if another writer committed in between, the commit is refused
with `ConflictError` and the caller re-reads and decides again (`transact`).

Reading is by folder: a snapshot lists only the folders asked for (`snapshot("queue/")`),
so what an operation costs depends on those folders, not on the size of the repo; any
other file is read by its path at the snapshot's version.
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, TypeVar

from rexrank.errors import RexrankError

T = TypeVar("T")


class StoreError(RexrankError):
    """The store cannot be opened, read or written."""


class StoreWriteError(StoreError):
    """A commit failed for a reason other than a concurrent writer (a full disk, a
    read-only store, the Hub refusing it): nothing of it was written."""


class StoreUnreachable(StoreError):
    """The store's server did not answer for a moment (a 5xx, a 429, a dropped connection):
    the same call may work later; nothing is wrong with the request or the store."""


class ConflictError(StoreError):
    """A commit was made against a stale version of the repo."""


def git_blob_oid(data: bytes) -> str:
    """The id git (and so the Hub) gives a file's content: a content id any writer can
    compute before committing, so that an index can name the exact content of a file."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


@dataclass
class Snapshot:
    """A repo at one version: the files under the `listed` folders ("" = everything), as
    path -> content id (the id changes whenever the content does)."""

    version: str
    files: dict[str, str] = field(default_factory=dict)
    listed: tuple[str, ...] = ()

    def paths(self, prefix: str = "", suffix: str = "") -> list[str]:
        if not any(prefix.startswith(folder) for folder in self.listed):
            # a bug, not a data problem: the caller forgot to list the folder it reads
            raise AssertionError(f"snapshot lists {self.listed}, not {prefix!r}")
        return sorted(p for p in self.files if p.startswith(prefix) and p.endswith(suffix))


class Repo(Protocol):
    name: str  # for messages: a folder path or hf://datasets/ORG/NAME

    def version(self) -> str:
        """The current version (cheap: nothing is listed)."""
        ...

    def snapshot(self, *folders: str, at: str | None = None) -> Snapshot:
        """The current version (or `at`, a version just read) with the files under
        `folders` listed (no folder: none; "" lists everything)."""
        ...

    def read(self, snapshot: Snapshot, path: str) -> bytes:
        """A file's content at the snapshot's version (StoreError if it is absent)."""
        ...

    def read_optional(self, snapshot: Snapshot, path: str) -> bytes | None:
        """Like `read`, None if the file does not exist."""
        ...

    def commit(self, changes: dict[str, bytes | None], *, message: str, parent: str) -> str:
        """Write (bytes) or delete (None) files in one commit made on top of `parent`;
        return the new version. Raises ConflictError if the repo is no longer at `parent`."""
        ...


# None: nothing to write; otherwise (changes, commit message, value returned to the caller)
Decision = tuple[dict[str, bytes | None], str, T] | None


def load_json_object(repo: Repo, snap: Snapshot, path: str, *, damaged: str) -> dict:
    """A JSON object file's content at the snapshot's version ({} if there is none); a file
    that is not one raises StoreError saying `damaged` (what it is and how to restore it)."""
    data = repo.read_optional(snap, path)
    if data is None:
        return {}
    try:
        content = json.loads(data)
    except ValueError:
        content = None
    if not isinstance(content, dict):
        raise StoreError(f"{repo.name}: {damaged}")
    return content


def consistent_reads(repo, read: Callable[[], T]) -> T:
    """`read()` (a listing and the reads that follow it) as of one version: a Hub repo
    reads at the listing's version anyway; a local repo, which readers never lock (a
    reader stopped with Ctrl-Z must not hold off writers), runs it again if a commit
    landed meanwhile. Without it another worker's commit can move a listed file away
    before it is read. `read` must only read."""
    again = getattr(repo, "read_consistently", None)
    return again(read) if again else read()


def transact(
    repo: Repo,
    decide: Callable[[Snapshot], Decision],
    *,
    folders: Sequence[str] = (),
    attempts: int = 50,
    default: T | None = None,
) -> T | None:
    """Read the repo (listing `folders`), let `decide` choose the changes, commit them on
    top of what was read; on a conflict read again and decide again. `decide` must only
    depend on the snapshot (and on files read at its version)."""
    for attempt in range(attempts):
        snap = repo.snapshot(*folders)
        try:
            decision = decide(snap)
        except StoreError:
            if repo.version() != snap.version:  # a file listed was moved by a commit since: decide again
                continue
            raise
        if decision is None:
            return default
        changes, message, value = decision
        if not changes:
            return value
        try:
            repo.commit(changes, message=message, parent=snap.version)
            return value
        except ConflictError:
            # another writer won; back off a little (jittered) so that writers interleave
            time.sleep(min(0.02 * (attempt + 1), 0.5) * random.random())
    raise StoreError(f"{repo.name}: gave up after {attempts} conflicting concurrent writes; try again")
