"""Options that several commands share, spelled the same everywhere."""
from __future__ import annotations

import argparse


def add_progress_flag(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """`--progress` / `--no-progress` on every command: interactive commands show bars by
    default, the backend (a server writing a log) does not."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=default,
                        help=f"show progress bars (default: {'on' if default else 'off'})")


DATA_DIR_HELP = (
    "a folder holding test sets (one sub-folder per test set, named as `rexrank list` names them, or as in "
    "the ReXrank repository's data/) or one test set's folder or JSON file; default $REXRANK_DATA_DIR. "
    "Needed for MIMIC-CXR, CheXpert Plus and ReXGradient; IU-Xray and the example are found without it"
)


def add_data_dir(parser: argparse.ArgumentParser, extra: str = "") -> None:
    parser.add_argument("--data-dir", help=DATA_DIR_HELP + extra)


def say_test_set_file(dataset: str, data_dir, *, file=None) -> None:
    """Which file of the test set a command reads, and why that one ("remembered: ..."):
    a folder given once is reused without --data-dir, so the output names it."""
    from rexrank.testsets.loading import locate, mark_told
    from rexrank.testsets.registry import get_spec

    spec = get_spec(dataset)
    located = locate(spec, data_dir, tell=False)
    mark_told(located)  # named here: the scoring's own look-up does not name it again
    print(f"test set: {spec.title}, {located.describe()}", file=file, flush=True)
