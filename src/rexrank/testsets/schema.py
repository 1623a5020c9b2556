"""One study in ReXrank format, normalised.

ReXrank JSON files are an object keyed by study id. Each study has `image_path` (list),
`frontal_lateral` (list), `key_image_path`, `context`, `section_findings`,
`section_impression`, `report`, plus per-set extras. Absent sections appear as NaN,
"nan", null or "" — all mean "section absent" and become None here.

The findings + impression reference is the file's own `report` field, verbatim. When a
file lacks it, it is rebuilt the way ReXrank built it:
"Findings: {findings.strip()} Impression: {impression.strip()}", with an absent section
written "None." (as in ReXrank's MIMIC-CXR and CheXpert Plus JSON, e.g.
"... Impression: None.").
"""
from __future__ import annotations

import math
from typing import Any

import datasets

from rexrank.errors import TestSetError
from rexrank.testsets.registry import TestSetSpec

ABSENT_SECTION_TEXT = "None."

BASE_FEATURES = {
    "id": datasets.Value("string"),
    "image_path": datasets.List(datasets.Value("string")),
    "frontal_lateral": datasets.List(datasets.Value("string")),
    "key_image_path": datasets.Value("string"),
    "context": datasets.Value("string"),
    "section_findings": datasets.Value("string"),
    "section_impression": datasets.Value("string"),
    "report": datasets.Value("string"),
}

_EXTRA_KINDS = {
    "string": datasets.Value("string"),
    "int64": datasets.Value("int64"),
    "float64": datasets.Value("float64"),
    "bool": datasets.Value("bool"),
    "list": datasets.List(datasets.Value("string")),
}


def features_for(spec: TestSetSpec) -> datasets.Features:
    feats = dict(BASE_FEATURES)
    for column, kind in spec.extras.items():
        feats[column] = _EXTRA_KINDS[kind]
    return datasets.Features(feats)


def is_absent(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str):
        stripped = value.strip()
        return stripped == "" or stripped.lower() == "nan"
    return False


def text_or_none(value: Any, *, where: str) -> str | None:
    if is_absent(value):
        return None
    if not isinstance(value, str):
        raise TestSetError(f"{where}: expected text, got {type(value).__name__} {value!r}")
    return value


def findings_impression_report(findings: str | None, impression: str | None) -> str:
    f = findings.strip() if findings is not None else ABSENT_SECTION_TEXT
    i = impression.strip() if impression is not None else ABSENT_SECTION_TEXT
    return f"Findings: {f} Impression: {i}"


def _string_list(value: Any, *, where: str) -> list[str]:
    if is_absent(value):
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TestSetError(f"{where}: expected a list of strings, got {value!r}")
    return list(value)


def _extra(value: Any, kind: str, *, where: str) -> Any:
    if is_absent(value):
        return [] if kind == "list" else None
    try:
        if kind == "string":
            return str(value)
        if kind == "int64":
            return int(value)
        if kind == "float64":
            return float(value)
        if kind == "bool":
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered in ("true", "1", "abnormal", "yes"):
                    return True
                if lowered in ("false", "0", "normal", "no"):
                    return False
                raise ValueError(value)
            return bool(value)
        if kind == "list":
            return _string_list(value, where=where)
    except (TypeError, ValueError):
        raise TestSetError(f"{where}: cannot read {value!r} as {kind}") from None
    raise AssertionError(kind)


def normalise_study(study_id: str, raw: dict, spec: TestSetSpec, *, source: str) -> dict:
    where = f"{source}: study {study_id!r}"
    if not isinstance(raw, dict):
        raise TestSetError(f"{where}: expected an object of fields, got {type(raw).__name__}")
    findings = text_or_none(raw.get("section_findings"), where=f"{where} field 'section_findings'")
    impression = text_or_none(raw.get("section_impression"), where=f"{where} field 'section_impression'")
    if findings is None and impression is None:
        raise TestSetError(f"{where}: has neither findings nor impression")
    report = text_or_none(raw.get("report"), where=f"{where} field 'report'")
    if report is None:
        report = findings_impression_report(findings, impression)
    row = {
        "id": str(study_id),
        "image_path": _string_list(raw.get("image_path"), where=f"{where} field 'image_path'"),
        "frontal_lateral": _string_list(raw.get("frontal_lateral"), where=f"{where} field 'frontal_lateral'"),
        "key_image_path": text_or_none(raw.get("key_image_path"), where=f"{where} field 'key_image_path'"),
        "context": text_or_none(raw.get("context"), where=f"{where} field 'context'"),
        "section_findings": findings,
        "section_impression": impression,
        "report": report,
    }
    for column, kind in spec.extras.items():
        row[column] = _extra(raw.get(column), kind, where=f"{where} field {column!r}")
    return row
