"""`rexrank leaderboard`: serve the leaderboard app on a store."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="serve the leaderboard (Gradio) on a store",
        description="Serve the ReXrank leaderboard on a store. The default store (./rexrank-store) is "
        "seeded with the published ReXrank results when it is empty.",
    )
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 to share)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.source import LeaderboardSource, open_leaderboard_store

    store, note = open_leaderboard_store(args.store)
    if note:
        print(note)
    demo = build_app(LeaderboardSource.from_store(store))
    print(f"ReXrank leaderboard on store {store.name}: http://{args.host}:{args.port}/")
    demo.launch(server_name=args.host, server_port=args.port, show_error=True)
    return 0
