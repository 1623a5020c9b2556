"""`rexrank import-published`: load the published ReXrank tables into a store."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "import-published",
        help="import the published ReXrank leaderboard CSVs into a store",
        description="Convert the published ReXrank tables (gh-pages results/*.csv: findings_result_*.csv = "
        "findings track, result_*.csv = findings + impression) into result records marked \"published\" "
        "(no per-study data, no CIs) and add them to a store. Records with the same id are replaced.",
    )
    p.add_argument("directory", metavar="DIR", help="folder holding the published CSVs")
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.leaderboard.published import read_published_dir
    from rexrank.store import open_store

    records, others = read_published_dir(args.directory)
    for path in others:
        print(f"skipped {path.name}: not one of the published ReXrank tables")
    store = open_store(args.store)
    store.add_results(records)  # one commit for all of them (one Hub commit, not one per record)
    tables = len({(r["test_set"], r["track"]) for r in records})
    print(f"imported {len(records)} published results ({tables} tables) into {store.name}")
    return 0
