"""A repo in a local folder.

A commit is checked against the folder's version counter under an exclusive `flock`, so
that two processes never both commit on top of the same version; the lock is released
by the kernel when a process dies, so a killed writer cannot wedge the store.

A commit of several files is all-or-nothing even if its writer is killed half-way: the
new contents are written to temporary files first, then a journal naming every rename
and deletion, and only then are they applied. Whoever next finds a journal (a reader or
a writer) finishes the commit it describes; temporary files without a journal belong to
a commit that never happened and are removed.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from rexrank.file_modes import follow_umask
from rexrank.store.names import display
from rexrank.store.repo import ConflictError, Snapshot, StoreError, StoreWriteError

log = logging.getLogger("rexrank.store")

_VERSION_FILE = ".rexrank-version"
_TEMP_PREFIX = ".tmp-"
_LOCK_FILE = ".rexrank-lock"
_JOURNAL_FILE = ".rexrank-journal"
_READ_ATTEMPTS = 200
DEFAULT_LOCK_WAIT = 120.0


class LocalRepo:
    def __init__(self, root: str | Path, *, create: bool = True):
        self.name = str(Path(root))
        self.root = Path(root).absolute()  # temporary files are named relative to it
        if not create and not self.root.is_dir():
            raise StoreError(f"store folder {self.root} does not exist (nothing was ever submitted there)")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store folder {self.root}: {_why(exc)}") from None
        # readers take no lock at all, so a store they can only read works, and a reader
        # stopped with Ctrl-Z holds off no writer (reads are checked against the version)
        self.writable = os.access(self.root, os.W_OK)
        if not self.writable:
            return
        try:
            with self._locked():
                if not (self.root / _VERSION_FILE).exists():
                    _atomic_write(self.root / _VERSION_FILE, b"0", sync=True)
                self._finish_interrupted_commit()
                _remove_stale_temp_files(self.root)
        except OSError as exc:  # e.g. files of another user: readable, and a commit says why not
            log.info("%s: opened for reading only (%s)", self.name, _why(exc))
            self.writable = False

    @contextmanager
    def _locked(self):
        """The writers' lock (exclusive; held for one commit). An OSError opening it says the
        store is read-only. A wait longer than REXRANK_LOCK_WAIT seconds (default 120) ends
        with a message naming the holder: e.g. a writer stopped with Ctrl-Z."""
        with open(self.root / _LOCK_FILE, "a+b") as fh:
            self._wait_for_lock(fh)
            try:
                fh.truncate(0)  # who holds it, for a writer that waits too long ("a" mode: written at 0)
                fh.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:200]})".encode("utf-8", "replace"))
                fh.flush()
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _wait_for_lock(self, fh) -> None:
        try:
            limit = float(os.environ.get("REXRANK_LOCK_WAIT", "") or DEFAULT_LOCK_WAIT)
        except ValueError:
            limit = DEFAULT_LOCK_WAIT
        start, pause = time.monotonic(), 0.0005
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited > limit:
                    fh.seek(0)
                    holder = fh.read(300).decode("utf-8", "replace").strip() or "another process"
                    raise StoreError(f"{self.name}: the store's write lock has been held for {waited:.0f} s by "
                                     f"{display(holder)}; if that process is stopped (Ctrl-Z), resume it (fg) "
                                     "or end it") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def read_consistently(self, read):
        """`read()` (a listing and the reads that follow it) as of one version, without a
        lock: run again when a commit landed meanwhile (the version moved, or a commit's
        journal was present), which also covers a listed file moved away before its read."""
        for attempt in range(_READ_ATTEMPTS):
            self._recover_if_needed()
            before = self._state()
            if before[1] and self.writable:  # a commit is being applied right now
                time.sleep(0.005 * (attempt + 1))
                continue
            try:
                value = read()
            except StoreError:
                if self._state() == before:
                    raise
                continue
            if self._state() == before:
                return value
            time.sleep(min(0.005 * (attempt + 1), 0.1))
        raise StoreError(f"{self.name}: the store kept changing while it was read ({_READ_ATTEMPTS} tries); try again")

    def _state(self) -> tuple[str, bool]:
        return self._version(), (self.root / _JOURNAL_FILE).exists()

    def _recover_if_needed(self) -> None:
        """A journal left by a killed writer: finish its commit (a writer applying one right
        now holds the lock for a moment). A read-only store is read as it is."""
        if self.writable and (self.root / _JOURNAL_FILE).exists():
            try:
                with self._locked():
                    self._finish_interrupted_commit()
            except OSError as exc:
                log.warning("%s: cannot finish an interrupted commit: %s", self.name, _why(exc))

    def _version(self) -> str:
        try:
            return (self.root / _VERSION_FILE).read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            return ""

    def version(self) -> str:
        self._recover_if_needed()
        return self._version()

    def snapshot(self, *folders: str, at: str | None = None) -> Snapshot:
        """`at`: the version the caller just read (a local folder has only the current one:
        callers that need the two to agree read through `read_consistently`). The version
        is read before the listing: a commit landing during it makes a later commit on
        this snapshot a conflict, and a consistent read run again."""
        self._recover_if_needed()
        version = self._version()
        files: dict[str, str] = {}
        for folder in folders:
            start = self.root / folder if folder else self.root
            if not start.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(start):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                for fname in filenames:
                    if fname.startswith("."):
                        continue
                    full = Path(dirpath) / fname
                    try:
                        st = full.stat()
                    except FileNotFoundError:  # moved by a commit landing now: the version says so
                        continue
                    files[full.relative_to(self.root).as_posix()] = f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"
        return Snapshot(version, files, tuple(folders))

    def read(self, snapshot: Snapshot, path: str) -> bytes:
        data = self.read_optional(snapshot, path)
        if data is None:
            raise StoreError(f"{self.name}: {path} not found")
        return data

    def read_optional(self, snapshot: Snapshot, path: str) -> bytes | None:
        _check_inside(self.name, path)
        try:
            return (self.root / path).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def commit(self, changes: dict[str, bytes | None], *, message: str, parent: str) -> str:
        for path in changes:
            _check_inside(self.name, path)
        try:
            with self._locked():
                return self._commit_locked(changes, parent)
        except OSError as exc:  # a full disk, a read-only store, ...: one line, nothing left behind
            raise StoreWriteError(f"{self.name}: cannot write to the store: {_why(exc)}") from None

    def _commit_locked(self, changes: dict[str, bytes | None], parent: str) -> str:
        self._finish_interrupted_commit()
        current = self._version()
        if current != parent:
            raise ConflictError(f"{self.name}: version is {current}, commit was made on {parent}")
        if current.isdigit():
            new = str(int(current) + 1)
        else:  # the counter file was damaged or deleted by hand: start a fresh, unique count
            new = str(time.time_ns())
            log.warning("%s: version file held %r, not a number; reset it to %s", self.name, current[:40], new)
        writes: list[list[str]] = []
        made_dirs: list[Path] = []
        try:  # until the journal exists the commit has not happened: undo everything on failure
            for path, data in changes.items():
                if data is not None:
                    writes.append([_temp_file(self.root, path, data, made_dirs), path])
            _sync_all([self.root / temp for temp, _ in writes])
        except BaseException:
            for temp, _ in writes:
                (self.root / temp).unlink(missing_ok=True)
            for folder in reversed(made_dirs):  # e.g. no empty predictions/<id>/ left behind
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        deletes = [path for path, data in changes.items() if data is None]
        if len(changes) == 1 and writes:  # one rename is atomic by itself
            os.replace(self.root / writes[0][0], self.root / writes[0][1])
            self._set_version(new)
            return new
        journal = {"version": new, "writes": writes, "deletes": deletes}
        # written in place: a journal cut short by a kill is not JSON, and its commit never happened
        try:
            with open(self.root / _JOURNAL_FILE, "wb") as fh:
                fh.write(json.dumps(journal).encode())
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            (self.root / _JOURNAL_FILE).unlink(missing_ok=True)
            for temp, _ in writes:
                (self.root / temp).unlink(missing_ok=True)
            raise
        self._apply(journal)
        return new

    def _finish_interrupted_commit(self) -> None:
        """Called under the exclusive lock: apply the journal a killed writer left."""
        path = self.root / _JOURNAL_FILE
        try:
            journal = json.loads(path.read_bytes())
        except FileNotFoundError:
            return
        except ValueError:  # the journal itself was being written: that commit never happened
            path.unlink(missing_ok=True)
            return
        log.warning("%s: finishing commit %s left half-applied by a stopped writer", self.name, journal.get("version"))
        self._apply(journal)

    def _apply(self, journal: dict) -> None:
        for temp, target in journal["writes"]:
            try:
                os.replace(self.root / temp, self.root / target)
            except FileNotFoundError:
                pass  # renamed before the writer stopped
        for path in journal["deletes"]:
            (self.root / path).unlink(missing_ok=True)
        self._set_version(str(journal["version"]))
        (self.root / _JOURNAL_FILE).unlink(missing_ok=True)

    def _set_version(self, version: str) -> None:
        """Under the exclusive lock, which every reader of the counter waits for: written in
        place (one write, no temporary file), a killed writer leaves at worst a damaged
        counter, which the next commit replaces with a fresh unique one."""
        fd = os.open(self.root / _VERSION_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = version.encode().ljust(24)
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


def _check_inside(name: str, path: str) -> None:
    """A path inside the store, not one of its own dot-files (a record's text never decides
    which file outside it is read or written)."""
    if path.startswith((".", "/")) or ".." in Path(path).parts or "/." in path or "\x00" in path:
        raise StoreError(f"{name}: refusing a path outside the store: {path[:80]!r}")


def _why(exc: OSError) -> str:
    """An OS error in a few words, without the path (the message names the store)."""
    return exc.strerror or str(exc) or type(exc).__name__


def _temp_file(root: Path, path: str, data: bytes, made_dirs: list[Path]) -> str:
    """`data` in a temporary file beside `root/path` (synced later, with the commit's
    others); returns the temporary file's path relative to `root`. Folders it creates
    are appended to `made_dirs` (outermost first), for a failed commit to remove."""
    target = root / path
    missing = []
    parent = target.parent
    while not parent.exists() and parent != root:
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        made_dirs.append(folder)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX, suffix=target.suffix)
    try:
        follow_umask(fd)  # mkstemp's 0600 would hide the store's files from a reader the umask allows
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp).relative_to(root).as_posix()


_sync_pool: ThreadPoolExecutor | None = None


def _sync_one(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_all(paths: list[Path]) -> None:
    """Flush a commit's new files to the disk before the commit is decided, all at once:
    the disk's wait is paid about once per commit, not once per file."""
    global _sync_pool
    if len(paths) <= 1:
        for path in paths:
            _sync_one(path)
        return
    if _sync_pool is None:
        _sync_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rexrank-sync")
    list(_sync_pool.map(_sync_one, paths))


def _atomic_write(target: Path, data: bytes, *, sync: bool = False) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX, suffix=target.suffix)
    try:
        follow_umask(fd)  # mkstemp's 0600 would hide the store's files from a reader the umask allows
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_stale_temp_files(root: Path) -> None:
    """Temporary files are only written under the exclusive lock, which the caller holds,
    and a pending journal was applied first: any found now belong to a writer that was
    killed before its commit was decided."""
    for dirpath, _, filenames in os.walk(root):
        for fname in filenames:
            if fname.startswith(_TEMP_PREFIX):
                Path(dirpath, fname).unlink(missing_ok=True)
