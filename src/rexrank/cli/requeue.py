"""`rexrank requeue ID`: put a FAILED (or stuck RUNNING) request back in the queue (maintainers)."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "requeue",
        help="put a FAILED or stuck RUNNING request back to PENDING (maintainers)",
        description="Put a FAILED request (e.g. one that missed the coverage rule during an LLM outage) or a RUNNING "
        "one whose worker is stuck back to PENDING, attempts reset. LLM answers already received are cached, so "
        "only the missing ones are asked again.",
    )
    p.add_argument("id", help="request id")
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.store import open_store

    request = open_store(args.store, create=False).requeue(args.id)
    print(f"{request['id']}: {request['status']}")
    return 0
