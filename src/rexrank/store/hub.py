"""A repo that is a Hugging Face Hub dataset repo. Commits name their parent commit
(`create_commit(parent_commit=...)`), so the Hub refuses one made on a stale version
(HTTP 412) and the caller retries on fresh data.

What each operation costs in requests, whatever the repo holds: the version is one
`dataset_info(expand=["sha"])` (no file list); a snapshot lists only the folders asked
for; a file is one GET at a commit. File contents are cached by their git blob id (the
id the tree listing and our indexes name), including what this process committed itself,
so re-reading an unchanged file costs nothing.
"""
from __future__ import annotations

import os
import threading

from rexrank.store.repo import ConflictError, Snapshot, StoreError, StoreUnreachable, StoreWriteError, git_blob_oid

MAX_CACHED_BYTES = 256 * 1024 * 1024


def _hub_errors():
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    return HfHubHTTPError, OfflineModeIsEnabled


def _status(exc: Exception) -> int | None:
    return getattr(getattr(exc, "response", None), "status_code", None)


def _read_error(message: str, exc: Exception) -> StoreError:
    """StoreUnreachable for the Hub's passing faults (5xx, 429, a dropped connection), else StoreError."""
    from rexrank.http_faults import transient_fault

    return (StoreUnreachable if transient_fault(exc) else StoreError)(f"{message}: {type(exc).__name__}: {exc}")


def _entry_not_found(exc: Exception) -> bool:
    """A missing file or folder (not a missing repo or revision, which are also 404s)."""
    from huggingface_hub.errors import EntryNotFoundError

    return isinstance(exc, EntryNotFoundError)


class HubRepo:
    def __init__(self, repo_id: str, *, token: str | None = None, endpoint: str | None = None, create: bool = True):
        from huggingface_hub import HfApi, constants

        if constants.is_offline_mode():
            raise StoreError(f"store hf://{repo_id}: HF_HUB_OFFLINE is set; a Hub store needs the network")
        self.repo_id = repo_id
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        self.token = token or os.environ.get("HF_TOKEN") or None
        self.name = f"hf://datasets/{repo_id}"
        self.api = HfApi(endpoint=self.endpoint, token=self.token)
        self._blobs: dict[str, bytes] = {}
        self._cached_bytes = 0
        # files read outside the snapshot's listing (index files), by (commit, path): a commit's
        # content never changes, so one step that reads an index twice asks the Hub once
        self._unlisted: dict[tuple[str, str], bytes | None] = {}
        self._lock = threading.Lock()
        HfHubHTTPError, Offline = _hub_errors()
        try:
            if create:
                self.api.create_repo(repo_id, repo_type="dataset", private=True, exist_ok=True)
            self.api.dataset_info(repo_id, expand=["sha"])
        except Offline:
            raise StoreError(f"store {self.name}: HF_HUB_OFFLINE is set; a Hub store needs the network") from None
        except HfHubHTTPError as exc:
            raise StoreError(f"store {self.name}: cannot open the dataset repo: {exc}") from None
        except Exception as exc:  # connection refused, DNS (the HTTP client's own error types)
            raise StoreError(f"store {self.name}: cannot reach {self.endpoint}: {exc}") from None

    def version(self) -> str:
        try:
            return self.api.dataset_info(self.repo_id, expand=["sha"]).sha
        except Exception as exc:  # HTTP errors and the client's connection errors
            raise _read_error(f"{self.name}: cannot read the repo's version", exc) from None

    def snapshot(self, *folders: str, at: str | None = None) -> Snapshot:
        from huggingface_hub.hf_api import RepoFile

        sha = at or self.version()
        files: dict[str, str] = {}
        for folder in folders:
            try:
                entries = self.api.list_repo_tree(self.repo_id, path_in_repo=folder.rstrip("/") or None,
                                                  repo_type="dataset", revision=sha, recursive=True)
                files.update({e.path: e.blob_id for e in entries if isinstance(e, RepoFile)})
            except Exception as exc:  # HTTP errors and the client's connection errors
                if folder and _entry_not_found(exc):
                    continue  # the folder does not exist (yet): nothing in it
                raise _read_error(f"{self.name}: cannot list {folder or 'the repo'}", exc) from None
        return Snapshot(sha, files, tuple(folders))

    def read(self, snapshot: Snapshot, path: str) -> bytes:
        data = self.read_optional(snapshot, path)
        if data is None:
            raise StoreError(f"{self.name}: {path} not found at {snapshot.version[:12]}")
        return data

    def read_optional(self, snapshot: Snapshot, path: str) -> bytes | None:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        blob = snapshot.files.get(path)
        with self._lock:
            if blob is not None and blob in self._blobs:
                return self._blobs[blob]
            if blob is None and (snapshot.version, path) in self._unlisted:
                return self._unlisted[(snapshot.version, path)]
        url = hf_hub_url(self.repo_id, path, repo_type="dataset", revision=snapshot.version, endpoint=self.endpoint)
        try:
            response = get_session().get(url, headers=build_hf_headers(token=self.token), follow_redirects=True)
            if response.status_code == 404 and response.headers.get("X-Error-Code") == "EntryNotFound":
                self._remember_unlisted(snapshot.version, path, None)
                return None
            hf_raise_for_status(response)
        except Exception as exc:
            raise _read_error(f"{self.name}: cannot download {path}", exc) from None
        data = response.content
        self._remember(git_blob_oid(data), data)
        if blob is None:
            self._remember_unlisted(snapshot.version, path, data)
        return data

    def _remember_unlisted(self, version: str, path: str, data: bytes | None) -> None:
        with self._lock:
            if len(self._unlisted) >= 64:  # a few index files per step; older commits are not read again
                self._unlisted.clear()
            self._unlisted[(version, path)] = data

    def _remember(self, blob: str, data: bytes) -> None:
        with self._lock:
            if blob in self._blobs:
                return
            if self._cached_bytes + len(data) > MAX_CACHED_BYTES:  # a long-lived worker: start afresh
                self._blobs.clear()
                self._cached_bytes = 0
            self._blobs[blob] = data
            self._cached_bytes += len(data)

    def commit(self, changes: dict[str, bytes | None], *, message: str, parent: str) -> str:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        HfHubHTTPError, _ = _hub_errors()
        ops = [
            CommitOperationDelete(path_in_repo=p) if data is None else CommitOperationAdd(path_in_repo=p, path_or_fileobj=data)
            for p, data in changes.items()
        ]
        try:
            info = self.api.create_commit(
                self.repo_id, ops, commit_message=message, repo_type="dataset", parent_commit=parent
            )
        except HfHubHTTPError as exc:
            if _status(exc) in (409, 412):  # the branch moved since `parent`
                raise ConflictError(f"{self.name}: moved past {parent[:12]}") from None
            raise StoreWriteError(f"{self.name}: commit failed: {exc}") from None
        except Exception as exc:  # connection errors: the commit may or may not have landed;
            # the caller's transaction re-reads, so report it as a conflict to retry safely
            raise ConflictError(f"{self.name}: commit interrupted ({type(exc).__name__}: {exc})") from None
        for data in changes.values():  # what we wrote is what the next listing will name
            if data is not None:
                self._remember(git_blob_oid(data), data)
        return info.oid
