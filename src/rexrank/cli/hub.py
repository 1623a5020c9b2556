"""`rexrank hub deploy`: publish the metric Spaces, the leaderboard and backend Spaces, the
requests/results repos and (on request) the public test sets to a Hub organisation."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    hub = subparsers.add_parser("hub", help="publish rexrank on the Hugging Face Hub",
                                description="Publish rexrank's pieces on the Hugging Face Hub.")
    sub = hub.add_subparsers(dest="hub_command", metavar="SUBCOMMAND")
    p = sub.add_parser(
        "deploy",
        help="create or update every Space and dataset repo of ORG",
        description="Create or update, with one commit per repo that changed: a Space per metric (ORG/<metric>), "
        "the leaderboard Space (ORG/leaderboard) and the private backend Space (ORG/backend), both configured "
        "for hf://ORG, the private requests and public results dataset repos, and with --only data the public "
        "test sets. The token is HF_TOKEN or the one saved by `hf auth login`; secrets are never written: the "
        "command prints which to set.",
    )
    p.add_argument("--org", required=True, help="Hub organisation (or user) to publish under")
    p.add_argument("--dry-run", action="store_true", help="print the plan (repos, files, sizes) and write nothing; "
                   "does not contact the Hub")
    p.add_argument("--only", action="append", metavar="GROUP",
                   help="metrics, leaderboard, backend or data (repeatable or comma-separated; default: all but data)")
    p.add_argument("--rexrank-from", choices=("wheel", "pypi"), default="wheel",
                   help="Spaces install rexrank from a wheel uploaded into each Space (default), or from PyPI "
                   "(rexrank==VERSION, once released)")
    p.add_argument("--wheel", default=None, help="the rexrank wheel to upload (default: built from the checkout)")
    p.add_argument("--data-dir", default=None, help="folder with the public test sets' JSON (--only data; default: "
                   "the pinned public download)")
    p.add_argument("--source", default=None, help="the rexrank checkout to publish (default: this one)")
    p.add_argument("--endpoint", default=None, help="Hub address (default: $HF_ENDPOINT or https://huggingface.co)")
    p.set_defaults(run=run_deploy)
    hub.set_defaults(run=lambda args: hub.print_help() or 2)


def run_deploy(args: argparse.Namespace) -> int:
    import os
    import tempfile
    from pathlib import Path

    from rexrank.hub import build_plan, deploy, format_plan
    from rexrank.hub.errors import DeployError
    from rexrank.hub.plan import check_org, parse_groups
    from rexrank.hub.source import find_source, source_version
    from rexrank.hub.wheel import build_wheel, wheel_version

    check_org(args.org)
    groups = parse_groups(args.only)
    source = find_source(args.source)
    endpoint = args.endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    version = source_version(source)
    with tempfile.TemporaryDirectory(prefix="rexrank-wheel-") as tmp:
        wheel = None
        if args.rexrank_from == "wheel":
            if args.wheel:
                wheel = Path(args.wheel)
                if wheel_version(wheel) != version:
                    raise DeployError(f"--wheel {wheel.name} is rexrank {wheel_version(wheel)}, the checkout is {version}")
            else:
                print(f"building the rexrank {version} wheel from {source} ...")
                wheel = build_wheel(source, Path(tmp))
        elif args.wheel:
            raise DeployError("--wheel goes with --rexrank-from wheel")
        plan = build_plan(args.org, source=source, version=version, wheel=wheel, groups=groups,
                          endpoint=endpoint, data_dir=args.data_dir)
        if args.dry_run:
            print(format_plan(plan))
            print("\ndry run: nothing was written (the Hub was not contacted; a real run uploads only files that differ)")
            return 0
        from huggingface_hub import HfApi

        deploy(plan, HfApi(endpoint=endpoint, token=os.environ.get("HF_TOKEN") or None))
    return 0
