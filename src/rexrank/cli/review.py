"""`rexrank review`: the maintainers' review of requests held because another account filed
their predictions first (rexrank.store.copies, rexrank.store.review): list them with what
they match, release one for scoring or reject it."""
from __future__ import annotations

import argparse
import json

from rexrank.store import records as R


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "review",
        help="list requests held for review (copies of another account's predictions); release or reject one (maintainers)",
        description="A filing whose predictions match (after normalising whitespace, or on 99 %% of the studies) "
        "predictions another account had on the Hub first is HELD: no worker scores it until the maintainers decide. "
        "Without --release or --reject: list the held requests, each with the filings it matches, and the scored "
        "requests an original filed later matched. --release ID: the request is no copy (HELD -> PENDING; a listed "
        "scored one keeps its result). --reject ID: it is one (FAILED, kind rejected; it counts against the "
        "submitter's quota; a listed scored one's result is withdrawn). The filer never learns who else filed.",
    )
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--release", metavar="ID", help="release a held request for scoring")
    action.add_argument("--reject", metavar="ID", help="reject a held request (or withdraw a listed scored copy)")
    p.add_argument("--reason", default="", help="with --reject: shown to the submitter")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.errors import RexrankError
    from rexrank.store import open_store
    from rexrank.store.names import display

    if args.reason and not args.reject:
        raise RexrankError("--reason goes with --reject ID")
    store = open_store(args.store, create=False)
    if args.release or args.reject:
        request = (store.release_held(args.release) if args.release
                   else store.reject_held(args.reject, reason=args.reason))
        print(display(f"{request['id']}: {request['status']}"))
        if args.reject and request.get("dispatch"):  # held while dispatched: its shard Jobs stop now
            from rexrank.backend.dispatch import cancel_request_jobs

            print(f"{cancel_request_jobs(store, request['id'])} running Job(s) cancelled")
        return 0
    held = store.held_requests()
    flagged = store.published_copies()
    listing = {"held": [_entry(store, r, [m for m in (r.get("review") or {}).get("matches", [])]) for r in held],
               "published": [_entry(store, store.get_request(rid), [{**info, "request_id": info.get("original")}])
                             for rid, info in sorted(flagged.items())]}
    if args.json:
        print(json.dumps(listing, indent=2))
        return 0
    if not held and not flagged:
        print(f"nothing to review in {store.name}")
        return 0
    for title, entries in (("held for review", listing["held"]),
                           ("scored, then matched by an original filed later", listing["published"])):
        if not entries:
            continue
        print(f"{title} ({len(entries)}):")
        for entry in entries:
            print(display(f"  {entry['id']}  {entry['status']}  {entry['model']}  on {entry['on']}  filed "
                          f"{entry['submitted_time']} by {entry['submitter']}"))
            for match in entry["matches"]:
                print(display(f"      {match['share']:.1%} of studies the same as {match['id']}  {match['status']}  "
                              f"{match['model']}  by {match['submitter']}; theirs reached the Hub {match['arrived']}, "
                              f"this one {entry['arrived']}"))
    print("release one for scoring: rexrank review --release ID; reject it: rexrank review --reject ID [--reason TEXT]")
    return 0


def _entry(store, request: dict, matches: list[dict]) -> dict:
    """A request as the list shows it, with the filings it matches (their own records)."""
    from rexrank.store.copies import CopyIndex
    from rexrank.store.names import model_title
    from rexrank.store.repo import StoreError

    index = CopyIndex(store.requests, store.requests.snapshot())

    def described(req: dict) -> dict:
        filing = index.filing(req["id"])
        arrived = f"{R.iso(filing.content_time)} ({filing.content_from})" if filing else "unknown"
        return {"id": req["id"], "status": req["status"],
                "model": model_title(req.get("namespace") or "", req["model_name"]),
                "on": f"{req['test_set']}/{req['track']}", "submitted_time": req["submitted_time"],
                "submitter": req["submitter"], "arrived": arrived}

    out = described(request)
    out["matches"] = []
    for match in matches:
        try:
            other = described(store.get_request(match["request_id"]))
        except StoreError:  # removed from the store by hand
            other = {"id": match["request_id"], "status": "gone", "model": "?", "submitter": "?",
                     "arrived": match.get("content_time", "?")}
        out["matches"].append({**other, "share": float(match.get("share", 0))})
    return out
