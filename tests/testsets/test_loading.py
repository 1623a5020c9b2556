"""Test sets through the datasets builder: IU-Xray from ../shared, synthetic files for the
edge cases, the pinned download against a local HTTP server."""
from __future__ import annotations

import functools
import http.server
import json
import math
import threading

import datasets
import pytest

from support.paths import shared_path
from rexrank.errors import TestSetError
from rexrank.testsets.loading import load_all_studies, load_test_set
from rexrank.testsets.registry import TEST_SETS


def _study(findings, impression, report=None, **extra):
    study = {
        "image_path": ["a/0.png"],
        "frontal_lateral": ["Frontal"],
        "key_image_path": "a/0.png",
        "context": "Indication: test.",
        "section_findings": findings,
        "section_impression": impression,
    }
    if report is not None:
        study["report"] = report
    study.update(extra)
    return study


def _write(path, doc):
    # allow_nan: the official files contain bare NaN
    path.write_text(json.dumps(doc, allow_nan=True))
    return path


def test_iu_xray_findings_track_from_shared_file():
    raw = json.loads(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json").read_text())
    ds = load_test_set("iu_xray", "findings", data_dir=shared_path("data", "iu_xray"))
    assert isinstance(ds, datasets.Dataset)
    assert len(ds) == 590
    assert set(ds.column_names) >= {
        "id", "image_path", "frontal_lateral", "key_image_path", "context",
        "section_findings", "section_impression", "report", "split", "reference",
    }
    row = ds[0]
    original = raw[row["id"]]
    assert row["reference"] == original["section_findings"]
    assert row["image_path"] == original["image_path"]
    assert row["frontal_lateral"] == original["frontal_lateral"]
    assert ds["id"] == list(raw)  # file order kept


def _evaluation_script_reference(study):
    # oracle: ReXrank's example_files/evaluation_script.md, verbatim in substance
    import pandas as pd

    findings = study["section_findings"] if pd.notna(study["section_findings"]) else None
    impression = study["section_impression"] if pd.notna(study["section_impression"]) else None
    return f"Findings: {findings} Impression: {impression}"


def test_iu_xray_findings_impression_reference_is_the_evaluation_scripts():
    raw = json.loads(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json").read_text())
    ds = load_test_set("iu_xray", "findings_impression", data_dir=shared_path("data", "iu_xray"))
    assert len(ds) == 590
    for row in ds:
        original = raw[row["id"]]
        assert row["reference"] == _evaluation_script_reference(original)
        # for IU-Xray the file's report field is the same string (so the official BLEU-2 parity holds)
        assert row["reference"] == original["report"] == row["report"]


def test_findings_impression_reference_follows_the_evaluation_script_not_the_report_field(tmp_path):
    doc = {
        # MIMIC-CXR style: no impression (NaN), report field says "None."
        "m1": _study("Lungs clear.", float("nan"), report="Findings: Lungs clear. Impression: None."),
        # CheXpert Plus style: no findings, hard-wrapped impression with a trailing newline
        "c1": _study(float("nan"), "NO ACUTE\nDISEASE.\n", report="Findings: None. Impression: NO ACUTE\nDISEASE."),
        "s1": _study(None, "Edema."),  # null and no report field
        "s2": _study("nan", "Effusion.", report="x"),  # a "nan" string is text to pandas.notna
        "s3": _study("", " Pneumothorax. ", report="x"),
    }
    path = _write(tmp_path / "ReXRank_ReXGradient_test.json", doc)
    full = load_test_set("example", "findings_impression", data_dir=path)
    got = dict(zip(full["id"], full["reference"]))
    assert got == {
        "m1": "Findings: Lungs clear. Impression: None",
        "c1": "Findings: None Impression: NO ACUTE\nDISEASE.\n",
        "s1": "Findings: None Impression: Edema.",
        "s2": "Findings: nan Impression: Effusion.",
        "s3": "Findings:  Impression:  Pneumothorax. ",
    }
    assert got == {sid: _evaluation_script_reference(study) for sid, study in doc.items()}
    reports = dict(zip(full["id"], full["report"]))
    assert reports["m1"] == doc["m1"]["report"] and reports["s1"] == got["s1"]  # verbatim, or the script's string
    # the normalised sections still treat "", "nan" and NaN as absent
    assert load_test_set("example", "findings", data_dir=path)["id"] == ["m1"]


def test_absent_section_spellings_and_findings_track_exclusion(tmp_path):
    doc = {
        "s1": _study("Lungs clear.", "Normal."),
        "s2": _study(float("nan"), "Edema.", report="Findings: None. Impression: Edema."),
        "s3": _study("nan", "Effusion."),
        "s4": _study("  ", "Pneumothorax."),
        "s5": _study(None, "Atelectasis."),
        "s6": _study("Cardiomegaly.", ""),
    }
    path = _write(tmp_path / "ReXRank_ReXGradient_test.json", doc)
    all_studies = load_all_studies("example", data_dir=path)
    by_id = {r["id"]: r for r in all_studies}
    for sid in ("s2", "s3", "s4", "s5"):
        assert by_id[sid]["section_findings"] is None
    assert by_id["s6"]["section_impression"] is None
    # a file without a report field gets the evaluation script's string; a given one is kept
    assert by_id["s3"]["report"] == "Findings: nan Impression: Effusion."
    assert by_id["s6"]["report"] == "Findings: Cardiomegaly. Impression: "
    assert by_id["s5"]["report"] == "Findings: None Impression: Atelectasis."
    assert by_id["s2"]["report"] == "Findings: None. Impression: Edema."
    findings = load_test_set("example", "findings", data_dir=path)
    assert findings["id"] == ["s1", "s6"]
    assert findings["reference"] == ["Lungs clear.", "Cardiomegaly."]
    full = load_test_set("example", "findings_impression", data_dir=path)
    assert len(full) == 6


def test_study_with_neither_section_is_kept_as_the_evaluation_script_keeps_it(tmp_path):
    # rajpurkarlab/ReXrank example_files/evaluation_script.md: f"Findings: {findings} Impression:
    # {impression}" after `x if pd.notna(x) else None`, for every study of the file
    from rexrank.testsets.loading import track_studies

    doc = {"a": _study("Lungs clear.", "Normal."), "x": _study(None, float("nan")), "y": _study(float("nan"), "nan")}
    path = _write(tmp_path / "ReXRank_ReXGradient_test.json", doc)
    full = load_test_set("example", "findings_impression", data_dir=path)
    assert full["id"] == ["a", "x", "y"]
    assert full["reference"][1:] == ["Findings: None Impression: None", "Findings: None Impression: nan"]
    # the findings track does not score them, and says which studies it leaves out
    findings = track_studies("example", "findings", data_dir=path)
    assert findings.ids == ("a",) and findings.outside_ids == {"x", "y"}


def test_chexpert_plus_shape_keeps_62_of_200_in_findings_track(tmp_path):
    doc = {}
    for i in range(200):
        findings = f"Finding number {i}." if i < 62 else math.nan
        doc[f"patient{i}_study1"] = _study(
            findings, f"Impression {i}.", age=40.0 + i % 30, sex="Female", race="White", ethnicity="Unknown",
            ap_pa=["AP"], section_clinical_history=math.nan,
        )
    data_dir = tmp_path / "chexpert"
    data_dir.mkdir()
    _write(data_dir / "ReXRank_CheXpertPlus.json", doc)
    ds = load_test_set("chexpert_plus", "findings", data_dir=data_dir)
    assert len(ds) == 62
    assert ds[0]["age"] == 40.0 and ds[0]["sex"] == "Female" and ds[0]["ap_pa"] == ["AP"]
    assert ds[0]["section_clinical_history"] is None
    assert len(load_test_set("chexpert_plus", "findings_impression", data_dir=data_dir)) == 200


def test_unknown_items_in_list_fields_stay_in_place(tmp_path):
    # ReXrank's own MIMIC-CXR (frontal_lateral) and CheXpert Plus (ap_pa) files hold NaN items
    doc = {
        "m1": _study("Clear.", "Normal.", frontal_lateral=[float("nan"), "left lateral"], image_path=["a.png", "b.png"]),
        "m2": _study("Clear.", "Normal.", frontal_lateral=["Frontal", None]),
    }
    path = _write(tmp_path / "ReXRank_ReXGradient_test.json", doc)
    rows = {r["id"]: r for r in load_all_studies("example", data_dir=path)}
    assert rows["m1"]["frontal_lateral"] == [None, "left lateral"] and rows["m1"]["image_path"] == ["a.png", "b.png"]
    assert rows["m2"]["frontal_lateral"] == ["Frontal", None]
    bad = _write(tmp_path / "bad.json", {"x": _study("Clear.", "Normal.", frontal_lateral=["Frontal", 3])})
    with pytest.raises(TestSetError, match="expected a list of strings"):
        load_all_studies("example", data_dir=bad)


def test_wrong_study_count_is_refused(tmp_path):
    data_dir = tmp_path / "mimic"
    data_dir.mkdir()
    _write(data_dir / "ReXRank_MIMICCXR_test.json", {"1": _study("Clear.", "Normal.", subject_id=5)})
    with pytest.raises(TestSetError, match="2347 studies, this file has 1"):
        load_test_set("mimic_cxr", data_dir=data_dir)


def test_rexgradient_extras_site_and_abnormal_label(tmp_path):
    spec = TEST_SETS["rexgradient"]
    doc = {f"g{i}": _study("Clear.", "Normal.", site=f"site{i % 3}", is_abnormal=bool(i % 2)) for i in range(spec.n_studies)}
    path = _write(tmp_path / "ReXGradient_test.json", doc)
    ds = load_test_set("rexgradient", data_dir=path)
    assert ds.features["is_abnormal"] == datasets.Value("bool")
    assert ds[1]["site"] == "site1" and ds[1]["is_abnormal"] is True


def test_dua_sets_without_data_dir_say_how_to_get_them():
    with pytest.raises(TestSetError, match="PhysioNet credentialed access"):
        load_test_set("mimic_cxr")
    with pytest.raises(TestSetError, match="Stanford AIMI"):
        load_test_set("chexpert_plus")
    with pytest.raises(TestSetError, match="private"):
        load_test_set("rexgradient")


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(TestSetError, match="unknown test set 'padchest'"):
        load_test_set("padchest")
    with pytest.raises(TestSetError, match="unknown track 'impression'"):
        load_test_set("example", "impression")
    with pytest.raises(TestSetError, match="does not exist"):
        load_test_set("iu_xray", data_dir=tmp_path / "nowhere")
    with pytest.raises(TestSetError, match="none of ReXRank_MIMICCXR_test.json found in --data-dir .* or its mimic_cxr/ sub-folder"):
        load_test_set("mimic_cxr", data_dir=tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(TestSetError, match="not valid JSON"):
        load_test_set("example", data_dir=broken)
    badlist = _write(tmp_path / "badlist.json", {"x": _study("A.", "B.", image_path=[1, 2])})
    with pytest.raises(TestSetError, match="field 'image_path': expected a list of strings"):
        load_test_set("example", data_dir=badlist)


def test_edited_file_is_reread_not_served_from_a_stale_cache(tmp_path):
    path = _write(tmp_path / "sets.json", {"a": _study("Enlarged heart.", "Cardiomegaly.")})
    assert load_test_set("example", data_dir=path)["reference"] == ["Enlarged heart."]
    _write(path, {"a": _study("CHANGED.", "Cardiomegaly.")})
    assert load_test_set("example", data_dir=path)["reference"] == ["CHANGED."]


def test_builder_class_directly_with_data_files(tmp_path):
    from rexrank_datasets import ReXrankTestSet

    path = _write(tmp_path / "x.json", {"a": _study("Clear.", "Normal."), "b": _study("Edema.", "CHF.")})
    builder = ReXrankTestSet(config_name="example", data_files={"test": str(path)}, cache_dir=str(tmp_path / "cache"))
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")
    assert ds["id"] == ["a", "b"]
    assert sorted(c.name for c in ReXrankTestSet.BUILDER_CONFIGS) == sorted(TEST_SETS)


def test_embedded_example_loads_without_data_dir():
    ds = load_test_set("example", "findings")
    assert len(ds) == 19  # EX013 has no findings
    assert "EX013" not in ds["id"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def file_server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_iu_xray_download_is_checksum_pinned(file_server, monkeypatch, tmp_path):
    monkeypatch.setenv("REXRANK_CACHE", str(tmp_path / "own-cache"))
    root, base = file_server
    original = shared_path("data", "iu_xray", "ReXRank_IUXray_test.json")
    (root / "good.json").write_bytes(original.read_bytes())
    (root / "tampered.json").write_bytes(original.read_bytes().replace(b"pneumothorax", b"pneumothoraX", 1))

    with pytest.raises(TestSetError, match="sha256 .* expected"):
        load_test_set("iu_xray", download_url=f"{base}/tampered.json")
    ds = load_test_set("iu_xray", download_url=f"{base}/good.json")
    assert len(ds) == 590
    # now cached: works offline with no URL at all
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert len(load_test_set("iu_xray")) == 590


def test_iu_xray_download_failures_are_clear(file_server, monkeypatch, tmp_path):
    monkeypatch.setenv("REXRANK_CACHE", str(tmp_path / "own-cache"))
    _, base = file_server
    with pytest.raises(TestSetError, match="could not download ReXRank_IUXray_test.json .*--data-dir"):
        load_test_set("iu_xray", download_url=f"{base}/missing.json")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TestSetError, match="not cached and HF_HUB_OFFLINE=1"):
        load_test_set("iu_xray")


def test_track_rows_reads_the_file_the_studies_came_from_and_checks_it(tmp_path, monkeypatch):
    """CRIMSON's patient_context="test_set" reads the test set's rows after the studies were
    resolved: they must come from that same file, not from a second look-up."""
    from rexrank.data import data_path
    from rexrank.testsets.loading import resolve_test_set, track_rows

    studies = json.loads(data_path("example_test.json").read_text())
    for study in studies.values():
        study["context"] = "Indication: from the given copy."
    given = _write(tmp_path / "example_test.json", studies)
    monkeypatch.setenv("REXRANK_DATA_DIR", str(given))
    test = resolve_test_set("example", "findings")
    monkeypatch.delenv("REXRANK_DATA_DIR")  # a second look-up would now find the embedded copy
    rows = track_rows(test)
    assert list(rows["id"]) == list(test.studies.ids)
    assert set(rows["context"]) == {"Indication: from the given copy."}
    for study in studies.values():
        study["context"] = "Indication: edited since."
    _write(given, studies)
    with pytest.raises(TestSetError, match="has changed since its studies were loaded"):
        track_rows(test)
