"""`rexrank submit`: validate predictions and file a PENDING request in a store."""
from __future__ import annotations

import argparse
import json

from rexrank.cli.flags import add_data_dir


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit predictions to a store's scoring queue",
        description="Validate predictions (as `rexrank score` does) and file a PENDING request in a store "
        "(a local folder or hf://ORG). Nothing is written if the predictions are invalid, identical to an "
        "earlier submission, or over the submitter's quota.",
    )
    p.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    p.add_argument("--dataset", required=True, help="test set: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example")
    p.add_argument("--track", default="findings", help="findings (default) or findings_impression")
    p.add_argument("--predictions", required=True, help="predictions file or datasets folder, or hf://USER/REPO[@REV]")
    p.add_argument("--id-column", help="the predictions file's study id column (default: id or study_id)")
    p.add_argument("--prediction-column", help="the predictions file's text column (default: prediction or report)")
    p.add_argument("--model-name", required=True)
    p.add_argument("--submitter", required=True, help="Hub user or org name (the quota counts per submitter)")
    p.add_argument("--institution", default="")
    p.add_argument("--model-url", default="")
    p.add_argument("--trained-on", default="", help="comma-separated test sets the model was trained on")
    add_data_dir(p, " (to check the ids before filing)")
    p.add_argument("--quota", help="N/DAYS submissions per submitter, test set and track, checked here as a courtesy "
                   "(the backend enforces its own; default $REXRANK_QUOTA or 1/7; 0 = none)")
    p.add_argument("--json", action="store_true", help='print {"id": ..., "status": ...} as JSON')
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.store import Quota, open_store
    from rexrank.store.names import display

    quota = Quota.parse(args.quota) if args.quota is not None else Quota.from_env()
    store = open_store(args.store, quota=quota)
    request = store.submit(
        test_set=args.dataset,
        track=args.track,
        predictions=args.predictions,
        model_name=args.model_name,
        submitter=args.submitter,
        institution=args.institution,
        model_url=args.model_url,
        trained_on=[t for t in args.trained_on.split(",") if t.strip()],
        data_dir=args.data_dir,
        id_column=args.id_column,
        prediction_column=args.prediction_column,
    )
    if args.json:
        print(json.dumps({"id": request["id"], "status": request["status"]}))
    else:
        preds = request["predictions"]
        print(display(f"submitted {request['id']}: {request['model_name']} on {request['test_set']}/{request['track']} "
                      f"({preds['n']} predictions, {preds['n_empty']} empty) — {request['status']}"))
        if not preds["ids_checked"]:
            print("note: the study ids of this private test set are checked by the backend when it scores")
        print(f"follow it with: rexrank status --store {store.name} {request['id']}")
    return 0
