"""`rexrank export eval-results`: a model's ReXrank results as the Hub's Eval Results files
(`.eval_results/*.yaml`), ready to add to its model repo (rexrank.hub.eval_results)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


DEFAULT_ORG = "rexrank"  # where ReXrank's own benchmark datasets and leaderboard live


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="export results for other tools (the Hub's Eval Results files)",
        description="Export ReXrank results in other tools' formats.",
    )
    sub = p.add_subparsers(dest="export_command", metavar="FORMAT", required=True)
    e = sub.add_parser(
        "eval-results",
        help="write a model's results as .eval_results/*.yaml for its Hub model repo",
        description="Write one result (RESULT_ID) or every result of a model (--model NAME) as the Hub's Eval "
        "Results files, OUT/.eval_results/rexrank_<test set>_<track>.yaml, one entry per leaderboard column. "
        "Add them to the model repo (e.g. `hf upload MODEL_REPO OUT/.eval_results .eval_results --create-pr`): "
        "the scores then show on the model page and on the test set's benchmark leaderboard "
        "(ORG/<test set>, published by `rexrank hub deploy --only data`). Only public test sets have a "
        "benchmark dataset; results on the others are named and skipped.",
    )
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument("result_id", nargs="?", metavar="RESULT_ID", help="a result id (as `rexrank status` shows it)")
    which.add_argument("--model", default=None, metavar="NAME", help="every result of this model, named as the "
                       "board names it (NAMESPACE / NAME; a bare NAME when one namespace has it; compared ignoring "
                       "case, width, invisible characters and lookalike letters)")
    e.add_argument("--store", default=None, help="store folder or hf://ORG (default: $REXRANK_STORE or ./rexrank-store)")
    e.add_argument("--org", default=None, help="Hub organisation of the benchmark datasets and the leaderboard "
                   f"(default: ORG of an hf://ORG store, else the store's config \"org\", else {DEFAULT_ORG})")
    e.add_argument("--out", default=".", help="folder to write .eval_results/ into (default: the current folder)")
    e.add_argument("--endpoint", default="https://huggingface.co", help="Hub address in the source links")
    p.set_defaults(run=run)


def chosen_records(store, result_id: str | None, model: str | None) -> list[dict]:
    from rexrank.hub.eval_results import ExportError, exportable
    from rexrank.store.names import display

    if result_id:
        record = store.get_result(result_id)
        if record is None:
            raise ExportError(f"no result {result_id!r} in {store.name} (`rexrank status` lists the requests and their result ids)")
        return [record]
    records = board_model(store.list_results(), model, store.name)
    kept = []
    for r in records:
        why = exportable(r)
        if why is None:
            kept.append(r)
        else:
            print(f"skipped {r['id']} ({r['test_set']}/{r['track']}): {why}", file=sys.stderr)
    by_place: dict[tuple[str, str], list[str]] = {}
    for r in kept:
        by_place.setdefault((r["test_set"], r["track"]), []).append(r["id"])
    clashes = {place: ids for place, ids in by_place.items() if len(ids) > 1}
    if clashes:
        (test_set, track), ids = next(iter(clashes.items()))
        raise ExportError(f"model {display(model)!r} has {len(ids)} results on {test_set}/{track} ({', '.join(ids)}): "
                          "the Hub would show them all; export the one you mean by RESULT_ID")
    if not kept:
        raise ExportError(f"model {display(model)!r} has no result on a test set published on the Hub")
    return kept


def board_model(records: list[dict], model: str, where: str) -> list[dict]:
    """The results of `model` as the board names it ("namespace / name"); a bare name when
    its results are of one namespace (else an error listing the titles to choose from)."""
    from rexrank.hub.eval_results import ExportError
    from rexrank.leaderboard.records import board_title
    from rexrank.store.names import display, same_name

    titled = [r for r in records if same_name(board_title(r), model)]
    if titled:
        return titled
    bare = [r for r in records if same_name(str(r.get("model_name", "")), model)]
    if not bare:
        raise ExportError(f"no result of a model named {display(model)!r} in {where}")
    titles = sorted({board_title(r) for r in bare}, key=str.casefold)
    if len(titles) > 1:
        raise ExportError(f"{display(model)!r} is a model of {len(titles)} namespaces: name the one you mean as the "
                          f"board does ({', '.join(repr(t) for t in titles)})")
    return bare


def run(args: argparse.Namespace) -> int:
    from rexrank.hub.eval_results import eval_results_file
    from rexrank.hub.plan import check_org
    from rexrank.store import open_store

    from rexrank.store.config import read_config

    store_spec = args.store or os.environ.get("REXRANK_STORE")
    store = open_store(args.store, create=False)
    org, whence = args.org, "as --org says"
    if org is None and store_spec and str(store_spec).startswith("hf://"):
        org, whence = str(store_spec).removeprefix("hf://").strip("/"), "the organisation of the store hf://ORG"
    if org is None and read_config(store).get("org"):
        org, whence = str(read_config(store)["org"]), "as the store's config says"
    if org is None:
        org, whence = DEFAULT_ORG, "the default; --org ORG names another"
    check_org(org)
    print(f"The scores are filed under the benchmark datasets of the Hub organisation {org} ({whence}).")
    files = [eval_results_file(r, org=org, endpoint=args.endpoint) for r in chosen_records(store, args.result_id, args.model)]
    out = Path(args.out)
    for f in files:
        target = out / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f.text())
        print(f"wrote {target} ({len(f.entries)} scores)")
        for name, why in f.left_out.items():
            print(f"  left out {name}: {why}")
    return 0
