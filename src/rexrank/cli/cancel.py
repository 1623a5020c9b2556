"""`rexrank cancel ID`: withdraw a PENDING or RUNNING request (maintainers)."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cancel",
        help="withdraw a PENDING or RUNNING request (maintainers)",
        description="Mark a PENDING or RUNNING request FAILED (cancelled): it counts against the submitter's quota "
        "(and, on a private test set, the privacy ledger) like a finished one and claims no model name. A worker scoring it publishes nothing (its publishing step "
        "fails once the request was cancelled); a request whose result is already being published cannot be "
        "cancelled.",
    )
    p.add_argument("id", help="request id")
    p.add_argument("--reason", default="", help="shown to the submitter")
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.backend.public_door import charge_cancelled
    from rexrank.store import open_store

    from rexrank.backend.dispatch import cancel_request_jobs

    store = open_store(args.store, create=False)
    request = store.cancel(args.id, reason=args.reason)
    charge_cancelled(store, request)
    print(f"{request['id']}: {request['status']} ({request['error']})")
    if request.get("dispatch"):  # its shard Jobs stop now, whether or not a dispatcher still holds it
        print(f"{cancel_request_jobs(store, request['id'])} running Job(s) cancelled")
    return 0
