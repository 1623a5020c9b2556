"""A repo in a local folder: each file is written to a temporary name and renamed into
place (atomic), and a commit is checked against the folder's version counter under an
exclusive `flock`, so that two processes never both commit on top of the same version.
The lock is released by the kernel when a process dies, so a killed writer cannot wedge
the store."""
from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from rexrank.store.repo import ConflictError, Snapshot, StoreError

log = logging.getLogger("rexrank.store")

_VERSION_FILE = ".rexrank-version"
_TEMP_PREFIX = ".tmp-"
_LOCK_FILE = ".rexrank-lock"


class LocalRepo:
    def __init__(self, root: str | Path, *, create: bool = True):
        self.root = Path(root)
        self.name = str(self.root)
        if not create and not self.root.is_dir():
            raise StoreError(f"store folder {self.root} does not exist (nothing was ever submitted there)")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store folder {self.root}: {exc}") from None
        with self._locked(fcntl.LOCK_EX):
            if not (self.root / _VERSION_FILE).exists():
                _atomic_write(self.root / _VERSION_FILE, b"0")
            _remove_stale_temp_files(self.root)

    @contextmanager
    def _locked(self, mode: int):
        with open(self.root / _LOCK_FILE, "a+b") as fh:
            fcntl.flock(fh.fileno(), mode)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _version(self) -> str:
        try:
            return (self.root / _VERSION_FILE).read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            return ""

    def snapshot(self) -> Snapshot:
        with self._locked(fcntl.LOCK_SH):  # no commit half-applied while we list
            files = {}
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                for fname in filenames:
                    if fname.startswith("."):
                        continue
                    full = Path(dirpath) / fname
                    st = full.stat()
                    files[full.relative_to(self.root).as_posix()] = f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"
            return Snapshot(self._version(), files)

    def read(self, snapshot: Snapshot, path: str) -> bytes:
        try:
            return (self.root / path).read_bytes()
        except FileNotFoundError:
            raise StoreError(f"{self.name}: {path} not found") from None

    def commit(self, changes: dict[str, bytes | None], *, message: str, parent: str) -> str:
        for path in changes:
            if path.startswith((".", "/")) or ".." in Path(path).parts:
                raise StoreError(f"{self.name}: refusing to write outside the store: {path!r}")
        with self._locked(fcntl.LOCK_EX):
            current = self._version()
            if current != parent:
                raise ConflictError(f"{self.name}: version is {current}, commit was made on {parent}")
            for path, data in changes.items():
                target = self.root / path
                if data is None:
                    target.unlink(missing_ok=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    _atomic_write(target, data)
            if current.isdigit():
                new = str(int(current) + 1)
            else:  # the counter file was damaged or deleted by hand: start a fresh, unique count
                new = str(time.time_ns())
                log.warning("%s: version file held %r, not a number; reset it to %s", self.name, current[:40], new)
            _atomic_write(self.root / _VERSION_FILE, new.encode())
            return new


def _atomic_write(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX, suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_stale_temp_files(root: Path) -> None:
    """Temporary files are only written under the exclusive lock, which the caller holds:
    any found now belong to a writer that was killed mid-write."""
    for dirpath, _, filenames in os.walk(root):
        for fname in filenames:
            if fname.startswith(_TEMP_PREFIX):
                Path(dirpath, fname).unlink(missing_ok=True)
