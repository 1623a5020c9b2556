"""A repo in a local folder: each file is written to a temporary name and renamed into
place (atomic), and a commit is checked against the folder's version counter under an
exclusive `flock`, so that two processes never both commit on top of the same version.
The lock is released by the kernel when a process dies, so a killed writer cannot wedge
the store."""
from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from rexrank.store.repo import ConflictError, Snapshot, StoreError

_VERSION_FILE = ".rexrank-version"
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
        if not (self.root / _VERSION_FILE).exists():
            with self._locked(fcntl.LOCK_EX):
                if not (self.root / _VERSION_FILE).exists():
                    _atomic_write(self.root / _VERSION_FILE, b"0")

    @contextmanager
    def _locked(self, mode: int):
        with open(self.root / _LOCK_FILE, "a+b") as fh:
            fcntl.flock(fh.fileno(), mode)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _version(self) -> str:
        return (self.root / _VERSION_FILE).read_text().strip()

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
            new = str(int(current) + 1)
            _atomic_write(self.root / _VERSION_FILE, new.encode())
            return new


def _atomic_write(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
