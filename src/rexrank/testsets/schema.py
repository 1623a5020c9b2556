"""One study in ReXrank format, normalised.

ReXrank JSON files are an object keyed by study id. Each study has `image_path` (list),
`frontal_lateral` (list), `key_image_path`, `context`, `section_findings`,
`section_impression`, `report`, plus per-set extras. Absent sections appear as NaN,
"nan", null or "" — all mean "section absent" in the normalised section columns (None).

The findings + impression reference (column `findings_impression`) is built exactly as
ReXrank's published evaluation script builds its ground truth (rajpurkarlab/ReXrank,
`example_files/evaluation_script.md`, MIT): `f"Findings: {findings} Impression:
{impression}"` on the file's raw values, a value that `pandas.notna` rejects (null, NaN)
written `None`. Nothing is stripped and "", "nan" or whitespace stay as written. This is
not the file's own `report` field, which writes `None.` and strips: they differ in 723 of
2,347 MIMIC-CXR and all 200 CheXpert Plus studies (IU-Xray: none). `report` is kept
verbatim; a file without it gets the evaluation script's string there too. A study with
neither section is kept, as the script keeps it: its findings + impression reference is
"Findings: None Impression: None"; the findings track does not score it (like any study
without findings) and lists it among the studies it leaves out.
"""
from __future__ import annotations

import math
from typing import Any

import datasets

from rexrank.errors import TestSetError
from rexrank.testsets.registry import TestSetSpec

BASE_FEATURES = {
    "id": datasets.Value("string"),
    "image_path": datasets.List(datasets.Value("string")),
    "frontal_lateral": datasets.List(datasets.Value("string")),
    "key_image_path": datasets.Value("string"),
    "context": datasets.Value("string"),
    "section_findings": datasets.Value("string"),
    "section_impression": datasets.Value("string"),
    "report": datasets.Value("string"),
    "findings_impression": datasets.Value("string"),
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


def findings_impression_reference(findings: Any, impression: Any) -> str:
    """The evaluation script's ground truth from the raw section values."""
    import pandas as pd

    findings = findings if pd.notna(findings) else None
    impression = impression if pd.notna(impression) else None
    return f"Findings: {findings} Impression: {impression}"


def _string_list(value: Any, *, where: str) -> list[str | None]:
    if is_absent(value):
        return []
    if isinstance(value, str):
        return [value]
    # an unknown item (NaN: 202 `frontal_lateral` items of ReXrank's MIMIC-CXR file, 32
    # `ap_pa` items of CheXpert Plus) stays in place as None, aligned with `image_path`
    if not isinstance(value, list) or not all(isinstance(v, str) or (v is None or _is_nan(v)) for v in value):
        raise TestSetError(f"{where}: expected a list of strings, got {value!r}")
    return [None if v is None or _is_nan(v) else v for v in value]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


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
    raw_findings, raw_impression = raw.get("section_findings"), raw.get("section_impression")
    findings = text_or_none(raw_findings, where=f"{where} field 'section_findings'")
    impression = text_or_none(raw_impression, where=f"{where} field 'section_impression'")
    findings_impression = findings_impression_reference(raw_findings, raw_impression)
    report = text_or_none(raw.get("report"), where=f"{where} field 'report'")
    if report is None:
        report = findings_impression
    row = {
        "id": str(study_id),
        "image_path": _string_list(raw.get("image_path"), where=f"{where} field 'image_path'"),
        "frontal_lateral": _string_list(raw.get("frontal_lateral"), where=f"{where} field 'frontal_lateral'"),
        "key_image_path": text_or_none(raw.get("key_image_path"), where=f"{where} field 'key_image_path'"),
        "context": text_or_none(raw.get("context"), where=f"{where} field 'context'"),
        "section_findings": findings,
        "section_impression": impression,
        "report": report,
        "findings_impression": findings_impression,
    }
    for column, kind in spec.extras.items():
        row[column] = _extra(raw.get(column), kind, where=f"{where} field {column!r}")
    return row
