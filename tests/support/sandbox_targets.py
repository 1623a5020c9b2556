"""Functions that tests/test_untrusted_files.py runs in rexrank.sandbox's children, each doing
what a hostile file could make a reader do (the child imports this module by name)."""
from __future__ import annotations

import os
import signal
import time


def echo(*values: str) -> list[tuple[str, ...]]:
    return [tuple(values)]


def allocate(n_bytes: int) -> list[tuple[str, ...]]:
    block = bytearray(n_bytes)  # (zero-filled: every page is touched)
    return [(str(len(block)),)]


def spin() -> list:
    while True:
        pass


def wait_forever() -> list:
    while True:
        time.sleep(3600)


def die_by(signal_name: str) -> list:
    os.kill(os.getpid(), getattr(signal, signal_name))
    return []


def many_rows(n_rows: int, width: int) -> list[tuple[str, ...]]:
    return [("x" * width,)] * n_rows


def not_strings() -> list:
    return [("a", 1)]


def where_am_i() -> list[tuple[str, ...]]:
    return [(os.getcwd(), str(os.getppid()))]


def loaded(module: str) -> list[tuple[str, ...]]:
    import sys

    return [(str(module in sys.modules),)]


def environment(*names: str) -> list[tuple[str, str]]:
    """What a hostile file's parser could read of its environment: each variable, "<unset>" if absent."""
    return [(name, os.environ.get(name, "<unset>")) for name in names]
