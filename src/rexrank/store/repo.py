"""One versioned file repository, the unit both storage backends implement.

A store is two repos (requests and results), each either a local folder or a Hub
dataset repo. Every write is a commit made against the version the writer read
(optimistic concurrency): if another writer committed in between, the commit is refused
with `ConflictError` and the caller re-reads and decides again (`transact`).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, TypeVar

from rexrank.errors import RexrankError

T = TypeVar("T")


class StoreError(RexrankError):
    """The store cannot be opened, read or written."""


class ConflictError(StoreError):
    """A commit was made against a stale version of the repo."""


@dataclass
class Snapshot:
    """A repo at one version: file path -> content id (changes whenever the content does)."""

    version: str
    files: dict[str, str] = field(default_factory=dict)

    def paths(self, prefix: str = "", suffix: str = "") -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix) and p.endswith(suffix))


class Repo(Protocol):
    name: str  # for messages: a folder path or hf://datasets/ORG/NAME

    def snapshot(self) -> Snapshot: ...

    def read(self, snapshot: Snapshot, path: str) -> bytes: ...

    def commit(self, changes: dict[str, bytes | None], *, message: str, parent: str) -> str:
        """Write (bytes) or delete (None) files in one commit made on top of `parent`;
        return the new version. Raises ConflictError if the repo is no longer at `parent`."""
        ...


# None: nothing to write; otherwise (changes, commit message, value returned to the caller)
Decision = tuple[dict[str, bytes | None], str, T] | None


def transact(
    repo: Repo, decide: Callable[[Snapshot], Decision], *, attempts: int = 50, default: T | None = None
) -> T | None:
    """Read the repo, let `decide` choose the changes, commit them on top of what was read;
    on a conflict read again and decide again. `decide` must only depend on the snapshot."""
    for attempt in range(attempts):
        snap = repo.snapshot()
        decision = decide(snap)
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
