"""What a repo holds on the Hub, whether deploy may write to it, and what differs from the plan.

Ownership: a repo deploy made carries `.rexrank-deploy.json` (written in the same commit
as the files, so a repo is either wholly deployed or not at all). A repo without it is
taken over only while it looks as the Hub creates one (`.gitattributes`, perhaps a
README.md) or holds nothing but store data; otherwise it is foreign and left alone.
Content is compared by hash: the git blob id for regular files, the SHA-256 for LFS/Xet
files, so unchanged files are never uploaded again.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from rexrank.hub.manifest import MANIFEST, managed_paths, sha256
from rexrank.hub.plan import RepoPlan

ALWAYS_ALLOWED = {".gitattributes"}
FRESH_FILES = {"README.md"}  # what the Hub may put into a repo it creates


@dataclass
class RemoteFile:
    path: str
    size: int
    blob_id: str  # git blob id (for an LFS file: of its pointer)
    lfs_sha256: str | None = None


@dataclass
class RemoteState:
    exists: bool
    sha: str | None = None
    private: bool | None = None
    files: dict[str, RemoteFile] = field(default_factory=dict)
    managed: set[str] | None = None  # paths listed in the repo's manifest; None = no manifest


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def same_content(remote: RemoteFile, data: bytes) -> bool:
    if remote.lfs_sha256:
        return remote.lfs_sha256 == sha256(data)
    return remote.blob_id == git_blob_id(data)


def read_state(api, repo: RepoPlan) -> RemoteState:
    """The repo as it is now (HTTP errors propagate; the caller names the repo)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RepositoryNotFoundError
    from huggingface_hub.hf_api import RepoFile

    try:
        info = api.repo_info(repo.repo_id, repo_type=repo.repo_type)
    except RepositoryNotFoundError:
        return RemoteState(exists=False)
    files = {}
    for entry in api.list_repo_tree(repo.repo_id, repo_type=repo.repo_type, revision=info.sha, recursive=True):
        if isinstance(entry, RepoFile):
            lfs = entry.lfs.sha256 if entry.lfs else None
            files[entry.path] = RemoteFile(entry.path, entry.size, entry.blob_id, lfs)
    managed = None
    if MANIFEST in files:
        path = hf_hub_download(repo.repo_id, MANIFEST, repo_type=repo.repo_type, revision=info.sha,
                               endpoint=api.endpoint, token=api.token)
        with open(path, "rb") as fh:
            managed = managed_paths(fh.read())
    return RemoteState(True, info.sha, bool(info.private), files, managed)


def foreign_files(repo: RepoPlan, state: RemoteState) -> list[str]:
    """Files that show the repo is not deploy's to overwrite (empty: it may go ahead)."""
    if not state.exists or state.managed is not None:
        return []
    others = [p for p in state.files if p not in ALWAYS_ALLOWED and not p.startswith(repo.data_prefixes or ("\0",))]
    if set(others) <= FRESH_FILES:
        return []
    return sorted(others)


def changes(repo: RepoPlan, state: RemoteState) -> tuple[dict[str, bytes], list[str]]:
    """(files to add or replace, files to delete) to bring the repo to the plan."""
    adds = {p: d for p, d in repo.files.items() if p not in state.files or not same_content(state.files[p], d)}
    stale = (state.managed or set()) - set(repo.files) - {MANIFEST}
    deletes = sorted(p for p in stale if p in state.files and not p.startswith(repo.data_prefixes or ("\0",)))
    if repo.seed and not any(p.startswith(repo.seed_prefix) for p in state.files):
        adds.update(repo.seed)
    return adds, deletes
