"""JSON reading that refuses what `json.loads` accepts silently or crashes on.

- Duplicate keys: `json` keeps the last value of a repeated key, so a study id given
  twice in a ReXrank JSON would be merged without a word. Here every object remembers
  its repeated keys and `duplicate_keys` lists them with where they are.
- Deep nesting: a 100,000-deep array makes `json` raise RecursionError; here it is a
  `JSONProblem` with a message.
- Invalid JSON: a `JSONProblem` with line and column.
"""
from __future__ import annotations

import json
from typing import Any


class JSONProblem(ValueError):
    """The text is not JSON this project accepts; str() is a one-line reason."""


class _Object(dict):
    """A JSON object that knows which of its keys appeared more than once."""

    __slots__ = ("repeated",)


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    for key, value in pairs:
        if key in obj:  # `repeated` is set only here: most objects never need the list
            repeated = getattr(obj, "repeated", None)
            if repeated is None:
                repeated = obj.repeated = []
            if key not in repeated:
                repeated.append(key)
        obj[key] = value
    return obj


def loads(text: str | bytes) -> Any:
    """Parse JSON (bare NaN accepted, as the official test-set files contain it); objects
    are dicts that remember repeated keys (see `duplicate_keys`)."""
    try:
        return json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except RecursionError:
        raise JSONProblem("nested too deeply (arrays or objects inside each other about 1,000 times or more)") from None


def repeated_keys(obj: Any) -> list[str]:
    """Keys repeated in this one object (top level only)."""
    return list(getattr(obj, "repeated", ()))


def duplicate_keys(doc: Any, *, limit: int = 10) -> list[tuple[str, list[str]]]:
    """(where, repeated keys) for every object of `doc` with a repeated key, "" being the
    top level and "['EX001']" an object under the top-level key EX001; at most `limit`."""
    found: list[tuple[str, list[str]]] = []
    # only objects and arrays are visited, and a path is a (parent, key) chain written out
    # only for an object it reports: a 10,000-study file is walked in a few milliseconds
    stack: list[tuple[Any, Any]] = [(None, doc)]
    while stack and len(found) < limit:
        path, node = stack.pop()
        if isinstance(node, dict):
            if repeated_keys(node):
                found.append((_where(path), repeated_keys(node)))
            stack.extend(((path, k), v) for k, v in reversed(list(node.items())) if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(((path, i), v) for i, v in reversed(list(enumerate(node))) if isinstance(v, (dict, list)))
    return found


def _where(path) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(f"[{key!r}]")
    return "".join(reversed(keys))


def describe_duplicates(found: list[tuple[str, list[str]]], *, top_level: str = "keys") -> str:
    """One line: 'study ids appear more than once: 'A', 'B'; keys repeated in ['X']: 'f''."""
    parts = []
    for where, keys in found:
        listed = ", ".join(map(repr, keys[:10])) + (f", … ({len(keys) - 10} more)" if len(keys) > 10 else "")
        parts.append(f"{top_level} appear more than once: {listed}" if not where else f"keys repeated in {where}: {listed}")
    return "; ".join(parts)
