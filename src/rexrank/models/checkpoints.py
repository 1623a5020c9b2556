"""Resolving a model checkpoint: a Hugging Face hub id pinned to a revision, or a local path.

The local cache is tried first and never touches the network. Otherwise, offline
(`HF_HUB_OFFLINE`) or when the Hub does not answer a short probe, this fails within
seconds with a `WeightsUnavailable` that names the checkpoint and how to supply it,
instead of the hub client's retries (about 23 s a file).
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from rexrank.catalogue import Checkpoint  # noqa: F401  (re-exported: the catalogue declares it)
from rexrank.errors import MetricError
from rexrank.models.advice import WeightsUnavailable

PROBE_TIMEOUT = 2.0  # seconds: a Hub that does not answer within this is treated as unreachable
DOWNLOAD_PROBE_TIMEOUT = 10.0  # an explicit download waits longer: a slow link must not be refused
PROBE_TTL = 60.0  # seconds a probe's answer is reused (a metric resolves several files)
_probes: dict[tuple[str, float], tuple[float, str | None]] = {}
_probe_lock = threading.Lock()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def hub_unavailable(timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the Hub cannot be used now (offline mode, or no answer to a short probe), or None.

    One HEAD request to the endpoint through huggingface_hub's own HTTP session (its proxy
    settings apply), answered from memory for PROBE_TTL seconds. Any HTTP answer counts as
    reachable; only transport failures (DNS, refused, timeout) do not.
    """
    if offline():
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import constants, get_session

    endpoint = constants.ENDPOINT
    with _probe_lock:
        seen = _probes.get((endpoint, timeout))
        if seen and time.monotonic() - seen[0] < PROBE_TTL:
            return seen[1]
        try:
            get_session().head(endpoint, timeout=timeout, follow_redirects=False)
            reason = None
        except Exception as exc:  # the client's transport errors (DNS, refused, timeout): no answer at all
            reason = f"the Hub ({endpoint}) cannot be reached ({type(exc).__name__}: {exc})"
        _probes[(endpoint, timeout)] = (time.monotonic(), reason)
        return reason


def cached_path(checkpoint: Checkpoint) -> Path | None:
    """The checkpoint's file (or snapshot folder) in the local hub cache, read from the cache's
    layout alone: huggingface_hub's own lookups (even with local_files_only) may first fetch
    an agent registry from the Hub, up to 3 s on a network that does not answer."""
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.file_download import repo_folder_name

    if checkpoint.filename:
        hit = try_to_load_from_cache(checkpoint.repo_id, checkpoint.filename, revision=checkpoint.revision)
        return Path(hit) if isinstance(hit, str) else None
    repo = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=checkpoint.repo_id, repo_type="model")
    ref = repo / "refs" / checkpoint.revision  # a branch or tag name, resolved to its commit
    commit = ref.read_text().strip() if ref.is_file() else checkpoint.revision
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def resolve(checkpoint: Checkpoint, *, option: str = "model_path", files: tuple[str, ...] = ()) -> Path:
    """Local path of the checkpoint (folder, or file when `filename` is set).

    `option` names the argument a user passes to point at local weights, `files` the files
    of a folder checkpoint a metric reads; both go into the advice of a failure.
    """
    if checkpoint.path:
        path = Path(checkpoint.path).expanduser()
        if not path.exists():
            raise MetricError(f"{option}={checkpoint.path!r} does not exist (checkpoint for {checkpoint.repo_id})")
        return path
    local = cached_path(checkpoint)
    if local is None:
        why = hub_unavailable()
        if why:
            raise WeightsUnavailable(checkpoint, option=option, files=files, reason=f"is not in the local cache and {why}")
        local = fetch(checkpoint, option=option, files=files)
    if checkpoint.sha256 and checkpoint.filename:
        verify_sha256(local, checkpoint.sha256, checkpoint, option=option)
    return local


def fetch(checkpoint: Checkpoint, *, option: str = "model_path", files: tuple[str, ...] = (), force: bool = False) -> Path:
    """Download the checkpoint at its revision into the hub cache (the Hub must be reachable)."""
    from huggingface_hub import hf_hub_download, snapshot_download

    kwargs = dict(repo_id=checkpoint.repo_id, revision=checkpoint.revision, etag_timeout=10, force_download=force)
    try:
        if checkpoint.filename:
            return Path(hf_hub_download(filename=checkpoint.filename, **kwargs))
        return Path(snapshot_download(**kwargs))
    except Exception as exc:  # HTTP status, transport (the client's own exception types) and disk errors alike
        detail = " ".join(str(exc).split())[:300]
        raise WeightsUnavailable(
            checkpoint, option=option, files=files, reason=f"cannot be fetched ({type(exc).__name__}: {detail})"
        ) from None


def verify_sha256(path: Path, expected: str, checkpoint: Checkpoint, *, option: str = "model_path") -> None:
    """The pinned file is the official one: same bytes, not merely the same name."""
    real = path.resolve()
    if real.name == expected:  # the hub cache stores LFS files under their SHA-256
        return
    with open(real, "rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != expected:
        raise WeightsUnavailable(
            checkpoint,
            option=option,
            reason=f"at {path} has SHA-256 {actual}, not the official {expected}: the cached file is corrupt or "
            f"not the official one; delete it and download it again",
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
