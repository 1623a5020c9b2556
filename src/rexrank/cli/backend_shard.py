"""`rexrank backend-shard`: score one shard of a dispatched request (what each Job runs)."""
from __future__ import annotations

import argparse

from rexrank.cli.flags import add_data_dir


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "backend-shard",
        help="score one shard of a dispatched request (run by the dispatcher's Jobs)",
        description="Read the request and its shard plan from the store, score the shard's studies and write its "
        "per-study file to the store's scratch area (keyed by request, shard and attempt). The store token comes "
        "from HF_TOKEN (a Job secret), never from the command line.",
    )
    p.add_argument("--store", required=True, help="store folder or hf://ORG")
    p.add_argument("--request", required=True, help="request id")
    p.add_argument("--shard", type=int, required=True, help="shard index (0-based)")
    p.add_argument("--attempt", type=int, required=True, help="this shard's attempt number (1-based)")
    add_data_dir(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import os

    from rexrank.backend.shard_job import run_shard
    from rexrank.store import Quota, open_store

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for chatty in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    store = open_store(args.store, quota=Quota(0), create=False)
    return run_shard(store, args.request, args.shard, args.attempt,
                     data_dir=args.data_dir or os.environ.get("REXRANK_DATA_DIR") or None)
