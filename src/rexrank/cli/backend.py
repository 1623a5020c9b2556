"""`rexrank backend`: the scoring worker (claims requests from a store, writes results)."""
from __future__ import annotations

import argparse
import sys

from rexrank.cli.flags import add_data_dir, add_progress_flag


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "backend",
        help="run the scoring worker on a store's queue",
        description="Claim the oldest PENDING request atomically, score it, write its result record, mark it "
        "FINISHED (or FAILED with a message for the submitter). Several workers may share a store.",
    )
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    add_data_dir(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="process the queue until it is empty, then exit")
    mode.add_argument("--poll", type=float, default=60.0, help="seconds between polls of an empty queue (default 60)")
    p.add_argument("--metrics", default=None,
                   help="comma-separated metric names this worker scores, every one required (default: "
                   "$REXRANK_METRICS, else the store's metric set; a store without one gets ReXrank's, recorded in it)")
    p.add_argument("--store-metrics", metavar="LIST", default=None,
                   help="record LIST as the store's metric set (what workers without --metrics score), then run")
    p.add_argument("--store-llm-metrics", metavar="LIST", default=None,
                   help="with --store-metrics: LLM-judged metrics of the set, scored where a worker has an LLM "
                   "configured for them (a worker without one says so in each result)")
    p.add_argument("--reindex", action="store_true",
                   help="rebuild the store's indexes from its records first (after the repos were edited by hand)")
    p.add_argument("--worker-id", help="name of this worker in the queue (default: host-pid-random)")
    p.add_argument("--lease-seconds", type=float, default=600.0, help="lease length; renewed every third of it (default 600)")
    p.add_argument("--max-attempts", type=int, default=3, help="FAIL a request interrupted this many times (default 3)")
    p.add_argument("--no-per-study", action="store_true", help="do not publish per-study scores of public test sets")
    p.add_argument("--min-coverage", type=float, default=None, metavar="PERCENT",
                   help="publish a metric only if it scored at least this share of the studies; below it the request "
                   "FAILS and nothing is published (default $REXRANK_MIN_COVERAGE or 99)")
    p.add_argument("--quota", help="N/DAYS submissions per submitter, test set and track, enforced here whatever the "
                   "submitting client did (default $REXRANK_QUOTA, else the store's config.json key \"quota\", else "
                   "1/7 on a Hub store and none on a local one; 0 = none)")
    p.add_argument("--log-file", help="also append the log here")
    add_progress_flag(p, default=False)
    p.add_argument("--device", help="torch device of every model metric: cpu, cuda, cuda:1 (default: cuda when available); fp32 everywhere")
    jobs = p.add_argument_group("dispatch (one request split into shards, each scored by a Job; the same settings "
                                "can be kept under \"dispatch\" in the store's config.json)")
    jobs.add_argument("--dispatch", choices=["hf-jobs", "local"], default=None,
                      help="run as a dispatcher: Hugging Face Jobs, or local processes (default: score here, "
                      "unless the store's config sets it)")
    jobs.add_argument("--flavor", help="Job hardware, one of the Hub's single-GPU or CPU flavours (huggingface_hub.JobHardware), "
                      "e.g. l4x1, a10g-large, l40sx1, a100-large, h200 (default a10g-large); several GPUs: more Jobs instead")
    jobs.add_argument("--llm-flavor", help="Job hardware when the metric set has LLM judges (default: --flavor)")
    jobs.add_argument("--max-jobs", type=int, help="Jobs running at once (default 4)")
    jobs.add_argument("--gpu-hours-ceiling", type=float, help="refuse a request estimated above this many GPU-hours, "
                      "and fail one whose Jobs use more")
    jobs.add_argument("--job-timeout", help="a Job's time limit: seconds or e.g. 6h (default 6h); shards are planned to "
                      "end within 80 %% of it, start-up included")
    jobs.add_argument("--target-wall", help="plan the Jobs that finish each request within this time, all at once: "
                      "seconds or e.g. 1h (refused if --max-jobs allows fewer)")
    jobs.add_argument("--job-startup", type=float, help="seconds from a Job's start to its first study (image, install, "
                      "model downloads; default: the planner's stated default per flavour)")
    jobs.add_argument("--shard-attempts", type=int, help="start a failed shard's Job again up to this many times (default 3)")
    jobs.add_argument("--dry-run", action="store_true",
                      help="print each PENDING request's plan (shards, flavour, estimated GPU-hours and cost) and exit")
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

    from rexrank.backend.worker import Worker, min_coverage_from
    from rexrank.metrics.options import check_device, device_options, merge_options, parse_metric_options
    from rexrank.store import Quota, open_store
    from rexrank.store.names import display

    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    for handler in handlers:  # names in the log cannot recolour or rewrite the terminal
        handler.addFilter(_visible_only(display))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", handlers=handlers)
    for chatty in ("httpx", "httpx2", "httpcore"):  # one INFO line per Hub request would bury the backend's own
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.device:  # before the store is opened or created
        check_device(args.device)
    quota = Quota.parse(args.quota, where="--quota") if args.quota is not None else None
    metrics = args.metrics or os.environ.get("REXRANK_METRICS") or None
    store = open_store(args.store, quota=quota)
    if args.reindex:
        from rexrank.store.layout import reindex

        reindex(store)
    if args.store_metrics or args.store_llm_metrics:
        from rexrank.store.config import checked_set, record_set

        record_set(store, checked_set(_names(args.store_metrics), _names(args.store_llm_metrics),
                                      origin="--store-metrics/--store-llm-metrics"))
    names = _all_metrics(store, metrics)
    metric_options = merge_options(device_options(names, args.device), parse_metric_options(args.metric_option, names))
    worker = Worker(
        store,
        data_dir=args.data_dir or os.environ.get("REXRANK_DATA_DIR") or None,
        metrics=metrics,
        metric_options=metric_options,
        worker_id=args.worker_id,
        lease_seconds=args.lease_seconds,
        max_attempts=args.max_attempts,
        publish_per_study=not args.no_per_study,
        progress=args.progress,
        min_coverage=min_coverage_from(args.min_coverage),
    )
    dispatcher = _dispatcher(args, store, worker)
    if dispatcher is not None:
        from rexrank.backend.dispatch import describe_plans

        if args.dry_run:
            print(describe_plans(dispatcher))
            return 0
        done = dispatcher.run(once=args.once)
    elif args.dry_run:
        from rexrank.errors import RexrankError

        raise RexrankError("--dry-run shows a dispatcher's plan: add --dispatch hf-jobs (or local), or set "
                           "\"dispatch\" in the store's config.json")
    else:
        done = worker.run(once=args.once, poll=args.poll)
    logging.getLogger("rexrank.backend").info("worker %s processed %d request(s)", worker.worker_id, done)
    return _failed_exit(store, worker.worker_id, args.store) if done else 0


def _failed_exit(store, worker_id: str, store_arg: str | None) -> int:
    """1 when a request this worker processed FAILED (each named, with what to do), else 0."""
    from rexrank.store import records as R

    failed = [r for r in store.list_requests(R.FAILED) if r.get("worker") == worker_id]
    if not failed:
        return 0
    where = f" --store {store_arg}" if store_arg else ""
    print(f"{len(failed)} request(s) FAILED: {', '.join(r['id'] for r in failed)} (`rexrank status{where} ID` says why). "
          "A metric without its weights: `rexrank weights download NAME`, or score with the metrics this machine has "
          f"(offline: `rexrank backend{where} --once --metrics bleu2`); then `rexrank requeue{where} ID`.", file=sys.stderr)
    return 1


def _dispatcher(args: argparse.Namespace, store, worker):
    """A Dispatcher when --dispatch or the store's config asks for one, else None."""
    from rexrank.backend.dispatch import dispatcher_for

    return dispatcher_for(worker, dry_run=args.dry_run, mode=args.dispatch, flavor=args.flavor, llm_flavor=args.llm_flavor,
                          max_jobs=args.max_jobs, gpu_hours_ceiling=args.gpu_hours_ceiling, job_timeout=args.job_timeout,
                          target_wall=args.target_wall, job_startup=args.job_startup,
                          shard_attempts=args.shard_attempts, poll=None if args.poll == 60.0 else args.poll)


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _all_metrics(store, metrics: str | None) -> list[str]:
    """The metrics --metric-option may name: this worker's list, else the store's set."""
    from rexrank.metrics.registry import parse_metric_list
    from rexrank.store.config import REXRANK_SET, recorded_set

    if metrics:
        return parse_metric_list(metrics)
    recorded = recorded_set(store)
    return list((recorded or REXRANK_SET).all)


def _visible_only(display):
    import logging

    class VisibleOnly(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            record.msg = display(record.getMessage(), keep_newlines=True)
            record.args = ()
            return True

    return VisibleOnly()
