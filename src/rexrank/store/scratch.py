"""Temporary folders that a killed process cannot leave behind for good.

Each `ScratchDir` lives under <tmp>/rexrank-scratch/ and holds an exclusive `flock` on its
own `.owner` file for as long as its process lives (the kernel releases it when the
process dies, even on SIGKILL). `remove_stale()`, run when a worker starts, deletes every
folder whose lock can be taken: its owner is gone.
"""
from __future__ import annotations

import fcntl
import logging
import shutil
import tempfile
import time
import weakref
from pathlib import Path

log = logging.getLogger("rexrank.store")

OWNER_FILE = ".owner"
GRACE_SECONDS = 60.0  # a folder without its owner file yet may be being created


def scratch_root() -> Path:
    return Path(tempfile.gettempdir()) / "rexrank-scratch"


def _release(path: Path, handle) -> None:
    shutil.rmtree(path, ignore_errors=True)
    handle.close()


class ScratchDir:
    """A private temporary folder (`path`), removed by `cleanup()`, at garbage collection or
    exit, or, if the process is killed, by the next `remove_stale()`."""

    def __init__(self, prefix: str):
        root = scratch_root()
        root.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=root))
        # locked under another name, then renamed: `.owner` is never seen unlocked, so another
        # worker's remove_stale() cannot take it for a dead owner's between open and flock
        claim = self.path / f"{OWNER_FILE}.new"
        handle = open(claim, "wb")
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        claim.rename(self.path / OWNER_FILE)
        self._finalizer = weakref.finalize(self, _release, self.path, handle)

    def cleanup(self) -> None:
        self._finalizer()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        self.cleanup()


def remove_stale(root: Path | None = None) -> list[Path]:
    """Delete scratch folders whose owning process is gone; returns them."""
    root = root or scratch_root()
    removed = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        try:
            with open(folder / OWNER_FILE, "rb") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # alive
        except FileNotFoundError:
            try:
                if time.time() - folder.stat().st_mtime < GRACE_SECONDS:
                    continue
            except FileNotFoundError:
                continue  # removed meanwhile (its owner finished, or another worker cleaned it)
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if removed:
        log.info("removed %d temporary folder(s) left by stopped workers", len(removed))
    return removed
