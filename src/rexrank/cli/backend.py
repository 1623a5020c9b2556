"""`rexrank backend`: the scoring worker (claims requests from a store, writes results)."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "backend",
        help="run the scoring worker on a store's queue",
        description="Claim the oldest PENDING request atomically, score it, write its result record, mark it "
        "FINISHED (or FAILED with a message for the submitter). Several workers may share a store.",
    )
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.add_argument("--data-dir", help="private folder with the test sets' JSON (one sub-folder per test set, or the files themselves)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="process the queue until it is empty, then exit")
    mode.add_argument("--poll", type=float, default=60.0, help="seconds between polls of an empty queue (default 60)")
    p.add_argument("--metrics", default=None, help="comma-separated metric names (default: $REXRANK_METRICS or bleu2)")
    p.add_argument("--worker-id", help="name of this worker in the queue (default: host-pid-random)")
    p.add_argument("--lease-seconds", type=float, default=600.0, help="lease length; renewed every third of it (default 600)")
    p.add_argument("--max-attempts", type=int, default=3, help="FAIL a request interrupted this many times (default 3)")
    p.add_argument("--no-per-study", action="store_true", help="do not publish per-study scores of public test sets")
    p.add_argument("--log-file", help="also append the log here")
    p.add_argument("--progress", action="store_true", help="show progress bars")
    p.add_argument("--device", help="torch device of every model metric: cpu, cuda, cuda:1 (default: cuda when available); fp32 everywhere")
    p.add_argument(
        "--metric-option",
        action="append",
        metavar="METRIC.KEY=VALUE",
        help="an option for one metric, repeatable; e.g. sembscore.checkpoint_path=/data/chexbert.pth",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import os

    from rexrank.backend.worker import Worker
    from rexrank.metrics.options import device_options, merge_options, parse_metric_options
    from rexrank.metrics.registry import parse_metric_list
    from rexrank.store import open_store

    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", handlers=handlers)
    metrics = args.metrics or os.environ.get("REXRANK_METRICS") or None
    names = parse_metric_list(metrics)
    metric_options = merge_options(device_options(names, args.device), parse_metric_options(args.metric_option, names))
    worker = Worker(
        open_store(args.store),
        data_dir=args.data_dir or os.environ.get("REXRANK_DATA_DIR") or None,
        metrics=metrics,
        metric_options=metric_options,
        worker_id=args.worker_id,
        lease_seconds=args.lease_seconds,
        max_attempts=args.max_attempts,
        publish_per_study=not args.no_per_study,
        progress=args.progress,
    )
    done = worker.run(once=args.once, poll=args.poll)
    logging.getLogger("rexrank.backend").info("worker %s processed %d request(s)", worker.worker_id, done)
    return 0
