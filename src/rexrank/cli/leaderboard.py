"""`rexrank leaderboard`: serve the leaderboard app on a store."""
from __future__ import annotations

import argparse

from rexrank.cli.flags import add_data_dir


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
    add_data_dir(p, " (the Submit tab checks a submission's ids against it)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import os

    from rexrank.errors import TestSetError
    from rexrank.leaderboard.app import build_app
    from rexrank.testsets.loading import DATA_DIR_ENV

    if args.data_dir:
        if not os.path.exists(args.data_dir):
            raise TestSetError(f"--data-dir {args.data_dir} does not exist")
        os.environ[DATA_DIR_ENV] = args.data_dir  # read where the Submit tab loads a test set
    from rexrank.leaderboard.source import LeaderboardSource, open_leaderboard_store

    store, note = open_leaderboard_store(args.store)
    if note:
        print(note)
    demo = build_app(LeaderboardSource.from_store(store))
    print(f"ReXrank leaderboard on store {store.name}: http://{args.host}:{args.port}/")
    from rexrank.input_limits import MAX_FILE_BYTES

    # Gradio refuses a larger upload before it reaches the Submit tab's handler
    demo.launch(server_name=args.host, server_port=args.port, show_error=True, max_file_size=MAX_FILE_BYTES)
    return 0
