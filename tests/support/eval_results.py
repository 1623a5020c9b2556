"""The Hub's Eval Results format: the benchmark's id and a checker of entries against its schema."""
from __future__ import annotations


BENCHMARK = {
    "name": (str, True),
    "description": (str, True),
    "evaluation_framework": (str, True),
    "tasks": ([{"id": (str, True), "config": (str, True), "split": (str, True)}], True),
}


def check(obj, schema, where="") -> None:
    """Raise AssertionError naming the first place where `obj` leaves `schema`."""
    if isinstance(schema, list):
        assert isinstance(obj, list) and obj, f"{where}: expected a non-empty list, got {obj!r}"
        for i, item in enumerate(obj):
            check(item, schema[0], f"{where}[{i}]")
        return
    assert isinstance(obj, dict), f"{where}: expected a mapping, got {obj!r}"
    unknown = set(obj) - set(schema)
    assert not unknown, f"{where}: fields the format does not have: {sorted(unknown)}"
    for field, (kind, required) in schema.items():
        if field not in obj:
            assert not required, f"{where}.{field} is required"
            continue
        value = obj[field]
        if isinstance(kind, (dict, list)):
            check(value, kind, f"{where}.{field}")
        else:
            assert isinstance(value, kind) and not isinstance(value, bool), f"{where}.{field}: {value!r} is not {kind}"
