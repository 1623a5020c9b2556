"""Resolving a model checkpoint: a Hugging Face hub id pinned to a revision, or a local path.

Offline, or when the weights are missing, this fails within seconds with a message that
names the checkpoint and how to supply it, instead of the hub client's minute-long retries.
"""
from __future__ import annotations

import hashlib
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
    sha256: str | None = None  # of `filename` as fetched from the hub; local paths are used as given

    def describe(self) -> str:
        if self.path:
            return f"local {self.path}"
        target = f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"{target}@{self.revision}"

    def provenance(self) -> dict:
        return {"repo_id": self.repo_id, "revision": self.revision, "filename": self.filename, "path": self.path,
                "sha256": None if self.path else self.sha256}


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
    local = None
    try:
        # local_files_only first: a cached checkpoint never touches the network
        if checkpoint.filename:
            local = Path(hf_hub_download(filename=checkpoint.filename, local_files_only=True, **kwargs))
        else:
            local = Path(snapshot_download(local_files_only=True, **kwargs))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        pass
    if local is None and offline():
        raise MetricError(f"checkpoint {checkpoint.describe()} is not in the local cache and HF_HUB_OFFLINE is set; {how}")
    if local is None:
        try:
            if checkpoint.filename:
                local = Path(hf_hub_download(filename=checkpoint.filename, etag_timeout=10, **kwargs))
            else:
                local = Path(snapshot_download(etag_timeout=10, **kwargs))
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
            raise MetricError(f"cannot fetch checkpoint {checkpoint.describe()}: {exc}; {how}") from None
    if checkpoint.sha256 and checkpoint.filename:
        verify_sha256(local, checkpoint.sha256, checkpoint)
    return local


def verify_sha256(path: Path, expected: str, checkpoint: Checkpoint) -> None:
    """The pinned file is the official one: same bytes, not merely the same name."""
    real = path.resolve()
    if real.name == expected:  # the hub cache stores LFS files under their SHA-256
        return
    with open(real, "rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != expected:
        raise MetricError(
            f"checkpoint {checkpoint.describe()} at {path} has SHA-256 {actual}, not the official {expected}; "
            f"the cached file is corrupt or not the official one: delete it and download again"
        )


def pick_device(device: str | None = None) -> str:
    """'cuda' when available unless told otherwise. A device that torch does not know or
    cannot reach here is an error now, not at the first batch. Models run in fp32 on every
    device (no autocast), as the official runs did."""
    import torch

    if not device:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise MetricError(f"device={device!r} is not a torch device (e.g. cpu, cuda, cuda:1): {exc}") from None
    if kind.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise MetricError(
                f"device={device!r}, but torch sees no CUDA device (torch {torch.__version__}, built for CUDA "
                f"{torch.version.cuda or 'none: a CPU-only build'}); use device=cpu or a CUDA build of torch on a GPU machine"
            )
        if kind.index is not None and kind.index >= count:
            raise MetricError(f"device={device!r}, but torch sees {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    elif kind.type == "mps" and not torch.backends.mps.is_available():
        raise MetricError(f"device={device!r}, but the Apple MPS backend is not available here")
    return device
