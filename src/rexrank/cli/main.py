"""`rexrank` entry point. Each sub-command lives in its own module exposing
`register(subparsers)`; heavy imports happen inside the command, not here."""
from __future__ import annotations

import argparse
import importlib
import sys

from rexrank import __version__

# sub-command modules, in the order `rexrank --help` lists them
COMMAND_MODULES = [
    "rexrank.cli.score",
    "rexrank.cli.info",
    "rexrank.cli.submit",
    "rexrank.cli.backend",
    "rexrank.cli.backend_shard",
    "rexrank.cli.status",
    "rexrank.cli.requeue",
    "rexrank.cli.cancel",
    "rexrank.cli.review",
    "rexrank.cli.analyze",
    "rexrank.cli.export",
    "rexrank.cli.import_published",
    "rexrank.cli.leaderboard",
    "rexrank.cli.weights",
    "rexrank.cli.hub",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rexrank",
        description="ReXrank: score chest X-ray report generation on the ReXrank test sets.",
    )
    parser.add_argument("--version", action="version", version=f"rexrank {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from rexrank.errors import RexrankError
    from rexrank.models.huge_pages import prefer_huge_pages

    prefer_huge_pages()  # before any command creates a tensor
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    from rexrank.testsets.loading import data_dir_option

    try:
        with data_dir_option("--data-dir"):  # a folder a command is given is its --data-dir
            return args.run(args) or 0
    except RexrankError as exc:
        from rexrank.store.names import display  # a name quoted in a message cannot drive the terminal

        print(f"rexrank {args.command}: error: {display(exc, keep_newlines=True)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
