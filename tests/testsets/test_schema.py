"""The findings + impression reference as the evaluation script writes it (rexrank.testsets.schema).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import json
import math

import pytest


# ---- the F+I reference: the evaluation script's f-string on the raw values ------------------
def test_the_findings_impression_reference_is_iu_xrays_official_report_field():
    """IU-Xray's `report` field is the official "Findings: {f} Impression: {i}" (the two agree
    on all 590 studies there, unlike MIMIC-CXR and CheXpert Plus)."""
    from rexrank.testsets.schema import findings_impression_reference
    from support.paths import shared_path

    studies = json.loads(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json").read_text(encoding="utf-8"))
    assert len(studies) == 590
    for study in studies.values():
        assert findings_impression_reference(study["section_findings"], study["section_impression"]) == study["report"]


@pytest.mark.parametrize("findings, impression, expected", [
    (None, "Clear.", "Findings: None Impression: Clear."),
    (math.nan, None, "Findings: None Impression: None"),
    ("Lungs clear. ", float("nan"), "Findings: Lungs clear.  Impression: None"),  # nothing stripped
    ("", "nan", "Findings:  Impression: nan"),  # written as found: only null and NaN are None
])
def test_the_findings_impression_reference_writes_missing_sections_as_the_script_does(findings, impression, expected):
    from rexrank.testsets.schema import findings_impression_reference

    assert findings_impression_reference(findings, impression) == expected
