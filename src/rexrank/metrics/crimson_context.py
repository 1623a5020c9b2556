"""CRIMSON's optional patient context taken from a test set: the official prompt's
"Patient Context" block with the age and the indication where the test set records them
(CheXpert Plus: `age` and `section_clinical_history`; IU-Xray and MIMIC-CXR: the
"Indication:" part of `context`). Named option `patient_context="test_set"`; without it
the prompt has no context, as the official default."""
from __future__ import annotations

import math
import re
from typing import Any, Iterable

FROM_TEST_SET = "test_set"
# "Indication: Chest pain, dyspnea Comparison: None." -> "Chest pain, dyspnea"
_INDICATION = re.compile(r"indication\s*:\s*(.*?)\s*(?:\b(?:comparison|history|technique|findings)\s*:|$)", re.I | re.S)


def _present(value: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return not (isinstance(value, str) and value.strip().lower() in ("", "nan", "none", "none."))


def _age(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def study_context(row: dict) -> dict | None:
    """{"Age": ..., "Indication": ...} with what the study has, or None (no context block)."""
    context: dict = {}
    if _present(row.get("age")):
        context["Age"] = _age(row["age"])
    indication = row.get("section_clinical_history")
    if not _present(indication) and _present(row.get("context")):
        found = _INDICATION.search(str(row["context"]))
        indication = found.group(1) if found else None
    if _present(indication):
        context["Indication"] = " ".join(str(indication).split())
    return context or None


def test_set_contexts(rows: Iterable[dict]) -> list[dict | None]:
    return [study_context(row) for row in rows]
