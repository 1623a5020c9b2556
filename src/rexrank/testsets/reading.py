"""Reading a ReXrank test-set JSON file into (study id, raw fields) pairs."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rexrank.errors import TestSetError


def iter_raw_studies(path: str | Path) -> Iterator[tuple[str, dict]]:
    """ReXrank format: a JSON object keyed by study id. A JSON list of objects with an
    `id` (or `study_id`) field is accepted too. Duplicate ids are an error."""
    from rexrank.input_limits import MAX_TEST_SET_BYTES, read_capped
    from rexrank.strict_json import JSONProblem, describe_duplicates, duplicate_keys, loads

    path = Path(path)
    # a regular file of bounded size: a FIFO or /dev/zero given as --data-dir is a message, not a hang
    data = read_capped(path, MAX_TEST_SET_BYTES, error=TestSetError, what="test set file")
    try:
        doc = loads(data.decode("utf-8"))  # the official files contain bare NaN, which is accepted
    except UnicodeDecodeError as exc:
        raise TestSetError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except JSONProblem as exc:
        raise TestSetError(f"{path}: {exc}") from None
    found = duplicate_keys(doc)
    if found:  # json would keep the last of two studies with one id, silently
        raise TestSetError(f"{path}: {describe_duplicates(found, top_level='study ids' if isinstance(doc, dict) else 'keys')}")
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
