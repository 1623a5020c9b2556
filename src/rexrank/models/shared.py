"""Loaded models shared within one process.

A scoring run builds fresh metric instances (and `radcliq` builds its own BERTScore and
SembScore beside any standalone ones); the backend worker does so for every request.
Without sharing, each of them would load the same weights again. The key must hold
everything that shapes the loaded object (checkpoint, layers, device, and for local
weights a fingerprint, so that new files at the same path are reloaded).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable, TypeVar

T = TypeVar("T")

_LOCK = threading.RLock()  # loads are serialised: two threads never load the same weights twice
_LOADED: OrderedDict[Hashable, Any] = OrderedDict()


def capacity() -> int:
    """How many loaded models stay in memory (least recently used are dropped)."""
    return int(os.environ.get("REXRANK_SHARED_MODELS", "6"))


def local_fingerprint(path: str | os.PathLike | None) -> str | None:
    if not path:
        return None
    from rexrank.models.encoders import folder_fingerprint

    return folder_fingerprint(Path(path)) if Path(path).exists() else None


def shared_model(key: Hashable, load: Callable[[], T]) -> T:
    with _LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
        value = load()
        _LOADED[key] = value
        while len(_LOADED) > max(capacity(), 0):
            _LOADED.popitem(last=False)
        return value


def clear() -> None:
    with _LOCK:
        _LOADED.clear()
