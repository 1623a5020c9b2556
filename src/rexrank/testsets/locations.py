"""The test-set files that worked on this machine, remembered in the user's own cache: a
folder given once (--data-dir, $REXRANK_DATA_DIR, Python's data_dir=) is found again by
every later command and by `rexrank.load_test_set` without it.

A file is remembered with its size and SHA-256 once it has loaded; it is reused only while
both still match, so a file that was moved, replaced or edited since is never used in its
place: it is named (`stale`) and the user passes the folder again. The path stays in this
cache, out of every output file (a path of the user's machine is nobody else's business);
the per-study parquet records the references' fingerprint instead."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from rexrank.testsets.download import cache_root

_KEPT_PER_TEST_SET = 8


@dataclass(frozen=True)
class Remembered:
    path: Path
    sha256: str
    size: int
    when: str  # ISO date it last worked
    given_as: str = ""  # "--data-dir", "$REXRANK_DATA_DIR" or "data_dir=" ("": an index of an earlier version)


def _index_path() -> Path:
    return cache_root() / "testset_locations.json"


def _entry(item) -> Remembered | None:
    """One remembered file, or None for an entry that cannot be checked (damaged, or written
    by an earlier version without the file's size and hash: it is not trusted)."""
    if not isinstance(item, dict):
        return None
    path, sha, size = item.get("path"), item.get("sha256"), item.get("size")
    if not isinstance(path, str) or not isinstance(sha, str) or not isinstance(size, int) or isinstance(size, bool):
        return None
    given_as = item.get("given_as")
    return Remembered(Path(path), sha, size, str(item.get("when", "")), given_as if isinstance(given_as, str) else "")


def _read() -> dict[str, list[Remembered]]:
    try:
        data = json.loads(_index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no index yet, or a damaged one: it only saves typing, so start again
    if not isinstance(data, dict):
        return {}
    return {name: [e for e in map(_entry, items) if e is not None] for name, items in data.items() if isinstance(items, list)}


def _write(index: dict[str, list[Remembered]]) -> None:
    target = _index_path()
    doc = {name: [{"path": str(e.path), "sha256": e.sha256, "size": e.size, "when": e.when, "given_as": e.given_as}
                  for e in entries]
           for name, entries in index.items()}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(fh.name, target)
    except OSError:
        pass  # a read-only cache only costs the convenience


def remember(test_set: str, path: Path, *, given_as: str = "") -> None:
    """Put `path` (a test-set file that has just loaded, given as `given_as`) first among
    those remembered for `test_set`, with its size and SHA-256 now."""
    from rexrank.testsets.download import sha256_of

    path = Path(path).resolve()
    entry = Remembered(path, sha256_of(path), path.stat().st_size,
                       datetime.now(timezone.utc).date().isoformat(), given_as)
    index = _read()
    kept = index.get(test_set, [])
    if kept and kept[0] == entry:
        return  # already first, as it is: nothing to write (a backend loads its test set per request)
    index[test_set] = [entry, *(e for e in kept if e.path != path)][:_KEPT_PER_TEST_SET]
    _write(index)


def _unusable(entry: Remembered, pinned: str | None = None) -> str | None:
    """Why a remembered file cannot be used as it is now, or None when it can. `pinned`: the
    SHA-256 of the test set's pinned download, the only content taken for it."""
    from rexrank.errors import TestSetError
    from rexrank.testsets.download import sha256_of

    if pinned is not None and entry.sha256 != pinned:
        return "is not the pinned file (its SHA-256 differs)"
    try:
        if not entry.path.is_file():
            return "is no longer there"
        if entry.path.stat().st_size != entry.size:
            return "has changed since (its size differs)"
        if sha256_of(entry.path) != entry.sha256:
            return "has changed since (its SHA-256 differs)"
    except (OSError, TestSetError) as exc:
        return f"cannot be read ({exc})"
    return None


def usable(test_set: str, *, pinned: str | None = None) -> Iterator[Remembered]:
    """Files remembered for `test_set`, most recent first, that are still as they were (and
    have the content `pinned`, for a test set with a pinned download). Each is hashed only
    when the one before it has been passed over: the first usable one costs one hash."""
    return (e for e in _read().get(test_set, []) if _unusable(e, pinned) is None)


def stale(test_set: str, *, pinned: str | None = None) -> list[str]:
    """What is wrong with each remembered file that is not usable: "PATH is no longer there"."""
    return [f"{e.path} {why}" for e in _read().get(test_set, []) for why in [_unusable(e, pinned)] if why]
