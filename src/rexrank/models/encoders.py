"""Loading Hugging Face transformer encoders (config + tokenizer + weights) for the
model-based metrics: from a hub id pinned to a revision, or from a local folder.

Only the files a metric needs are fetched (not the TF/Flax/Rust copies a model repo
often carries), each through `rexrank.models.checkpoints.resolve`, so offline or missing
weights fail within seconds with a message naming the checkpoint.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rexrank.catalogue import CONFIG_FILE, TOKENIZER_FILES, WEIGHT_FILES, model_files  # noqa: F401  (the files a model repo is read for)
from rexrank.errors import MetricError
from rexrank.models.advice import WeightsUnavailable
from rexrank.models.building import MODEL_BUILD_LOCK
from rexrank.models.checkpoints import Checkpoint, pick_device, resolve

# Byte-level BPE tokenisers (GPT-2 family). bert_score encodes with add_prefix_space=True for
# these (GPT2Tokenizer / RobertaTokenizer and their subclasses: BART, Longformer). On
# transformers 5 that argument is silently ignored by `encode`; it must be given when the
# tokenizer is loaded. Decided from config.model_type, never from the path string.
PREFIX_SPACE_MODEL_TYPES = frozenset({"roberta", "gpt2", "bart", "longformer", "mvp"})


def is_local(model: str) -> bool:
    """A model argument naming an existing folder (or written like a path) is local."""
    return os.path.exists(os.path.expanduser(model)) or model.startswith(("/", "./", "../", "~"))


def checkpoint_for(model: str, revision: str | None, *, default_model: str, default_revision: str, licence: str = "") -> Checkpoint:
    """A Checkpoint from a user's `model` (hub id or local folder) and `revision`."""
    if is_local(model):
        return Checkpoint(repo_id=model, revision="local", path=model, licence=licence)
    if revision is None:
        revision = default_revision if model == default_model else "main"
    return Checkpoint(repo_id=model, revision=revision, licence=licence)


needed_files = model_files  # the files of a model repo that `fetch_files` reads (those the repo has)


def fetch_files(checkpoint: Checkpoint, *, option: str, weights: bool = True, tokenizer: bool = True) -> Path:
    """A local folder holding the checkpoint's config, tokenizer files and weights.

    config.json is fetched first, so an offline machine fails on it at once with the
    checkpoint's name. Tokenizer files are optional one by one (repos differ);
    at least one weight file must exist.
    """
    if checkpoint.path:
        return resolve(checkpoint, option=option)
    files = needed_files(weights=weights, tokenizer=tokenizer)

    def one(filename: str) -> Path:
        return resolve(
            Checkpoint(checkpoint.repo_id, checkpoint.revision, filename=filename, licence=checkpoint.licence),
            option=option,
        )

    def unavailable(reason: str) -> WeightsUnavailable:
        # advise on the whole folder, not on the one file that happened to be missing first
        return WeightsUnavailable(checkpoint, option=option, files=files, reason=reason)

    try:
        folder = one(CONFIG_FILE).parent
    except WeightsUnavailable as exc:
        raise unavailable(exc.reason) from None
    if tokenizer:
        for name in TOKENIZER_FILES:
            try:
                one(name)
            except WeightsUnavailable:
                pass  # optional: not every repo has every tokenizer file
    if weights:
        errors = []
        for name in WEIGHT_FILES:
            try:
                one(name)
                break
            except WeightsUnavailable as exc:
                errors.append(f"{name} {exc.reason}")
        else:
            raise unavailable("has no usable weights: " + "; ".join(errors))
    return folder


def folder_fingerprint(folder: Path) -> str:
    """Cheap identity of a local model folder or file (names, sizes, mtimes) for cache
    keys: new weights at the same path must not be served stale cached values."""
    folder = Path(folder)
    digest = hashlib.sha256()
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        stat = path.stat()
        name = path.name if path == folder else path.relative_to(folder)
        digest.update(f"{name}\x00{stat.st_size}\x00{int(stat.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


def checkpoint_identity(checkpoint: Checkpoint, folder: Path) -> str:
    """What a reference-side cache key must contain to identify the weights."""
    if checkpoint.path:
        return f"local:{Path(checkpoint.path).resolve()}:{folder_fingerprint(folder)}"
    return f"{checkpoint.repo_id}@{checkpoint.revision}"


@dataclass
class Encoder:
    """A loaded tokenizer + model, with what the metrics need to know about them."""

    checkpoint: Checkpoint
    folder: Path
    tokenizer: Any
    model: Any
    config: Any
    device: str
    max_length: int
    add_prefix_space: bool

    @property
    def identity(self) -> str:
        return checkpoint_identity(self.checkpoint, self.folder)


def max_input_length(tokenizer, config) -> int:
    """The tokenizer's model_max_length, or (when a repo has no tokenizer_config, as
    distilroberta-base) the positions the model can take: transformers 3/4 hard-coded 512
    for the classic checkpoints, RoBERTa reserves pad_token_id + 1 position slots."""
    length = getattr(tokenizer, "model_max_length", None)
    if length and length < 1_000_000:
        return int(length)
    positions = getattr(config, "max_position_embeddings", None)
    if not positions:
        raise MetricError("cannot tell the maximum input length: the tokenizer has no model_max_length and the config no max_position_embeddings")
    if config.model_type in PREFIX_SPACE_MODEL_TYPES and getattr(config, "pad_token_id", None) is not None and config.model_type != "gpt2":
        positions -= config.pad_token_id + 1
    return int(positions)


def load_encoder(checkpoint: Checkpoint, *, option: str, device: str | None) -> Encoder:
    """Tokenizer + base model (AutoModel, fp32, eval mode) on `device` (None: cuda when available)."""
    folder = fetch_files(checkpoint, option=option)  # before the heavy imports: missing weights fail at once
    device = pick_device(device)
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(folder)
        prefix = config.model_type in PREFIX_SPACE_MODEL_TYPES
        tokenizer = AutoTokenizer.from_pretrained(folder, add_prefix_space=True) if prefix else AutoTokenizer.from_pretrained(folder)
        with MODEL_BUILD_LOCK:
            model = AutoModel.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise MetricError(f"cannot load checkpoint {checkpoint.describe()} from {folder}: {exc}") from exc
    model.eval().to(device)
    return Encoder(checkpoint, folder, tokenizer, model, config, device, max_input_length(tokenizer, config), prefix)
