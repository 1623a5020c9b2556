"""Resolving a model checkpoint: a Hugging Face hub id pinned to a revision, or a local path.

Offline, or when the weights are missing, this fails within seconds with a message that
names the checkpoint and how to supply it, instead of the hub client's minute-long retries.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rexrank.errors import MetricError


@dataclass(frozen=True)
class Checkpoint:
    """Where a metric's weights come from. `path` (a local folder or file) wins over the hub."""

    repo_id: str
    revision: str = "main"
    filename: str | None = None  # a single file inside the repo (e.g. chexbert.pth), else the whole snapshot
    path: str | None = None
    licence: str = ""

    def describe(self) -> str:
        if self.path:
            return f"local {self.path}"
        target = f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"{target}@{self.revision}"

    def provenance(self) -> dict:
        return {"repo_id": self.repo_id, "revision": self.revision, "filename": self.filename, "path": self.path}


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def resolve(checkpoint: Checkpoint, *, option: str = "model_path") -> Path:
    """Local path of the checkpoint (folder, or file when `filename` is set).

    `option` names the argument a user passes to point at local weights; it appears in
    the error message.
    """
    if checkpoint.path:
        path = Path(checkpoint.path).expanduser()
        if not path.exists():
            raise MetricError(f"{option}={checkpoint.path!r} does not exist (checkpoint for {checkpoint.repo_id})")
        return path
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    how = (
        f"download it where the Hub is reachable (huggingface-cli download {checkpoint.repo_id}"
        f"{' ' + checkpoint.filename if checkpoint.filename else ''} --revision {checkpoint.revision}) "
        f"and pass the local path as {option}="
    )
    kwargs = dict(repo_id=checkpoint.repo_id, revision=checkpoint.revision)
    try:
        # local_files_only first: a cached checkpoint never touches the network
        if checkpoint.filename:
            return Path(hf_hub_download(filename=checkpoint.filename, local_files_only=True, **kwargs))
        return Path(snapshot_download(local_files_only=True, **kwargs))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        pass
    if offline():
        raise MetricError(f"checkpoint {checkpoint.describe()} is not in the local cache and HF_HUB_OFFLINE is set; {how}")
    try:
        if checkpoint.filename:
            return Path(hf_hub_download(filename=checkpoint.filename, etag_timeout=10, **kwargs))
        return Path(snapshot_download(etag_timeout=10, **kwargs))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise MetricError(f"cannot fetch checkpoint {checkpoint.describe()}: {exc}; {how}") from None


def pick_device(device: str | None = None) -> str:
    """'cuda' when available unless told otherwise; metrics run fp32 on CPU."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
