"""The per-study parquet file (`rexrank score --per-study`): `id` plus one column per
per-study score, and, in the parquet schema metadata under the key `rexrank`, what the
scores are: test set, track, the references' SHA-256, each metric's configuration, the
rexrank version, and which metrics failed or had not run yet when it was written.

`rexrank analyze` reads that provenance to refuse comparing runs on different test sets,
tracks or references.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rexrank.file_modes import follow_umask

METADATA_KEY = b"rexrank"
FORMAT = "rexrank-per-study/1"


def write_per_study(frame, path: str | Path, provenance: dict[str, Any]) -> None:
    """Write `frame` with `provenance` as schema metadata, atomically (a reader never sees
    half a file; a run interrupted between metrics leaves the last complete one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps({"format": FORMAT, **provenance}, allow_nan=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as tmp:
        follow_umask(tmp.fileno())
    try:
        pq.write_table(table, tmp.name)
        os.replace(tmp.name, path)
    except BaseException:
        Path(tmp.name).unlink(missing_ok=True)
        raise


def read_provenance(path: str | Path) -> dict[str, Any] | None:
    """The provenance written with the file, or None (a CSV, or a parquet file from an older
    rexrank or another tool)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if path.suffix.lower() != ".parquet":
        return None
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(METADATA_KEY)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def write_json_atomic(path: str | Path, document: dict) -> None:
    """JSON written through a temporary file and a rename, for results rewritten as a run goes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2, allow_nan=True)  # fails before any file is touched
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            follow_umask(fh.fileno())
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # a full disk: no half-written file left beside the results
        raise
