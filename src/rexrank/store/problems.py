"""A record the store could not read: kept out of the views and listed (quarantine)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """A quarantined record: which repo ("requests" or "results"), its path there, why."""

    repo: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.repo}/{self.path}: {self.reason}"
