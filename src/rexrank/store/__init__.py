"""Storage of submissions (requests queue) and results: a local folder or Hub datasets.

    from rexrank.store import open_store
    store = open_store("./rexrank-store")          # or "hf://ORG" -> ORG/requests, ORG/results
    store.list_results()                           # result records (rexrank.results_schema)
    store.results_feed().refresh()                 # only what changed since the last look
    store.add_result(record)                       # atomic write of one record
    store.list_requests()                          # request records, oldest first
    store.queue_view()                             # open requests and the latest settled ones
    store.submit(test_set=..., track=..., predictions=..., model_name=..., submitter=...)
    store.held_requests()                          # copies held for the maintainers' review

Who is who: the Hub account's immutable id, names for display (rexrank.store.accounts);
copies of another account's predictions are held for review (rexrank.store.copies,
rexrank.store.review).

Every write is an optimistic-concurrency commit (see rexrank.store.repo). The layout of
the two repos, and the indexes that keep every worker and leaderboard operation
independent of the history's size, are described in rexrank.store.records.
"""
from __future__ import annotations

import os
from pathlib import Path

from rexrank.store.policy import Quota
from rexrank.store.records import FAILED, FINISHED, PENDING, RUNNING, STATUSES
from rexrank.store.repo import ConflictError, StoreError
from rexrank.store.store import Problem, Store

DEFAULT_STORE = "./rexrank-store"

__all__ = [
    "open_store", "Store", "Problem", "Quota", "StoreError", "ConflictError", "DEFAULT_STORE",
    "PENDING", "RUNNING", "FINISHED", "FAILED", "STATUSES",
]


def open_store(
    spec: str | Path | None = None,
    *,
    quota: Quota | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    create: bool = True,
) -> Store:
    """A local folder (default ./rexrank-store; `requests/` and `results/` inside) or
    "hf://ORG" (Hub dataset repos ORG/requests and ORG/results, created private if absent
    when `create`). `token` defaults to HF_TOKEN, `endpoint` to HF_ENDPOINT."""
    spec = str(spec if spec is not None else os.environ.get("REXRANK_STORE", DEFAULT_STORE))
    if spec.startswith("hf://"):
        from rexrank.store.hub import HubRepo

        org = spec.removeprefix("hf://").strip("/")
        if not org or "/" in org:
            raise StoreError(f"store {spec!r}: expected hf://ORG (repos ORG/requests and ORG/results)")
        return Store(
            HubRepo(f"{org}/requests", token=token, endpoint=endpoint, create=create),
            HubRepo(f"{org}/results", token=token, endpoint=endpoint, create=create),
            name=spec,
            quota=quota,
        )
    from rexrank.store.local import LocalRepo

    root = Path(spec)
    if root.exists() and not root.is_dir():
        raise StoreError(f"store {spec!r} is a file; expected a folder or hf://ORG")
    return Store(LocalRepo(root / "requests", create=create), LocalRepo(root / "results", create=create),
                 name=str(root), quota=quota)
