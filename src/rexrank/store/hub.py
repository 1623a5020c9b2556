"""A repo that is a Hugging Face Hub dataset repo. Commits name their parent commit
(`create_commit(parent_commit=...)`), so the Hub refuses one made on a stale version
(HTTP 412) and the caller retries on fresh data. File contents are cached by blob id,
so re-reading the queue only downloads files that changed."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from rexrank.store.repo import ConflictError, Snapshot, StoreError
from rexrank.store.scratch import ScratchDir


def _hub_errors():
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    return HfHubHTTPError, OfflineModeIsEnabled


class HubRepo:
    def __init__(self, repo_id: str, *, token: str | None = None, endpoint: str | None = None, create: bool = True):
        from huggingface_hub import HfApi, constants

        if constants.is_offline_mode():
            raise StoreError(f"store hf://{repo_id}: HF_HUB_OFFLINE is set; a Hub store needs the network")
        self.repo_id = repo_id
        self.endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
        self.token = token or os.environ.get("HF_TOKEN") or None
        self.name = f"hf://datasets/{repo_id}"
        self.api = HfApi(endpoint=self.endpoint, token=self.token)
        # removed at exit, or by the next worker start if this process is killed
        self._scratch = ScratchDir("hubrepo")
        self._cache_dir = self._scratch.path
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()
        HfHubHTTPError, Offline = _hub_errors()
        try:
            if create:
                self.api.create_repo(repo_id, repo_type="dataset", private=True, exist_ok=True)
            self.api.repo_info(repo_id, repo_type="dataset")
        except Offline:
            raise StoreError(f"store {self.name}: HF_HUB_OFFLINE is set; a Hub store needs the network") from None
        except HfHubHTTPError as exc:
            raise StoreError(f"store {self.name}: cannot open the dataset repo: {exc}") from None
        except Exception as exc:  # connection refused, DNS (the HTTP client's own error types)
            raise StoreError(f"store {self.name}: cannot reach {self.endpoint or 'the Hub'}: {exc}") from None

    def snapshot(self) -> Snapshot:
        from huggingface_hub.hf_api import RepoFile

        try:
            sha = self.api.repo_info(self.repo_id, repo_type="dataset").sha
            entries = self.api.list_repo_tree(self.repo_id, repo_type="dataset", revision=sha, recursive=True)
            files = {e.path: e.blob_id for e in entries if isinstance(e, RepoFile)}
        except Exception as exc:  # HTTP errors and the client's connection errors
            raise StoreError(f"{self.name}: cannot list the repo: {type(exc).__name__}: {exc}") from None
        return Snapshot(sha, files)

    def read(self, snapshot: Snapshot, path: str) -> bytes:
        from huggingface_hub import hf_hub_download

        blob = snapshot.files.get(path)
        if blob is None:
            raise StoreError(f"{self.name}: {path} not found at {snapshot.version[:12]}")
        with self._lock:
            if blob in self._blobs:
                return self._blobs[blob]
        try:
            local = hf_hub_download(
                self.repo_id, path, repo_type="dataset", revision=snapshot.version,
                endpoint=self.endpoint, token=self.token, cache_dir=self._cache_dir,
            )
        except Exception as exc:
            raise StoreError(f"{self.name}: cannot download {path}: {type(exc).__name__}: {exc}") from None
        data = Path(local).read_bytes()
        with self._lock:
            self._blobs[blob] = data
        return data

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
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status in (409, 412):  # the branch moved since `parent`
                raise ConflictError(f"{self.name}: moved past {parent[:12]}") from None
            raise StoreError(f"{self.name}: commit failed: {exc}") from None
        except Exception as exc:  # connection errors: the commit may or may not have landed;
            # the caller's transaction re-reads, so report it as a conflict to retry safely
            raise ConflictError(f"{self.name}: commit interrupted ({type(exc).__name__}: {exc})") from None
        return info.oid
