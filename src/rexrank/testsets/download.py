"""Fetching public test-set files, pinned by SHA-256."""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from rexrank.errors import TestSetError
from rexrank.testsets.registry import Download

DOWNLOAD_TIMEOUT_S = 20


def cache_root() -> Path:
    root = os.environ.get("REXRANK_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "rexrank" if xdg else Path.home() / ".cache" / "rexrank"


_known: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256: a file is hashed once per version


def sha256_of(path: Path) -> str:
    from rexrank.errors import TestSetError
    from rexrank.input_limits import MAX_TEST_SET_BYTES, check_size

    path = Path(path).resolve()
    st = check_size(path, MAX_TEST_SET_BYTES, error=TestSetError, what="test set file")  # no FIFO, no /dev/zero
    signature = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if signature in _known:
        return _known[signature]
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    _known[signature] = digest.hexdigest()
    return _known[signature]


def fetch_pinned(download: Download, *, url: str | None = None, dest_dir: Path | None = None) -> Path:
    """Path of the verified local copy, downloading it if needed.

    `url` overrides the pinned address (a mirror); the content hash is checked either way.
    """
    dest_dir = dest_dir or cache_root() / "testsets"
    target = dest_dir / download.sha256[:16] / download.filename
    if target.exists() and sha256_of(target) == download.sha256:
        return target
    source = url or download.url
    if os.environ.get("HF_HUB_OFFLINE") == "1" and url is None and not os.environ.get("REXRANK_ALLOW_DOWNLOAD"):
        raise TestSetError(
            f"{download.filename} is not cached and HF_HUB_OFFLINE=1 is set, so it is not downloaded from {source}; "
            f"download it yourself and pass its folder with --data-dir (Python: data_dir=); expected sha256 {download.sha256}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(source, timeout=DOWNLOAD_TIMEOUT_S) as resp:
            while block := resp.read(1 << 20):
                out.write(block)
        got = sha256_of(tmp)
        if got != download.sha256:
            raise TestSetError(
                f"{source}: downloaded file has sha256 {got}, expected {download.sha256}; "
                "the upstream file changed or the download is corrupt — refusing to use it"
            )
        os.replace(tmp, target)  # atomic: concurrent downloaders never see a partial file
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise TestSetError(
            f"could not download {download.filename} from {source}: {exc}. "
            "Download it yourself and pass its folder with --data-dir (Python: data_dir=)"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return target
