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


# ---- a study's fields, normalised (issue 40: what the mutation tool found unpinned) ---------
def _spec(**extras):
    from rexrank.testsets.registry import TestSetSpec

    return TestSetSpec(name="t", title="T", split="test", n_studies=None, filenames=(), access="public", extras=extras)


def test_each_absent_spelling_is_absent_and_anything_else_is_a_value():
    from rexrank.testsets.schema import is_absent

    assert [is_absent(v) for v in (None, math.nan, "", "  \n", "nan", " NaN ")] == [True] * 6
    assert [is_absent(v) for v in ("n/a", "nano", 0, 0.0, [], False)] == [False] * 6


def test_text_fields_are_kept_as_written_and_a_non_text_value_is_named():
    from rexrank.errors import TestSetError
    from rexrank.testsets.schema import text_or_none

    assert text_or_none("  Clear. ", where="w") == "  Clear. " and text_or_none(" nan", where="w") is None
    with pytest.raises(TestSetError) as err:
        text_or_none(5, where="f.json: study 's1' field 'context'")
    assert str(err.value) == "f.json: study 's1' field 'context': expected text, got int 5"


def test_extras_are_read_as_their_kind_and_a_value_that_is_not_one_is_named():
    from rexrank.errors import TestSetError
    from rexrank.testsets.schema import _extra

    assert [_extra(v, "string", where="w") for v in (5, "a ", None)] == ["5", "a ", None]
    assert [_extra(v, "int64", where="w") for v in ("7", 7.0, "")] == [7, 7, None]
    assert [_extra(v, "float64", where="w") for v in ("1.5", 2, "nan")] == [1.5, 2.0, None]
    trues, falses = (" True", "1", "abnormal", "YES", 1, True), ("false", "0", " Normal", "no", 0, False)
    assert [_extra(v, "bool", where="w") for v in trues] == [True] * 6
    assert [_extra(v, "bool", where="w") for v in falses] == [False] * 6
    assert _extra(None, "bool", where="w") is None
    assert _extra("PA", "list", where="w") == ["PA"] and _extra(math.nan, "list", where="w") == []
    for value, kind in (("x", "int64"), ("maybe", "bool"), ("1,5", "float64"), ([1], "int64")):
        with pytest.raises(TestSetError) as err:
            _extra(value, kind, where="f.json: study 's1' field 'site'")
        assert str(err.value) == f"f.json: study 's1' field 'site': cannot read {value!r} as {kind}"
    with pytest.raises(AssertionError, match="^date$"):  # a kind the spec check lets through by mistake is named
        _extra("x", "date", where="w")


def test_list_fields_keep_unknown_items_in_place_and_refuse_anything_else():
    from rexrank.errors import TestSetError
    from rexrank.testsets.schema import _string_list

    assert _string_list(["a.png", None, math.nan, "b.png"], where="w") == ["a.png", None, None, "b.png"]
    assert _string_list("a.png", where="w") == ["a.png"] and _string_list("nan", where="w") == []
    for value in ([1], ("a",), ["a", 2.5], {"a": 1}):
        with pytest.raises(TestSetError) as err:
            _string_list(value, where="f.json: study 's1' field 'image_path'")
        assert str(err.value) == f"f.json: study 's1' field 'image_path': expected a list of strings, got {value!r}"


def test_a_study_normalised_field_by_field():
    from rexrank.errors import TestSetError
    from rexrank.testsets.schema import BASE_FEATURES, features_for, normalise_study

    spec = _spec(site="string", age="int64", abnormal="bool", views="list", weight="float64")
    raw = {"image_path": ["a.png", "b.png"], "frontal_lateral": "frontal", "key_image_path": "a.png",
           "context": " Cough. ", "section_findings": "Clear. ", "section_impression": "nan", "site": "s1",
           "age": "61", "abnormal": "normal"}
    assert normalise_study(7, raw, spec, source="f.json") == {
        "id": "7", "image_path": ["a.png", "b.png"], "frontal_lateral": ["frontal"], "key_image_path": "a.png",
        "context": " Cough. ", "section_findings": "Clear. ", "section_impression": None,
        "report": "Findings: Clear.  Impression: nan",  # no report field: the evaluation script's string
        "findings_impression": "Findings: Clear.  Impression: nan",
        "site": "s1", "age": 61, "abnormal": False, "views": [], "weight": None}
    assert normalise_study("s", {"report": "R.", "section_findings": None}, _spec(), source="f.json")["report"] == "R."
    both = normalise_study("s", {"section_findings": "Clear.", "section_impression": " No acute disease. "}, _spec(),
                           source="f.json")
    assert (both["section_impression"], both["findings_impression"]) == (
        " No acute disease. ", "Findings: Clear. Impression:  No acute disease. ")
    with pytest.raises(TestSetError) as err:
        normalise_study("s1", ["x"], spec, source="f.json")
    assert str(err.value) == "f.json: study 's1': expected an object of fields, got list"
    for field, value, message in (("section_findings", 3, "expected text, got int 3"),
                                  ("section_impression", 4.5, "expected text, got float 4.5"),
                                  ("report", ["R."], "expected text, got list ['R.']"),
                                  ("key_image_path", 1, "expected text, got int 1"),
                                  ("context", True, "expected text, got bool True"),
                                  ("image_path", [3], "expected a list of strings, got [3]"),
                                  ("frontal_lateral", [None, 2], "expected a list of strings, got [None, 2]"),
                                  ("views", ["PA", 0], "expected a list of strings, got ['PA', 0]"),
                                  ("age", "old", "cannot read 'old' as int64")):
        with pytest.raises(TestSetError) as err:
            normalise_study("s1", {field: value}, spec, source="f.json")
        assert str(err.value) == f"f.json: study 's1' field {field!r}: {message}"
    features = features_for(spec)
    assert list(features) == [*BASE_FEATURES, "site", "age", "abnormal", "views", "weight"]
    assert [features[c].dtype for c in ("site", "age", "abnormal", "weight")] == ["string", "int64", "bool", "float64"]
    assert features["views"].feature.dtype == "string" and features["image_path"].feature.dtype == "string"
    assert list(BASE_FEATURES) == ["id", "image_path", "frontal_lateral", "key_image_path", "context", "section_findings",
                                   "section_impression", "report", "findings_impression"]
