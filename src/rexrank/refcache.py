"""Content-addressed on-disk cache for reference-side annotations and embeddings.

A second submission on the same test set recomputes only the prediction side. Keys are
sha256(namespace, model, revision, text); each entry is one file written atomically
(temp file + os.replace), so concurrent processes never read a partial entry and a lost
race only costs a recomputation.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence


def default_cache_dir() -> Path:
    from rexrank.testsets.download import cache_root

    return cache_root() / "refcache"


class ReferenceCache:
    """get/put of picklable values (numpy arrays, dicts) keyed by (namespace, text).

    `namespace` must capture everything that changes the value: model id, revision,
    layer, preprocessing version.
    """

    def __init__(self, namespace: str, directory: str | Path | None = None, enabled: bool = True):
        self.namespace = namespace
        self.enabled = enabled
        self.directory = Path(directory) if directory else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def _path(self, text: str) -> Path:
        digest = hashlib.sha256(f"{self.namespace}\x00{text}".encode("utf-8")).hexdigest()
        return self.directory / digest[:2] / f"{digest}.pkl"

    def get(self, text: str) -> Any | None:
        if not self.enabled:
            return None
        path = self._path(text)
        try:
            with path.open("rb") as fh:
                value = pickle.load(fh)
        except (FileNotFoundError, EOFError, pickle.UnpicklingError):
            return None
        return value

    def put(self, text: str, value: Any) -> None:
        if not self.enabled:
            return
        path = self._path(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def lookup(self, texts: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
        """({text: cached value}, the distinct texts not in the cache), counted as hits and misses."""
        values: dict[str, Any] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            cached = self.get(text)
            if cached is None:
                missing.append(text)
            else:
                values[text] = cached
        self.hits += len(values)
        self.misses += len(missing)
        return values, missing


def references_then_predictions(cache: ReferenceCache, references: Sequence[str], predictions: Sequence[str],
                                compute: Callable[[list[str]], list[Any]]) -> list[Any]:
    """Values for `references + predictions`, in that order. References are read from the
    cache; every other distinct text of both sides is computed in one call, so a model runs
    one length-sorted set of batches over them (as few and as full as one pass over the
    run's texts can be; bert_score, too, embeds references and candidates together). New
    references are then stored."""
    values, missing = cache.lookup(references)
    todo = list(dict.fromkeys([*missing, *(text for text in predictions if text not in values)]))
    if todo:
        computed = compute(todo)
        if len(computed) != len(todo):
            raise RuntimeError(f"cache compute returned {len(computed)} values for {len(todo)} texts")
        values.update(zip(todo, computed))
        for text in missing:
            cache.put(text, values[text])
    return [values[text] for text in [*references, *predictions]]
