"""`rexrank submit`: file predictions with a leaderboard Space (`--leaderboard`, the public
route), or write a PENDING request straight into a store (`--store`, the organisers' route)."""
from __future__ import annotations

import argparse
import json
import sys

from rexrank.cli.flags import add_data_dir, add_progress_flag, say_test_set_file


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit predictions to a leaderboard (or a store's scoring queue)",
        description="File predictions for scoring. Public route: --leaderboard ORG/SPACE (or its URL) files them "
        "through the leaderboard Space's API as the Hub account of your token (HF_TOKEN or `hf auth login`); "
        "--predictions hf://USER/REPO[@REV] is a predictions dataset you pushed (read at the commit it points to "
        "now), a local file is uploaded. Organisers' route: --store (a local folder or hf://ORG) validates and "
        "writes the request directly, as --submitter. The board shows the model as NAMESPACE / MODEL-NAME "
        "(--namespace: your account, the default, or one of your organisations). Nothing is filed if the predictions "
        "are invalid, identical to an earlier submission of the model, or over the submitter's quota; predictions "
        "another account filed first are held for the maintainers' review.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--leaderboard", help="the leaderboard Space, ORG/SPACE or its URL (the public route)")
    where.add_argument("--store", default=None, help="organisers: store folder or hf://ORG, written directly "
                       "(default: $REXRANK_STORE or ./rexrank-store)")
    p.add_argument("--dataset", required=True, help="test set: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example")
    p.add_argument("--track", default="findings", help="findings (default) or findings_impression")
    p.add_argument("--predictions", required=True, help="hf://USER/REPO[@REV] (a predictions dataset on the Hub), "
                   "a predictions file, or (with --store) a datasets folder")
    p.add_argument("--id-column", help="--store: the predictions file's study id column (default: id or study_id)")
    p.add_argument("--prediction-column", help="--store: the predictions file's text column (default: prediction or report)")
    p.add_argument("--model-name", required=True)
    p.add_argument("--submitter", help="--store (required): Hub user or org name, the quota counts per submitter; "
                   "--leaderboard: used only by a leaderboard on a local store (on the Hub: your token's account)")
    p.add_argument("--namespace", default="", help="file the model under this account: yours (the default) or one of "
                   "your organisations; the board shows NAMESPACE / MODEL-NAME")
    p.add_argument("--model-repo", default="", help="--leaderboard: a Hub model repo of yours or your organisation's "
                   "(NAMESPACE/NAME) that the result's row links to (checked with the Hub)")
    p.add_argument("--institution", default="")
    p.add_argument("--model-url", default="")
    p.add_argument("--trained-on", default="", help="comma-separated test sets the model was trained on")
    add_data_dir(p, " (--store: to check the ids before filing)")
    add_progress_flag(p, default=True)
    p.add_argument("--quota", help="--store: N/DAYS submissions per submitter, test set and track, checked here as a "
                   "courtesy (the backend enforces its own; default $REXRANK_QUOTA, else the store's config.json key "
                   "\"quota\", else 1/7 on a Hub store and none on a local one; 0 = none)")
    p.add_argument("--json", action="store_true", help='print {"id": ..., "status": ...} as JSON (--leaderboard: '
                   "the request's public fields)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.leaderboard:
        return _via_leaderboard(args)
    from rexrank.errors import SubmissionError
    from rexrank.store import Quota, open_store
    from rexrank.store.names import display, model_title
    from tqdm.auto import tqdm

    from rexrank.testsets.loading import track_studies
    from rexrank.testsets.registry import get_spec

    if not args.submitter:
        raise SubmissionError("--store needs --submitter (the organisers' route); to submit as yourself, use "
                              "--leaderboard ORG/SPACE")
    if args.model_repo:
        raise SubmissionError("--model-repo: only with --leaderboard (the Space checks with the Hub that the repo is "
                              "yours)")
    quota = Quota.parse(args.quota, where="--quota") if args.quota is not None else None
    store = open_store(args.store, quota=quota)
    checks_ids = not get_spec(args.dataset).private  # a private set's ids are the backend's to check
    if checks_ids:
        say_test_set_file(args.dataset, args.data_dir, file=sys.stderr if args.json else None)  # --json: stdout is JSON
    # the validation's slow steps, shown as they run: the test set (read once per process, so
    # the store's check then finds it loaded), then the predictions, checked and filed
    steps = ["reading the test set", "checking and filing the predictions"][0 if checks_ids else 1:]
    with tqdm(total=len(steps), desc="submit", unit="step", disable=not args.progress) as bar:
        if checks_ids:
            bar.set_postfix_str(steps[0], refresh=True)
            track_studies(args.dataset, args.track, data_dir=args.data_dir)
            bar.update(1)
        bar.set_postfix_str(steps[-1], refresh=True)
        request = store.submit(
            test_set=args.dataset,
            track=args.track,
            predictions=args.predictions,
            model_name=args.model_name,
            submitter=args.submitter,
            namespace=args.namespace,
            institution=args.institution,
            model_url=args.model_url,
            trained_on=[t for t in args.trained_on.split(",") if t.strip()],
            data_dir=args.data_dir,
            id_column=args.id_column,
            prediction_column=args.prediction_column,
        )
        bar.update(1)
    title = model_title(request.get("namespace") or "", request["model_name"])
    if args.json:
        print(json.dumps({"id": request["id"], "status": request["status"]}))
    else:
        preds = request["predictions"]
        print(display(f"submitted {request['id']}: {title} on {request['test_set']}/{request['track']} "
                      f"({preds['n']} predictions, {preds['n_empty']} empty) — {request['status']}"))
        if request["status"] == "HELD":
            print(display(request.get("error") or ""))
        if not preds["ids_checked"]:
            print("note: the study ids of this private test set are checked by the backend when it scores")
        print(f"follow it with: rexrank status --store {store.name} {request['id']}")
        # the board on this model, once the backend has scored it (`rexrank leaderboard`'s address)
        print(display(f"see it, once scored: rexrank leaderboard --store {store.name}, then open "
                      f"http://127.0.0.1:7860/{board_link(request)}"))
    return 0


def _via_leaderboard(args: argparse.Namespace) -> int:
    from rexrank.errors import SubmissionError
    from rexrank.leaderboard.client import submit
    from rexrank.store.names import display, model_title

    local_only = [flag for flag, value in (("--id-column", args.id_column), ("--prediction-column", args.prediction_column),
                                           ("--data-dir", args.data_dir), ("--quota", args.quota)) if value]
    if local_only:
        raise SubmissionError(f"{', '.join(local_only)}: only with --store; with --leaderboard the Space checks the "
                              "predictions (name the columns id and prediction)")
    request = submit(
        leaderboard=args.leaderboard, predictions=args.predictions, dataset=args.dataset, track=args.track,
        model_name=args.model_name, institution=args.institution, model_url=args.model_url,
        trained_on=args.trained_on, submitter=args.submitter or "", namespace=args.namespace,
        model_repo=args.model_repo,
    )
    if args.json:
        print(json.dumps(request))
        return 0
    preds = request.get("predictions") or {}
    title = model_title(request.get("namespace") or "", request["model_name"])
    print(display(f"submitted {request['id']}: {title} on {request['test_set']}/{request['track']} "
                  f"as {request['submitter']} ({preds.get('n')} predictions, {preds.get('n_empty')} empty) — "
                  f"{request['status']}"))
    if request["status"] == "HELD":
        print(display(request.get("error") or ""))
    if preds.get("repo"):
        print(display(f"read from {preds['repo']} at commit {preds['revision']}: later pushes change nothing"))
    print(f"follow it with: rexrank status {request['id']} --leaderboard {args.leaderboard}")
    print(display(f"see it, once scored: {board_link(request, args.leaderboard)}"))
    return 0


def board_link(request: dict, page: str = "") -> str:
    """Where the filed model will be: its row in its test set's table, ranked by a metric its
    result has (its Model page for a test set without a table)."""
    from rexrank.leaderboard.model_page import model_link
    from rexrank.store.names import model_title

    title = model_title(request.get("namespace") or "", request["model_name"])  # as the board names it
    return model_link(title, page, test_set=request.get("test_set"), track=request.get("track") or "findings")
