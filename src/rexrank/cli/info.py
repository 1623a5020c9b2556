"""`rexrank list`: the test sets, tracks and metrics this installation knows."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("list", help="list test sets, tracks and metrics")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rexrank.metrics.registry import METRICS
    from rexrank.testsets.registry import TEST_SETS, TRACKS

    print("test sets:")
    for spec in TEST_SETS.values():
        n = spec.n_studies if spec.n_studies is not None else "?"
        print(f"  {spec.name:<14} {spec.title} — {n} studies, {spec.access}")
    print("tracks: " + ", ".join(TRACKS))
    print("metrics:")
    for name, (_, extra) in sorted(METRICS.items()):
        print(f"  {name:<14} (needs: {extra})")
    return 0
