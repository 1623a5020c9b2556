"""`rexrank status`: one request's status and results, or the queue."""
from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "status",
        help="show a submission's status, or the queue",
        description="Show one request (status, error, leaderboard values) or list the store's queue. "
        "--leaderboard ORG/SPACE (or its URL) asks the leaderboard Space: one request's public fields.",
    )
    p.add_argument("id", nargs="?", help="request id (omit to list the queue; required with --leaderboard)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--leaderboard", help="the leaderboard Space (ORG/SPACE or its URL) the request was filed with")
    where.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.add_argument("--json", action="store_true", help='print {"id", "status", "error", "results"} (a list without ID)')
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.leaderboard:
        return _via_leaderboard(args)
    from rexrank.store import open_store
    from rexrank.store.names import display
    from rexrank.store.records import status_view

    store = open_store(args.store, create=False)
    if args.id:
        request = store.get_request(args.id)
        result = (store.get_result(request["result_id"], test_set=request["test_set"], track=request["track"])
                  if request.get("result_id") else None)
        view = status_view(request, result)
        dispatch = request.get("dispatch")  # the organisers' store only: never on the public pages
        if args.json:
            print(json.dumps({**view, **({"dispatch": dispatch} if dispatch else {})}))
            return 0
        print(display(f"{request['id']}: {request['status']} — {request['model_name']} on {request['test_set']}/{request['track']}, "
                      f"submitted {request['submitted_time']} by {request['submitter']}"))
        if view["error"]:
            print(f"error: {display(view['error'])}")
        for note in request.get("notes") or []:  # e.g. a metric of the store's set this backend could not run
            print(f"note: {display(note)}")
        _print_results(view["results"])
        if dispatch:
            from rexrank.backend.dispatch import describe_jobs

            print(describe_jobs(dispatch))
        return 0
    requests = store.list_requests()
    problems = store.problems()
    if args.json:
        print(json.dumps([status_view(r) | {"model_name": r["model_name"], "test_set": r["test_set"], "track": r["track"],
                                             "submitted_time": r["submitted_time"]} for r in requests]))
        return 0
    if not requests:
        print(f"the queue of {store.name} is empty")
    else:
        header = ("id", "status", "model", "test set/track", "submitted", "submitter")
        rows = [header] + [tuple(display(c) for c in (r["id"], r["status"], r["model_name"], f"{r['test_set']}/{r['track']}",
                                                      r["submitted_time"], r["submitter"])) for r in requests]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if problems:  # never blocks the listing: each bad file is named once, with why
        print(f"\n{len(problems)} unreadable record(s) skipped:")
        for problem in problems:
            print(f"  {display(problem)}")
    return 0


def _via_leaderboard(args: argparse.Namespace) -> int:
    from rexrank.errors import SubmissionError
    from rexrank.leaderboard.client import status
    from rexrank.store.names import display

    if not args.id:
        raise SubmissionError("--leaderboard needs a request id (the one `rexrank submit` printed)")
    answer = status(args.id, leaderboard=args.leaderboard)
    request = answer["request"]
    if args.json:
        print(json.dumps({"id": request["id"], "status": request["status"], "error": request["error"],
                          "results": answer["results"], "request": request}))
        return 0
    print(display(f"{request['id']}: {request['status']} — {request['model_name']} on {request['test_set']}/"
                  f"{request['track']}, submitted {request['submitted_time']} by {request['submitter']}"))
    revision = (request.get("predictions") or {}).get("revision")
    if revision:
        print(f"predictions: the dataset's commit {revision}")
    if request["error"]:
        print(f"error: {display(request['error'])}")
    for note in answer.get("notes") or []:
        print(f"note: {display(note)}")
    _print_results(answer["results"])
    return 0


def _print_results(results: dict | None) -> None:
    from rexrank.store.names import display

    for key, v in (results or {}).items():
        ci = f" ± {v['ci95']:.4f}" if v.get("ci95") is not None else ""
        mean = "n/a" if v.get("mean") is None else f"{v['mean']:.4f}"
        n = f"  (n={v['n']})" if v.get("n") is not None else ""  # a private set's counts are not published
        print(f"  {display(key):<18} {mean}{ci}{n}")
