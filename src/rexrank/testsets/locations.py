"""The test-set files this machine scored with, remembered in the user's own cache so that
`rexrank analyze` reuses the folder a run was scored with instead of asking for it again.

Kept out of every output file: the per-study parquet records the references' fingerprint,
and the path stays here (a path of the user's machine is nobody else's business)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rexrank.testsets.download import cache_root

_KEPT_PER_TEST_SET = 8


def _index_path() -> Path:
    return cache_root() / "testset_locations.json"


def _read() -> dict[str, list[str]]:
    try:
        data = json.loads(_index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no index yet, or a damaged one: it only saves typing, so start again
    return {k: [p for p in v if isinstance(p, str)] for k, v in data.items() if isinstance(v, list)} if isinstance(data, dict) else {}


def remember(test_set: str, path: Path) -> None:
    """Put `path` first among the files remembered for `test_set` (best effort: a read-only
    cache only costs the convenience)."""
    index = _read()
    resolved = str(Path(path).resolve())
    index[test_set] = [resolved, *(p for p in index.get(test_set, []) if p != resolved)][:_KEPT_PER_TEST_SET]
    target = _index_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp", encoding="utf-8") as fh:
            json.dump(index, fh, indent=1)
        os.replace(fh.name, target)
    except OSError:
        pass


def remembered(test_set: str) -> list[Path]:
    """Files remembered for `test_set`, most recent first, those still present."""
    return [Path(p) for p in _read().get(test_set, []) if Path(p).is_file()]
