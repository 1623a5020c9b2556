"""Reading a ReXrank test-set JSON file into (study id, raw fields) pairs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rexrank.errors import TestSetError


def iter_raw_studies(path: str | Path) -> Iterator[tuple[str, dict]]:
    """ReXrank format: a JSON object keyed by study id. A JSON list of objects with an
    `id` (or `study_id`) field is accepted too. Duplicate ids are an error."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            doc = json.load(fh)  # the official files contain bare NaN, which json accepts
    except FileNotFoundError:
        raise TestSetError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise TestSetError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if isinstance(doc, dict):
        yield from ((str(k), v) for k, v in doc.items())
        return
    if isinstance(doc, list):
        seen: set[str] = set()
        for i, item in enumerate(doc):
            key = item.get("id", item.get("study_id")) if isinstance(item, dict) else None
            if key is None:
                raise TestSetError(f"{path}: item {i} has no 'id' or 'study_id'")
            key = str(key)
            if key in seen:
                raise TestSetError(f"{path}: study id {key!r} appears more than once (item {i})")
            seen.add(key)
            yield key, item
        return
    raise TestSetError(f"{path}: expected a JSON object keyed by study id, got {type(doc).__name__}")
